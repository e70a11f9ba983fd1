// Package statefulset is the StatefulSet controller: pods with stable ordinal names and
// hostnames under the governing Service, created and deleted in order (OrderedReady) or
// all at once (Parallel), a PersistentVolumeClaim per ordinal and claim template, rolling
// updates from the highest ordinal down to the partition (or OnDelete), ControllerRevisions
// as history and Kubernetes' status. It talks to the API only through client-go.
package statefulset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/controllerref"
	"github.com/wasmplane/wasmplane/core/controller/internal/history"
	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// controllerKind is written into the ownerReferences of a StatefulSet's pods, claims and
// revisions.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// Options tunes a Controller; the zero value is Kubernetes' behaviour.
type Options struct {
	// Logger receives logs (nil = discarded).
	Logger *slog.Logger
	// Recorder receives events (SuccessfulCreate, SuccessfulDelete, FailedCreate); nil = none.
	Recorder record.EventRecorder
}

// Controller reconciles StatefulSets.
type Controller struct {
	client    kubernetes.Interface
	setLister appslisters.StatefulSetLister
	podLister corelisters.PodLister
	pvcLister corelisters.PersistentVolumeClaimLister
	history   *history.History
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	log       *slog.Logger
	recorder  record.EventRecorder
}

// New returns a StatefulSet controller fed by factory's StatefulSet, Pod,
// PersistentVolumeClaim and ControllerRevision informers. Pods have fixed names, so a
// write the cache has not caught up with fails with AlreadyExists or NotFound and needs
// no expectations.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	setInf := factory.Apps().V1().StatefulSets()
	podInf := factory.Core().V1().Pods()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	crInf := factory.Apps().V1().ControllerRevisions()
	c := &Controller{
		client: client, setLister: setInf.Lister(), podLister: podInf.Lister(), pvcLister: pvcInf.Lister(),
		history: &history.History{Client: client, Lister: crInf.Lister()},
		synced:  []cache.InformerSynced{setInf.Informer().HasSynced, podInf.Informer().HasSynced, pvcInf.Informer().HasSynced, crInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "statefulset"}),
		log:      opts.Logger.With("controller", "statefulset"),
		recorder: opts.Recorder,
	}
	if _, err := setInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("adding StatefulSet handler: %w", err)
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.podEvent,
		UpdateFunc: func(oldObj, obj any) {
			if oldObj.(*corev1.Pod).ResourceVersion != obj.(*corev1.Pod).ResourceVersion {
				c.podEvent(oldObj)
				c.podEvent(obj)
			}
		},
		DeleteFunc: c.podEvent,
	}); err != nil {
		return nil, fmt.Errorf("adding pod handler: %w", err)
	}
	if _, err := crInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.ownerEvent, DeleteFunc: c.ownerEvent,
	}); err != nil {
		return nil, fmt.Errorf("adding ControllerRevision handler: %w", err)
	}
	return c, nil
}

// Run syncs StatefulSets with workers goroutines until ctx ends, then waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, c.synced, c.sync, c.log, "statefulset")
}

func keyOf(obj metav1.Object) string { return obj.GetNamespace() + "/" + obj.GetName() }

func unwrap(obj any) any {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}

func (c *Controller) enqueue(obj any) {
	if set, ok := unwrap(obj).(*appsv1.StatefulSet); ok {
		c.queue.Add(keyOf(set))
	}
}

// ownerEvent wakes the StatefulSet controlling obj.
func (c *Controller) ownerEvent(obj any) {
	m, ok := unwrap(obj).(metav1.Object)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return
	}
	c.queue.Add(m.GetNamespace() + "/" + ref.Name)
}

// podEvent wakes the pod's StatefulSet, or for an orphan the StatefulSets whose selector
// matches it (they may adopt it).
func (c *Controller) podEvent(obj any) {
	pod, ok := unwrap(obj).(*corev1.Pod)
	if !ok {
		return
	}
	if metav1.GetControllerOfNoCopy(pod) != nil {
		c.ownerEvent(pod)
		return
	}
	sets, err := c.setLister.StatefulSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, set := range sets {
		if sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			c.queue.Add(keyOf(set))
		}
	}
}

