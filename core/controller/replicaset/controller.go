// Package replicaset is the ReplicaSet controller: it keeps the number of active pods a
// ReplicaSet owns equal to spec.replicas (the seed's manageReplicas) and reports status. It
// talks to the API only through client-go.
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"github.com/wasmplane/wasmplane/core/controller/internal/slowstart"
	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	"log/slog"
	"reflect"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/controllerref"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// BurstReplicas is how many pods one sync creates or deletes at most, as in Kubernetes.
const BurstReplicas = 500

// controllerKind is written into the ownerReferences of the pods a ReplicaSet creates.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// Owners is the kind of object a Controller reconciles, seen as ReplicaSets: ReplicaSets
// themselves, or ReplicationControllers through an adapter, as kube-controller-manager's
// replication manager runs the ReplicaSet controller's code over converted objects.
type Owners struct {
	// Kind is the owners' group/version/kind, written into the ownerReferences of the
	// pods the controller creates and matched against those of the pods it finds.
	Kind schema.GroupVersionKind
	// Lister reads owners from the informer's cache.
	Lister OwnerLister
	// Informer delivers the owners, as *appsv1.ReplicaSet, to the controller's handlers.
	Informer OwnerInformer
	// Get reads one owner from the API server (a quorum read before adopting pods).
	Get func(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	// UpdateStatus writes an owner's status and returns the owner as stored.
	UpdateStatus func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
	// EventObject is the object events about an owner are recorded on (the original
	// kind, so that `kubectl describe` of it shows them).
	EventObject func(rs *appsv1.ReplicaSet) runtime.Object
}

// OwnerLister reads owners, as ReplicaSets, from a cache.
type OwnerLister interface {
	ReplicaSets(namespace string) appslisters.ReplicaSetNamespaceLister
}

// OwnerInformer is the part of a shared informer the controller uses.
type OwnerInformer interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	HasSynced() bool
}

// replicaSetOwners is Owners for ReplicaSets themselves.
func replicaSetOwners(client kubernetes.Interface, factory informers.SharedInformerFactory) *Owners {
	inf := factory.Apps().V1().ReplicaSets()
	return &Owners{
		Kind: controllerKind, Lister: inf.Lister(), Informer: inf.Informer(),
		Get: func(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
			return client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		UpdateStatus: func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
			return client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
		},
		EventObject: func(rs *appsv1.ReplicaSet) runtime.Object { return rs },
	}
}

// Options tunes a Controller; the zero value is Kubernetes' behaviour.
type Options struct {
	// BurstReplicas caps creations/deletions per sync (default BurstReplicas).
	BurstReplicas int
	// Logger receives logs (nil = discarded).
	Logger *slog.Logger
	// WrapPodHandler, when set, wraps the pod event handler; tests use it to simulate an
	// informer that lags behind the API server.
	WrapPodHandler func(cache.ResourceEventHandler) cache.ResourceEventHandler
	// Recorder receives Kubernetes' events (SuccessfulCreate, FailedCreate,
	// SuccessfulDelete); nil = none.
	Recorder record.EventRecorder
	// Owners is what the controller reconciles (default ReplicaSets from the factory).
	Owners *Owners
	// Name names the controller in logs and its queue (default "replicaset").
	Name string
}

// Controller reconciles ReplicaSets.
type Controller struct {
	client       kubernetes.Interface
	owners       *Owners
	rsLister     OwnerLister
	podLister    corelisters.PodLister
	rsSynced     cache.InformerSynced
	podSynced    cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *Expectations
	burst        int
	log          *slog.Logger
	name         string
	recorder     record.EventRecorder
}

// New returns a ReplicaSet controller fed by factory's ReplicaSet (or opts.Owners) and Pod
// informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.BurstReplicas <= 0 {
		opts.BurstReplicas = BurstReplicas
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Owners == nil {
		opts.Owners = replicaSetOwners(client, factory)
	}
	if opts.Name == "" {
		opts.Name = "replicaset"
	}
	podInf := factory.Core().V1().Pods()
	c := &Controller{
		client: client, owners: opts.Owners, rsLister: opts.Owners.Lister, podLister: podInf.Lister(),
		rsSynced: opts.Owners.Informer.HasSynced, podSynced: podInf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: opts.Name}),
		expectations: NewExpectations(nil),
		burst:        opts.BurstReplicas,
		log:          opts.Logger.With("controller", opts.Name),
		name:         opts.Name,
		recorder:     opts.Recorder,
	}
	if _, err := opts.Owners.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueRS,
		UpdateFunc: c.updateRS,
		DeleteFunc: c.deleteRS,
	}); err != nil {
		return nil, fmt.Errorf("adding %s handler: %w", opts.Owners.Kind.Kind, err)
	}
	var podHandler cache.ResourceEventHandler = cache.ResourceEventHandlerFuncs{
		AddFunc: c.addPod, UpdateFunc: c.updatePod, DeleteFunc: c.deletePod,
	}
	if opts.WrapPodHandler != nil {
		podHandler = opts.WrapPodHandler(podHandler)
	}
	if _, err := podInf.Informer().AddEventHandler(podHandler); err != nil {
		return nil, fmt.Errorf("adding pod handler: %w", err)
	}
	return c, nil
}

