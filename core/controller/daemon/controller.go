// Package daemon is the DaemonSet controller: one pod per eligible node (node selector,
// required node affinity, taints against the template's tolerations plus the daemon
// tolerations), placed with a required node affinity on the node's name for the scheduler
// to bind, rolled out with RollingUpdate (maxUnavailable, maxSurge) or OnDelete, with
// ControllerRevisions as history and Kubernetes' status counts. It talks to the API only
// through client-go.
package daemon

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
	"github.com/wasmplane/wasmplane/core/controller/replicaset"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
)

// controllerKind is written into the ownerReferences of daemon pods and revisions.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Failed daemon pods are replaced after a backoff from 1 s doubling to 15 minutes per
// node, as Kubernetes does, so a pod that fails at once does not spin.
const (
	failedBackoffInitial = time.Second
	failedBackoffMax     = 15 * time.Minute
)

// Options tunes a Controller; the zero value is Kubernetes' behaviour.
type Options struct {
	// Logger receives logs (nil = discarded).
	Logger *slog.Logger
	// Recorder receives events (SuccessfulCreate, FailedCreate, SuccessfulDelete); nil = none.
	Recorder record.EventRecorder
}

// Controller reconciles DaemonSets.
type Controller struct {
	client       kubernetes.Interface
	dsLister     appslisters.DaemonSetLister
	podLister    corelisters.PodLister
	nodeLister   corelisters.NodeLister
	history      *history.History
	synced       []cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *replicaset.Expectations
	backoff      *flowcontrol.Backoff
	log          *slog.Logger
	recorder     record.EventRecorder
}

// New returns a DaemonSet controller fed by factory's DaemonSet, Pod, Node and
// ControllerRevision informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dsInf := factory.Apps().V1().DaemonSets()
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	crInf := factory.Apps().V1().ControllerRevisions()
	c := &Controller{
		client: client, dsLister: dsInf.Lister(), podLister: podInf.Lister(), nodeLister: nodeInf.Lister(),
		history: &history.History{Client: client, Lister: crInf.Lister()},
		synced:  []cache.InformerSynced{dsInf.Informer().HasSynced, podInf.Informer().HasSynced, nodeInf.Informer().HasSynced, crInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "daemonset"}),
		expectations: replicaset.NewExpectations(nil),
		backoff:      flowcontrol.NewBackOff(failedBackoffInitial, failedBackoffMax),
		log:          opts.Logger.With("controller", "daemonset"),
		recorder:     opts.Recorder,
	}
	if _, err := dsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: func(obj any) {
			if ds := dsFrom(obj); ds != nil {
				c.expectations.Delete(keyOf(ds))
				c.enqueue(ds)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("adding DaemonSet handler: %w", err)
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.podEvent(nil, obj.(*corev1.Pod)) },
		UpdateFunc: func(oldObj, obj any) {
			if o, n := oldObj.(*corev1.Pod), obj.(*corev1.Pod); o.ResourceVersion != n.ResourceVersion {
				c.podEvent(o, n)
			}
		},
		DeleteFunc: c.podDeleted,
	}); err != nil {
		return nil, fmt.Errorf("adding pod handler: %w", err)
	}
	if _, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(oldObj, obj any) {
			if nodeChanged(oldObj.(*corev1.Node), obj.(*corev1.Node)) {
				c.enqueueAll()
			}
		},
		DeleteFunc: func(any) { c.enqueueAll() },
	}); err != nil {
		return nil, fmt.Errorf("adding node handler: %w", err)
	}
	if _, err := crInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueOwnerOf,
		UpdateFunc: func(_, obj any) { c.enqueueOwnerOf(obj) },
		DeleteFunc: c.enqueueOwnerOf,
	}); err != nil {
		return nil, fmt.Errorf("adding ControllerRevision handler: %w", err)
	}
	return c, nil
}

// Run syncs DaemonSets with workers goroutines until ctx ends, then waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, c.synced, c.sync, c.log, "daemonset")
}

func keyOf(obj metav1.Object) string { return obj.GetNamespace() + "/" + obj.GetName() }

func dsFrom(obj any) *appsv1.DaemonSet {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	ds, _ := obj.(*appsv1.DaemonSet)
	return ds
}

func (c *Controller) enqueue(obj any) {
	if ds := dsFrom(obj); ds != nil {
		c.queue.Add(keyOf(ds))
	}
}

func (c *Controller) enqueueAll() {
	all, err := c.dsLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range all {
		c.queue.Add(keyOf(ds))
	}
}