// sync is Kubernetes' syncStatefulSet.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil //nolint:nilerr // a malformed key can never succeed
	}
	set, err := c.setLister.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading StatefulSet %s: %w", key, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || sel.Empty() || set.DeletionTimestamp != nil {
		return nil //nolint:nilerr // validation keeps bad selectors out; a dying set is the garbage collector's
	}
	set = set.DeepCopy()
	canAdopt := controllerref.Recheck(set, controllerKind.Kind, func(ctx context.Context) (*appsv1.StatefulSet, error) {
		return c.client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	})
	revs, err := c.history.Claim(ctx, set, controllerKind, sel, canAdopt)
	if err != nil {
		return err
	}
	data, err := history.TemplatePatch(&set.Spec.Template)
	if err != nil {
		return err
	}
	collisions := ptr.To(ptr.Deref(set.Status.CollisionCount, 0))
	update, revs, err := c.history.Ensure(ctx, set, controllerKind, set.Spec.Template.Labels, data, revs, collisions)
	if err != nil {
		return err
	}
	if *collisions > 0 {
		set.Status.CollisionCount = collisions
	}
	current := update
	for _, r := range revs {
		if r.Name == set.Status.CurrentRevision {
			current = r
		}
	}
	pods, err := c.claimPods(ctx, set, sel, canAdopt)
	if err != nil {
		return err
	}
	now := time.Now()
	p := decide(set, pods, update.Name, now)
	actErr := c.act(ctx, set, p, current, update)
	if err := c.history.Truncate(ctx, revs, int(ptr.Deref(set.Spec.RevisionHistoryLimit, 10)), func(r *appsv1.ControllerRevision) bool {
		if r.Name == current.Name || r.Name == update.Name {
			return true
		}
		for _, pod := range pods {
			if pod.Labels[history.HashLabel] == r.Name {
				return true
			}
		}
		return false
	}); err != nil {
		actErr = errors.Join(actErr, err)
	}
	st := calculateStatus(set, pods, current.Name, update.Name, now)
	if err := c.updateStatus(ctx, set, st); err != nil {
		return errors.Join(actErr, err)
	}
	if actErr == nil && set.Spec.MinReadySeconds > 0 && st.ReadyReplicas != st.AvailableReplicas {
		c.queue.AddAfter(key, time.Duration(set.Spec.MinReadySeconds)*time.Second)
	}
	return actErr
}