// Run syncs ReplicaSets with workers goroutines until ctx ends, then waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, []cache.InformerSynced{c.rsSynced, c.podSynced}, c.sync, c.log, c.name)
}

func keyOf(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

func (c *Controller) enqueueRS(obj any) {
	if rs, ok := obj.(*appsv1.ReplicaSet); ok {
		c.queue.Add(keyOf(rs))
	}
}

func (c *Controller) updateRS(oldObj, newObj any) {
	oldRS, newRS := oldObj.(*appsv1.ReplicaSet), newObj.(*appsv1.ReplicaSet)
	if oldRS.UID != newRS.UID {
		c.deleteRS(cache.DeletedFinalStateUnknown{Key: keyOf(oldRS), Obj: oldRS})
	}
	c.enqueueRS(newRS)
}

func (c *Controller) deleteRS(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if rs, ok = tomb.Obj.(*appsv1.ReplicaSet); !ok {
			return
		}
	}
	c.expectations.Delete(keyOf(rs))
	c.queue.Add(keyOf(rs))
}

// resolveControllerRef returns the ReplicaSet ref points to, if it is the one we know.
func (c *Controller) resolveControllerRef(ns string, ref *metav1.OwnerReference) *appsv1.ReplicaSet {
	rs, _ := controllerref.Resolve(ref, c.owners.Kind, c.rsLister.ReplicaSets(ns).Get)
	return rs
}

// replicaSetsForPod returns the ReplicaSets whose selector matches an orphan pod.
func (c *Controller) replicaSetsForPod(pod *corev1.Pod) []*appsv1.ReplicaSet {
	all, err := c.rsLister.ReplicaSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	return controllerref.Selecting(all, func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector }, pod.Labels)
}

func (c *Controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		// Restarted controller seeing a pod already being deleted: count it as deleted.
		c.deletePod(pod)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		rs := c.resolveControllerRef(pod.Namespace, ref)
		if rs == nil {
			return
		}
		c.expectations.CreationObserved(keyOf(rs))
		c.queue.Add(keyOf(rs))
		return
	}
	for _, rs := range c.replicaSetsForPod(pod) {
		c.queue.Add(keyOf(rs))
	}
}

