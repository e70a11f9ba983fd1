package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/wasmplane/wasmplane/core/controller/internal/controllerref"
	"github.com/wasmplane/wasmplane/core/controller/internal/slowstart"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// act carries out r: pod deletions first, then the creations and the status, and only
// once the status holds the uncounted pods the release of their finalizers
// (expectations recorded before the calls). When a sync both creates pods and releases
// finalizers, the two go at the same time after a status whose active count leaves out
// the pods not created yet: one after the other they made every sync of a busy Job two
// chains of round trips long. The next sync, which their creation events start, writes
// the count with them, so the stored count never includes a pod that does not exist
// (kube-controller-manager writes it after creating them).
func (c *Controller) act(ctx context.Context, job *batchv1.Job, r result) error {
	key := keyOf(job)
	var errs []error
	if len(r.delete) > 0 {
		keys := make([]string, len(r.delete))
		for i, p := range r.delete {
			keys[i] = keyOf(p)
		}
		c.expectations.ExpectDeletions(key, keys)
		for _, p := range r.delete {
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if err != nil {
				c.expectations.DeletionObserved(key, keyOf(p))
				if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("deleting pod %s: %w", keyOf(p), err))
				}
				continue
			}
			c.recorder.Eventf(job, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", p.Name)
		}
	}
	overlap := len(r.create) > 0 && len(r.release) > 0
	if len(r.create) > 0 && !overlap {
		errs = append(errs, c.createPods(ctx, job, r))
	}
	status := r.status
	if overlap {
		status.Active = max(status.Active-int32(len(r.create)), 0)
	}
	if !apiequality.Semantic.DeepEqual(job.Status, status) {
		j := job.DeepCopy()
		j.Status = status
		updated, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{})
		if err != nil {
			// Without the stored uncounted list no finalizer may go; the creations
			// still do.
			if overlap {
				errs = append(errs, c.createPods(ctx, job, r))
			}
			return errors.Join(append(errs, fmt.Errorf("updating status of Job %s: %w", key, err))...)
		}
		c.wrote(key, updated)
	}
	var wg sync.WaitGroup
	var createErr, releaseErr error
	if overlap {
		wg.Go(func() { createErr = c.createPods(ctx, job, r) })
	}
	wg.Go(func() { _, releaseErr = c.removeFinalizers(ctx, key, r.release) })
	wg.Wait()
	errs = append(errs, createErr, releaseErr)
	for _, e := range r.events {
		c.recorder.Event(job, e.typ, e.reason, e.msg)
	}
	return errors.Join(errs...)
}

// createPods creates r's pods in slow-start batches, as kube-controller-manager's: one
// at a time they would cap a Job at one pod per API round trip.
func (c *Controller) createPods(ctx context.Context, job *batchv1.Job, r result) error {
	key := keyOf(job)
	c.expectations.ExpectCreations(key, len(r.create))
	var next atomic.Int64
	ok, err := slowstart.Batch(ctx, len(r.create), 1, func(ctx context.Context) error {
		idx := r.create[next.Add(1)-1]
		pod := podFromTemplate(job, idx)
		if counts, ok := r.failureCounts[idx]; ok {
			setFailureCounts(pod, counts)
		}
		created, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				// Not an error, but this creation will never be observed either.
				c.expectations.CreationObserved(key)
				return nil
			}
			c.recorder.Eventf(job, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
			return fmt.Errorf("creating pod for Job %s: %w", key, err)
		}
		c.recorder.Eventf(job, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", created.Name)
		return nil
	})
	// Creations that failed or were never tried will never be observed.
	if skipped := len(r.create) - ok; skipped > 0 {
		c.expectations.LowerCreations(key, skipped)
	}
	return err
}

// removeFinalizers drops the tracking finalizer from pods, all at once as
// kube-controller-manager does (the controller's client limits the rate): the next
// sync of the Job waits for the slowest of them, so waves of a few would each add a
// round trip. It returns how many it released. Each removal is expected before it is
// sent, so that the pod event it causes, which may come before the call returns, clears
// it.
func (c *Controller) removeFinalizers(ctx context.Context, key string, pods []*corev1.Pod) (int, error) {
	var (
		mu   sync.Mutex
		errs []error
		n    int
		wg   sync.WaitGroup
	)
	for _, p := range pods {
		if !hasFinalizer(p) {
			continue
		}
		c.removals.expect(key, p.UID)
		wg.Go(func() {
			err := c.patchOutFinalizer(ctx, p)
			if err != nil {
				c.removals.observed(key, p.UID)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("removing the tracking finalizer of pod %s: %w", keyOf(p), err))
				return
			}
			n++
		})
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// patchOutFinalizer removes the finalizer with a JSON patch that first tests the entry
// it removes, so a finalizer someone else added or removed meanwhile is never dropped.
func (c *Controller) patchOutFinalizer(ctx context.Context, p *corev1.Pod) error {
	i := slices.Index(p.Finalizers, TrackingFinalizer)
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/finalizers/" + strconv.Itoa(i), "value": TrackingFinalizer},
		{"op": "remove", "path": "/metadata/finalizers/" + strconv.Itoa(i)},
	})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if apierrors.IsInvalid(err) {
		// The list moved under us (the test failed): read it again and retry once.
		fresh, gerr := c.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		if fresh.UID != p.UID || !hasFinalizer(fresh) {
			return nil
		}
		return c.patchOutFinalizer(ctx, fresh)
	}
	return err
}

// podFromTemplate builds a pod of job; idx is its completion index, or -1.
func podFromTemplate(job *batchv1.Job, idx int) *corev1.Pod {
	t := job.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    job.Name + "-",
			Namespace:       job.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      append(t.Finalizers, TrackingFinalizer),
			OwnerReferences: []metav1.OwnerReference{*controllerref.NewControllerRef(job, controllerKind)},
		},
		Spec: t.Spec,
	}
	if idx >= 0 {
		s := strconv.Itoa(idx)
		pod.GenerateName = fmt.Sprintf("%s-%d-", job.Name, idx)
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Annotations[CompletionIndexKey] = s
		pod.Labels[CompletionIndexKey] = s
		if pod.Spec.Hostname == "" {
			pod.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, idx)
		}
		env := corev1.EnvVar{Name: CompletionIndexEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			APIVersion: "v1", FieldPath: fmt.Sprintf("metadata.annotations['%s']", CompletionIndexKey)}}}
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				cs[i].Env = append(cs[i].Env, env)
			}
		}
	}
	return pod
}

// setFailureCounts writes the per-index failure counters a pod of a Job with
// backoffLimitPerIndex continues from; the ignored count only once there is one.
func setFailureCounts(pod *corev1.Pod, counts [2]int32) {
	pod.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(counts[0]))
	if counts[1] > 0 {
		pod.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(counts[1]))
	}
}