// nodeChanged reports whether a node changed in a way that can change where daemon
// pods belong or whether they count as available.
func nodeChanged(o, n *corev1.Node) bool {
	return !reflect.DeepEqual(o.Labels, n.Labels) || !reflect.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
		o.Spec.Unschedulable != n.Spec.Unschedulable
}

// ownerOf returns the DaemonSet ref points to, if the cache knows it under that uid.
func (c *Controller) ownerOf(ns string, ref *metav1.OwnerReference) *appsv1.DaemonSet {
	ds, _ := controllerref.Resolve(ref, controllerKind, c.dsLister.DaemonSets(ns).Get)
	return ds
}

func (c *Controller) enqueueOwnerOf(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if m, ok := obj.(metav1.Object); ok {
		if ds := c.ownerOf(m.GetNamespace(), metav1.GetControllerOfNoCopy(m)); ds != nil {
			c.queue.Add(keyOf(ds))
		}
	}
}

// podEvent handles a pod added (old nil) or changed: its DaemonSet syncs, and an orphan
// wakes the DaemonSets whose selector matches it, which may adopt it.
func (c *Controller) podEvent(old, pod *corev1.Pod) {
	if pod.DeletionTimestamp != nil {
		c.podDeleted(pod)
		return
	}
	if old != nil {
		if oref := metav1.GetControllerOfNoCopy(old); oref != nil {
			if nref := metav1.GetControllerOfNoCopy(pod); nref == nil || nref.UID != oref.UID {
				if ds := c.ownerOf(old.Namespace, oref); ds != nil {
					c.queue.Add(keyOf(ds))
				}
			}
		}
	}
	if ds := c.ownerOf(pod.Namespace, metav1.GetControllerOfNoCopy(pod)); ds != nil {
		if old == nil {
			c.expectations.CreationObserved(keyOf(ds))
		}
		c.queue.Add(keyOf(ds))
		// A pod that just became ready becomes available minReadySeconds later.
		if old != nil && !replicaset.IsPodReady(old) && replicaset.IsPodReady(pod) && ds.Spec.MinReadySeconds > 0 {
			c.queue.AddAfter(keyOf(ds), time.Duration(ds.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if metav1.GetControllerOfNoCopy(pod) != nil {
		return
	}
	all, err := c.dsLister.DaemonSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range all {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			c.queue.Add(keyOf(ds))
		}
	}
}

func (c *Controller) podDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if ds := c.ownerOf(pod.Namespace, metav1.GetControllerOfNoCopy(pod)); ds != nil {
		c.expectations.DeletionObserved(keyOf(ds), keyOf(pod))
		c.queue.Add(keyOf(ds))
	}
}

// sync is Kubernetes' syncDaemonSet: keep the history, put pods where they belong, roll
// out the current revision, trim history and write status.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil //nolint:nilerr // a malformed key can never succeed
	}
	ds, err := c.dsLister.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Delete(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading DaemonSet %s: %w", key, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil //nolint:nilerr // validation keeps such selectors out; nothing to do
	}
	if ds.DeletionTimestamp != nil {
		return nil // the garbage collector takes the pods
	}
	ds = ds.DeepCopy()
	canAdopt := controllerref.Recheck(ds, controllerKind.Kind, func(ctx context.Context) (*appsv1.DaemonSet, error) {
		return c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	})
	revs, err := c.history.Claim(ctx, ds, controllerKind, sel, canAdopt)
	if err != nil {
		return err
	}
	data, err := history.TemplatePatch(&ds.Spec.Template)
	if err != nil {
		return err
	}
	collisions := ds.Status.CollisionCount
	if collisions == nil {
		collisions = new(int32)
	}
	cur, revs, err := c.history.Ensure(ctx, ds, controllerKind, ds.Spec.Template.Labels, data, revs, collisions)
	if err != nil {
		return err
	}
	if *collisions > 0 {
		ds.Status.CollisionCount = collisions
	}
	hash := cur.Labels[history.HashLabel]

	nodes, orphans, err := c.nodeStates(ctx, ds, sel, canAdopt)
	if err != nil {
		return err
	}
	now := metav1.Now()
	var actErr error
	if c.expectations.Satisfied(key) {
		c.backoff.GC() // forget nodes whose pods stopped failing long ago
		p := manage(ds, nodes, orphans, hash, func(node string) bool {
			id := key + "/" + node
			if c.backoff.IsInBackOffSinceUpdate(id, c.backoff.Clock.Now()) {
				return true
			}
			c.backoff.Next(id, c.backoff.Clock.Now())
			return false
		})
		if p.empty() && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
			p = rollingUpdate(ds, nodes, hash, now)
		}
		if len(p.failedWait) > 0 {
			c.queue.AddAfter(key, failedBackoffInitial)
		}
		actErr = c.act(ctx, ds, key, hash, p)
	}
	inUse := map[string]bool{}
	for _, n := range nodes {
		for _, pod := range n.pods {
			inUse[pod.Labels[history.HashLabel]] = true
		}
	}
	if err := c.history.Truncate(ctx, revs, int(*ds.Spec.RevisionHistoryLimit), func(r *appsv1.ControllerRevision) bool {
		return r.Name == cur.Name || inUse[r.Labels[history.HashLabel]]
	}); err != nil {
		actErr = errors.Join(actErr, err)
	}
	st := calculateStatus(ds, nodes, hash, now)
	if err := c.updateStatus(ctx, ds, st); err != nil {
		return errors.Join(actErr, err)
	}
	if actErr == nil && ds.Spec.MinReadySeconds > 0 && st.NumberReady != st.NumberAvailable {
		c.queue.AddAfter(key, time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
	return actErr
}

// nodeStates claims ds's pods and groups them by node; pods whose node is unknown are
// returned apart.
func (c *Controller) nodeStates(ctx context.Context, ds *appsv1.DaemonSet, sel labels.Selector, canAdopt func(context.Context) error) ([]nodeState, []*corev1.Pod, error) {
	all, err := c.podLister.Pods(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	m := &controllerref.Manager[*corev1.Pod]{
		Owner: ds, Kind: controllerKind, Selector: sel, CanAdopt: canAdopt, Patch: controllerref.PodPatcher(c.client, ds.Namespace),
	}
	pods, err := m.Claim(ctx, all)
	if err != nil {
		return nil, nil, err
	}
	byNode := map[string][]*corev1.Pod{}
	for _, p := range pods {
		n := targetNode(p)
		byNode[n] = append(byNode[n], p)
	}
	nodeList, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	states := make([]nodeState, 0, len(nodeList))
	for _, node := range nodeList {
		run, stay := shouldRun(ds, node)
		states = append(states, nodeState{name: node.Name, run: run, stay: stay, pods: byNode[node.Name]})
		delete(byNode, node.Name)
	}
	var orphans []*corev1.Pod
	for _, ps := range byNode {
		orphans = append(orphans, ps...)
	}
	return states, orphans, nil
}

// act carries a plan out, recording expectations first so that the next sync waits for
// the informer to show its own writes.
func (c *Controller) act(ctx context.Context, ds *appsv1.DaemonSet, key, hash string, p plan) error {
	keys := make([]string, len(p.remove))
	for i, pod := range p.remove {
		keys[i] = keyOf(pod)
	}
	c.expectations.Expect(key, len(p.create), keys)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, node := range p.create {
		wg.Go(func() {
			pod := newPod(ds, hash, node)
			created, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				c.expectations.CreationObserved(key)
				if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					return
				}
				c.event(ds, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
				mu.Lock()
				errs = append(errs, fmt.Errorf("creating a pod for node %s: %w", node, err))
				mu.Unlock()
				return
			}
			c.event(ds, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", created.Name)
		})
	}
	for _, pod := range p.remove {
		wg.Go(func() {
			err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
			if err != nil {
				c.expectations.DeletionObserved(key, keyOf(pod))
				if !apierrors.IsNotFound(err) {
					c.event(ds, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
					mu.Lock()
					errs = append(errs, fmt.Errorf("deleting pod %s: %w", pod.Name, err))
					mu.Unlock()
				}
				return
			}
			c.event(ds, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", pod.Name)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Controller) event(ds *appsv1.DaemonSet, eventtype, reason, format string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(ds, eventtype, reason, format, args...)
	}
}

// updateStatus writes st unless it is already there.
func (c *Controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, st appsv1.DaemonSetStatus) error {
	if ds.Status.CollisionCount != nil {
		st.CollisionCount = ds.Status.CollisionCount
	}
	stored, err := c.dsLister.DaemonSets(ds.Namespace).Get(ds.Name)
	if err == nil && reflect.DeepEqual(stored.Status, st) {
		return nil
	}
	ds.Status = st
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of DaemonSet %s: %w", keyOf(ds), err)
	}
	return nil
}