func (c *Controller) updatePod(oldObj, newObj any) {
	oldPod, cur := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	if oldPod.ResourceVersion == cur.ResourceVersion {
		return // periodic resync
	}
	labelsChanged := !reflect.DeepEqual(oldPod.Labels, cur.Labels)
	if cur.DeletionTimestamp != nil {
		// Graceful deletion: the pod stops counting now, not when it is finally removed.
		c.deletePod(cur)
		if labelsChanged {
			c.deletePod(oldPod)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOf(cur), metav1.GetControllerOf(oldPod)
	if oldRef != nil && (curRef == nil || curRef.UID != oldRef.UID) {
		if rs := c.resolveControllerRef(oldPod.Namespace, oldRef); rs != nil {
			c.queue.Add(keyOf(rs))
		}
	}
	if curRef != nil {
		rs := c.resolveControllerRef(cur.Namespace, curRef)
		if rs == nil {
			return
		}
		c.queue.Add(keyOf(rs))
		// A pod that just became ready becomes available minReadySeconds later: look again then.
		if !IsPodReady(oldPod) && IsPodReady(cur) && rs.Spec.MinReadySeconds > 0 {
			c.queue.AddAfter(keyOf(rs), time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if labelsChanged || oldRef != nil {
		for _, rs := range c.replicaSetsForPod(cur) {
			c.queue.Add(keyOf(rs))
		}
	}
}

func (c *Controller) deletePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return
	}
	rs := c.resolveControllerRef(pod.Namespace, ref)
	if rs == nil {
		return
	}
	c.expectations.DeletionObserved(keyOf(rs), keyOf(pod))
	c.queue.Add(keyOf(rs))
}

// sync is the seed's syncReplicaSet: claim pods, manage replicas if the cache has caught up
// with our own writes, and write status.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil //nolint:nilerr // a malformed key can never succeed
	}
	rs, err := c.rsLister.ReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Delete(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading ReplicaSet %s: %w", key, err)
	}
	needsSync := c.expectations.Satisfied(key)
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		c.log.Error("invalid selector", "replicaset", key, "err", err)
		return nil
	}
	all, err := c.podLister.Pods(ns).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	var active []*corev1.Pod
	for _, p := range all {
		if isActive(p) {
			active = append(active, p)
		}
	}
	m := &controllerref.Manager[*corev1.Pod]{
		Owner: rs, Kind: c.owners.Kind, Selector: sel,
		CanAdopt: controllerref.Recheck(rs, c.owners.Kind.Kind, func(ctx context.Context) (*appsv1.ReplicaSet, error) {
			return c.owners.Get(ctx, ns, name)
		}),
		Patch: controllerref.PodPatcher(c.client, ns),
	}
	pods, err := m.Claim(ctx, active)
	if err != nil {
		return err
	}
	var manageErr error
	if needsSync && rs.DeletionTimestamp == nil {
		manageErr = c.manageReplicas(ctx, pods, active, rs, key)
	}
	rs = rs.DeepCopy()
	status := calculateStatus(rs, pods, manageErr, time.Now())
	updated, err := c.updateStatus(ctx, rs, status)
	if err != nil {
		return errors.Join(manageErr, err)
	}
	if manageErr == nil && updated.Spec.MinReadySeconds > 0 &&
		updated.Status.ReadyReplicas == *updated.Spec.Replicas && updated.Status.AvailableReplicas != *updated.Spec.Replicas {
		c.queue.AddAfter(key, time.Duration(updated.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

// manageReplicas creates or deletes pods so that len(pods) approaches spec.replicas, at most
// burst per sync, recording what it expects to see so the next sync waits for the cache.
func (c *Controller) manageReplicas(ctx context.Context, pods, active []*corev1.Pod, rs *appsv1.ReplicaSet, key string) error {
	diff := len(pods) - int(*rs.Spec.Replicas)
	switch {
	case diff < 0:
		n := min(-diff, c.burst)
		// Record expectations before creating: an informer event may arrive before Create
		// even returns, and must find the record to decrement.
		c.expectations.ExpectCreations(key, n)
		c.log.Debug("creating pods", "replicaset", key, "need", *rs.Spec.Replicas, "creating", n)
		began := time.Now()
		ok, err := slowstart.Batch(ctx, n, 1, func(ctx context.Context) error {
			err := c.createPod(ctx, rs)
			if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil // the namespace is going away: creating is pointless, not an error
			}
			return err
		})
		c.log.Debug("created pods", "replicaset", key, "created", ok, "took", time.Since(began))
		if skipped := n - ok; skipped > 0 {
			// Creations that failed or were never tried will never be observed.
			c.expectations.LowerCreations(key, skipped)
		}
		if err != nil {
			return fmt.Errorf("creating pods for %s: %w", key, err)
		}
	case diff > 0:
		n := min(diff, c.burst)
		related := c.relatedPods(rs, active)
		victims := podsToDelete(pods, related, n, time.Now())
		keys := make([]string, len(victims))
		for i, p := range victims {
			keys[i] = keyOf(p)
		}
		c.expectations.ExpectDeletions(key, keys)
		c.log.Debug("deleting pods", "replicaset", key, "need", *rs.Spec.Replicas, "deleting", n)
		errCh := make(chan error, n)
		done := make(chan struct{}, n)
		for _, p := range victims {
			go func() {
				defer func() { done <- struct{}{} }()
				err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
				if err == nil {
					c.event(rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", p.Name)
				} else {
					// The pod will not go away because of us: stop waiting for it.
					c.expectations.DeletionObserved(key, keyOf(p))
					if !apierrors.IsNotFound(err) {
						errCh <- err
					}
				}
			}()
		}
		for range victims {
			<-done
		}
		close(errCh)
		if err := <-errCh; err != nil {
			return fmt.Errorf("deleting pods for %s: %w", key, err)
		}
	}
	return nil
}

// relatedPods are the active pods owned by ReplicaSets sharing rs's controller (e.g. one
// Deployment's ReplicaSets), used to spread deletions across nodes.
func (c *Controller) relatedPods(rs *appsv1.ReplicaSet, active []*corev1.Pod) []*corev1.Pod {
	owner := metav1.GetControllerOfNoCopy(rs)
	uids := map[types.UID]bool{rs.UID: true}
	if owner != nil {
		all, _ := c.rsLister.ReplicaSets(rs.Namespace).List(labels.Everything())
		for _, o := range all {
			if r := metav1.GetControllerOfNoCopy(o); r != nil && r.UID == owner.UID {
				uids[o.UID] = true
			}
		}
	}
	var out []*corev1.Pod
	for _, p := range active {
		if r := metav1.GetControllerOfNoCopy(p); r != nil && uids[r.UID] {
			out = append(out, p)
		}
	}
	return out
}

// createPod creates one pod from rs's template, controlled by rs.
func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet) error {
	pod := podFromTemplate(rs, c.owners.Kind)
	created, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		c.event(rs, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return fmt.Errorf("creating pod: %w", err)
	}
	c.event(rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", created.Name)
	return nil
}

// event records a Kubernetes event about rs, if the controller has a recorder.
func (c *Controller) event(rs *appsv1.ReplicaSet, eventtype, reason, format string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(c.owners.EventObject(rs), eventtype, reason, format, args...)
	}
}

// PodFromTemplate returns the pod rs would create.
func PodFromTemplate(rs *appsv1.ReplicaSet) *corev1.Pod {
	return podFromTemplate(rs, controllerKind)
}

// podFromTemplate returns the pod rs would create, controlled by rs as an object of kind.
func podFromTemplate(rs *appsv1.ReplicaSet, kind schema.GroupVersionKind) *corev1.Pod {
	t := rs.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name + "-",
			Namespace:       rs.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*controllerref.NewControllerRef(rs, kind)},
		},
		Spec: t.Spec,
	}
	return pod
}