// claimPods returns set's member pods (named <set>-<ordinal>) by ordinal, adopting
// orphans its selector matches and releasing pods it no longer selects.
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet, sel labels.Selector, canAdopt func(context.Context) error) (map[int]*corev1.Pod, error) {
	all, err := c.podLister.Pods(set.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var members []*corev1.Pod
	for _, p := range all {
		if ordinalOf(set.Name, p.Name) >= 0 {
			members = append(members, p)
		}
	}
	m := &controllerref.Manager[*corev1.Pod]{
		Owner: set, Kind: controllerKind, Selector: sel, CanAdopt: canAdopt, Patch: controllerref.PodPatcher(c.client, set.Namespace),
	}
	claimed, err := m.Claim(ctx, members)
	if err != nil {
		return nil, err
	}
	out := make(map[int]*corev1.Pod, len(claimed))
	for _, p := range claimed {
		out[ordinalOf(set.Name, p.Name)] = p
	}
	return out, nil
}

// act carries out p: claims then pods for the ordinals to create, and the deletions.
func (c *Controller) act(ctx context.Context, set *appsv1.StatefulSet, p plan, current, update *appsv1.ControllerRevision) error {
	currentTmpl := &set.Spec.Template
	if current.Name != update.Name {
		t, err := history.Template(current)
		if err != nil {
			return err
		}
		currentTmpl = t
	}
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, ord := range p.create {
		wg.Go(func() {
			if err := c.createClaims(ctx, set, ord); err != nil {
				fail(err)
				return
			}
			tmpl, rev := &set.Spec.Template, update.Name
			if revisionFor(set, ord, current.Name, update.Name) == current.Name {
				tmpl, rev = currentTmpl, current.Name
			}
			pod := newPod(set, tmpl, rev, ord)
			_, err := c.client.CoreV1().Pods(set.Namespace).Create(ctx, pod, metav1.CreateOptions{})
			switch {
			case err == nil:
				c.event(set, corev1.EventTypeNormal, "SuccessfulCreate", "create Pod %s in StatefulSet %s successful", pod.Name, set.Name)
			case apierrors.IsAlreadyExists(err):
				// The cache lags behind our own earlier create.
			default:
				c.event(set, corev1.EventTypeWarning, "FailedCreate", "create Pod %s in StatefulSet %s failed error: %v", pod.Name, set.Name, err)
				fail(fmt.Errorf("creating pod %s: %w", pod.Name, err))
			}
		})
	}
	for _, pod := range p.condemned {
		wg.Go(func() {
			if deletesClaimsOnScaleDown(set) {
				if err := c.giveClaimsTo(ctx, set, pod); err != nil {
					fail(err)
					return
				}
			}
			if err := c.deletePod(ctx, set, pod); err != nil {
				fail(err)
			}
		})
	}
	for _, pod := range p.remove {
		wg.Go(func() {
			if err := c.deletePod(ctx, set, pod); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Controller) deletePod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		c.event(set, corev1.EventTypeWarning, "FailedDelete", "delete Pod %s in StatefulSet %s failed error: %v", pod.Name, set.Name, err)
		return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
	}
	if err == nil {
		c.event(set, corev1.EventTypeNormal, "SuccessfulDelete", "delete Pod %s in StatefulSet %s successful", pod.Name, set.Name)
	}
	return nil
}

// createClaims creates the claims of ordinal that do not exist yet.
func (c *Controller) createClaims(ctx context.Context, set *appsv1.StatefulSet, ordinal int) error {
	for _, claim := range newClaims(set, ordinal) {
		if _, err := c.pvcLister.PersistentVolumeClaims(set.Namespace).Get(claim.Name); err == nil {
			continue
		}
		_, err := c.client.CoreV1().PersistentVolumeClaims(set.Namespace).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			c.event(set, corev1.EventTypeWarning, "FailedCreate", "create Claim %s for Pod %s in StatefulSet %s failed error: %v",
				claim.Name, podName(set, ordinal), set.Name, err)
			return fmt.Errorf("creating PersistentVolumeClaim %s: %w", claim.Name, err)
		}
	}
	return nil
}

// giveClaimsTo makes a condemned pod an owner of its claims (whenScaled: Delete), so the
// garbage collector deletes them once the pod is gone.
func (c *Controller) giveClaimsTo(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	ord := ordinalOf(set.Name, pod.Name)
	for _, ct := range set.Spec.VolumeClaimTemplates {
		name := claimName(set, ct.Name, ord)
		patch := fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":%q,"uid":%q}]}}`, pod.Name, pod.UID)
		_, err := c.client.CoreV1().PersistentVolumeClaims(set.Namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("handing PersistentVolumeClaim %s to pod %s: %w", name, pod.Name, err)
		}
	}
	return nil
}

func (c *Controller) event(set *appsv1.StatefulSet, eventtype, reason, format string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(set, eventtype, reason, format, args...)
	}
}

// updateStatus writes st unless it is already there.
func (c *Controller) updateStatus(ctx context.Context, set *appsv1.StatefulSet, st appsv1.StatefulSetStatus) error {
	if set.Status.CollisionCount != nil {
		st.CollisionCount = set.Status.CollisionCount
	}
	stored, err := c.setLister.StatefulSets(set.Namespace).Get(set.Name)
	if err == nil && reflect.DeepEqual(stored.Status, st) {
		return nil
	}
	set.Status = st
	if _, err := c.client.AppsV1().StatefulSets(set.Namespace).UpdateStatus(ctx, set, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of StatefulSet %s: %w", keyOf(set), err)
	}
	return nil
}
