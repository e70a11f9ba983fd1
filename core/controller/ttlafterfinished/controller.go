// Package ttlafterfinished is the TTL-after-finished controller: it deletes a finished
// Job (and, through background propagation, its pods) once
// spec.ttlSecondsAfterFinished has passed since it finished.
package ttlafterfinished

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Controller deletes expired finished Jobs.
type Controller struct {
	client    kubernetes.Interface
	jobLister batchlisters.JobLister
	synced    cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	log       *slog.Logger
	clock     clock.PassiveClock
}

// New returns a controller fed by factory's Job informer; clk nil means the real clock.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, clk clock.PassiveClock, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	inf := factory.Batch().V1().Jobs()
	c := &Controller{client: client, jobLister: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "ttl-after-finished"}),
		log: log.With("controller", "ttl-after-finished"), clock: clk}
	enqueue := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok && j.DeletionTimestamp == nil && j.Spec.TTLSecondsAfterFinished != nil {
			if _, done := finishedAt(j); done {
				c.queue.Add(j.Namespace + "/" + j.Name)
			}
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) },
	}); err != nil {
		return nil, fmt.Errorf("adding Job handler: %w", err)
	}
	return c, nil
}

// Run works with workers goroutines until ctx ends, then waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.RunRequeueing(ctx, c.queue, workers, []cache.InformerSynced{c.synced}, c.sync, c.log, "job")
}

// finishedAt is when a Job finished: its completion time, or when it got Complete or
// Failed.
func finishedAt(j *batchv1.Job) (time.Time, bool) {
	for _, cond := range j.Status.Conditions {
		if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == corev1.ConditionTrue {
			if cond.Type == batchv1.JobComplete && j.Status.CompletionTime != nil {
				return j.Status.CompletionTime.Time, true
			}
			return cond.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// expiresIn is how long until j may be deleted; ok is false when it never expires.
func expiresIn(j *batchv1.Job, now time.Time) (time.Duration, bool) {
	if j.DeletionTimestamp != nil || j.Spec.TTLSecondsAfterFinished == nil {
		return 0, false
	}
	t, done := finishedAt(j)
	if !done {
		return 0, false
	}
	return t.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second).Sub(now), true
}

// sync deletes the Job if it has expired, checking a fresh copy first so a TTL just
// lengthened is honoured; otherwise it returns when to look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil //nolint:nilerr // a malformed key can never succeed
	}
	j, err := c.jobLister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading Job %s: %w", key, err)
	}
	if left, ok := expiresIn(j, c.clock.Now()); !ok || left > 0 {
		return left, nil
	}
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("re-reading Job %s: %w", key, err)
	}
	if left, ok := expiresIn(fresh, c.clock.Now()); !ok || left > 0 {
		return left, nil
	}
	c.log.Info("deleting expired Job", "job", key)
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &fresh.UID, ResourceVersion: &fresh.ResourceVersion},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("deleting expired Job %s: %w", key, err)
	}
	return 0, nil
}