// calculateStatus derives rs's status from the pods it owns.
func calculateStatus(rs *appsv1.ReplicaSet, pods []*corev1.Pod, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	st := *rs.Status.DeepCopy()
	var fully, ready, available int32
	tmpl := labels.Set(rs.Spec.Template.Labels).AsSelectorPreValidated()
	for _, p := range pods {
		if tmpl.Matches(labels.Set(p.Labels)) {
			fully++
		}
		if IsPodReady(p) {
			ready++
			if IsPodAvailable(p, rs.Spec.MinReadySeconds, now) {
				available++
			}
		}
	}
	st.Replicas = int32(len(pods))
	st.FullyLabeledReplicas = fully
	st.ReadyReplicas = ready
	st.AvailableReplicas = available
	cond := findCondition(st.Conditions, appsv1.ReplicaSetReplicaFailure)
	switch {
	case manageErr != nil && cond == nil:
		reason := "FailedCreate"
		if len(pods) > int(*rs.Spec.Replicas) {
			reason = "FailedDelete"
		}
		st.Conditions = append(st.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: manageErr.Error(),
		})
	case manageErr == nil && cond != nil:
		st.Conditions = removeCondition(st.Conditions, appsv1.ReplicaSetReplicaFailure)
	}
	return st
}

func findCondition(conds []appsv1.ReplicaSetCondition, t appsv1.ReplicaSetConditionType) *appsv1.ReplicaSetCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func removeCondition(conds []appsv1.ReplicaSetCondition, t appsv1.ReplicaSetConditionType) []appsv1.ReplicaSetCondition {
	var out []appsv1.ReplicaSetCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// updateStatus writes status unless it (and observedGeneration) already match, retrying once
// with a fresh read on conflict as Kubernetes does.
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, st appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	st.ObservedGeneration = rs.Generation
	if reflect.DeepEqual(rs.Status, st) {
		return rs, nil
	}
	var err error
	for i := 0; ; i++ {
		rs.Status = st
		var out *appsv1.ReplicaSet
		out, err = c.owners.UpdateStatus(ctx, rs)
		if err == nil {
			return out, nil
		}
		if i >= 1 || !apierrors.IsConflict(err) {
			break
		}
		fresh, gerr := c.owners.Get(ctx, rs.Namespace, rs.Name)
		if gerr != nil {
			return nil, fmt.Errorf("re-reading %s %s: %w", c.owners.Kind.Kind, rs.Name, gerr)
		}
		if fresh.UID != rs.UID {
			return rs, nil // recreated under the same name: the new one gets its own sync
		}
		// Status counts come from pods, not the object: keep ours, take the new generation.
		st.ObservedGeneration = fresh.Generation
		rs = fresh
	}
	return nil, fmt.Errorf("updating status of %s %s: %w", c.owners.Kind.Kind, rs.Name, err)
}
