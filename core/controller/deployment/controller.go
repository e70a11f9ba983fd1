// Package deployment is the Deployment controller: it rolls a Deployment's pod template out
// through ReplicaSets (RollingUpdate or Recreate), scales them proportionally, keeps revision
// history and reports status and conditions, following Kubernetes' syncDeployment. It talks
// to the API only through client-go.
package deployment

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	"log/slog"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/controllerref"
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
)

// controllerKind is written into the ownerReferences of a Deployment's ReplicaSets.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Controller reconciles Deployments.
type Controller struct {
	client    kubernetes.Interface
	dLister   appslisters.DeploymentLister
	rsLister  appslisters.ReplicaSetLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	log       *slog.Logger
	now       func() time.Time
	recorder  record.EventRecorder
}

// SetEventRecorder makes the controller record ScalingReplicaSet events, as
// kube-controller-manager does; call it before Run.
func (c *Controller) SetEventRecorder(r record.EventRecorder) { c.recorder = r }

// New returns a Deployment controller fed by factory's Deployment, ReplicaSet and Pod informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dInf, rsInf, podInf := factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods()
	c := &Controller{
		client: client, dLister: dInf.Lister(), rsLister: rsInf.Lister(), podLister: podInf.Lister(),
		synced: []cache.InformerSynced{dInf.Informer().HasSynced, rsInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployment"}),
		log: log.With("controller", "deployment"),
		now: time.Now,
	}
	if _, err := dInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("adding Deployment handler: %w", err)
	}
	if _, err := rsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onReplicaSet,
		UpdateFunc: c.updateReplicaSet,
		DeleteFunc: c.onReplicaSet,
	}); err != nil {
		return nil, fmt.Errorf("adding ReplicaSet handler: %w", err)
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.deletePod}); err != nil {
		return nil, fmt.Errorf("adding pod handler: %w", err)
	}
	return c, nil
}

// Run syncs Deployments with workers goroutines until ctx ends, then waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, c.synced, c.syncDeployment, c.log, "deployment")
}

func unwrapTombstone[T any](obj any) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		t, ok := tomb.Obj.(T)
		return t, ok
	}
	var zero T
	return zero, false
}

func (c *Controller) enqueue(obj any) {
	d, ok := unwrapTombstone[*appsv1.Deployment](obj)
	if !ok {
		return
	}
	c.queue.Add(d.Namespace + "/" + d.Name)
}

func (c *Controller) resolve(ns string, ref *metav1.OwnerReference) *appsv1.Deployment {
	d, _ := controllerref.Resolve(ref, controllerKind, c.dLister.Deployments(ns).Get)
	return d
}

// deploymentsForReplicaSet returns the Deployments whose selector matches an orphan rs.
func (c *Controller) deploymentsForReplicaSet(rs *appsv1.ReplicaSet) []*appsv1.Deployment {
	ds, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	return controllerref.Selecting(ds, func(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector }, rs.Labels)
}

func (c *Controller) onReplicaSet(obj any) {
	rs, ok := unwrapTombstone[*appsv1.ReplicaSet](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if d := c.resolve(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	for _, d := range c.deploymentsForReplicaSet(rs) {
		c.enqueue(d)
	}
}

func (c *Controller) updateReplicaSet(oldObj, newObj any) {
	oldRS, cur := oldObj.(*appsv1.ReplicaSet), newObj.(*appsv1.ReplicaSet)
	if oldRS.ResourceVersion == cur.ResourceVersion {
		return
	}
	oldRef, curRef := metav1.GetControllerOfNoCopy(oldRS), metav1.GetControllerOfNoCopy(cur)
	if oldRef != nil && (curRef == nil || oldRef.UID != curRef.UID) {
		if d := c.resolve(oldRS.Namespace, oldRef); d != nil {
			c.enqueue(d)
		}
	}
	c.onReplicaSet(cur)
}

// deletePod wakes a Recreate Deployment once its old pods are gone.
func (c *Controller) deletePod(obj any) {
	pod, ok := unwrapTombstone[*corev1.Pod](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	if d := c.resolve(rs.Namespace, metav1.GetControllerOfNoCopy(rs)); d != nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.enqueue(d)
	}
}

// getReplicaSetsForDeployment claims the ReplicaSets d's selector matches (adopting orphans,
// releasing ones that no longer match).
func (c *Controller) getReplicaSetsForDeployment(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	all, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing ReplicaSets: %w", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has an invalid selector: %w", d.Namespace, d.Name, err)
	}
	m := &controllerref.Manager[*appsv1.ReplicaSet]{
		Owner: d, Kind: controllerKind, Selector: sel,
		CanAdopt: func(ctx context.Context) error {
			fresh, err := c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("re-reading Deployment: %w", err)
			}
			if fresh.UID != d.UID {
				return fmt.Errorf("deployment %s/%s was recreated", d.Namespace, d.Name)
			}
			if fresh.DeletionTimestamp != nil {
				return fmt.Errorf("deployment %s/%s is being deleted", d.Namespace, d.Name)
			}
			return nil
		},
		Patch: func(ctx context.Context, name string, patch []byte) error {
			_, err := c.client.AppsV1().ReplicaSets(d.Namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		},
	}
	claimed, err := m.Claim(ctx, all)
	// Private copies: a sync updates its ReplicaSets in place as it scales them, and the
	// informer's objects must never be written.
	for i, rs := range claimed {
		claimed[i] = rs.DeepCopy()
	}
	return claimed, err
}

// podMapForDeployment groups d's pods by the UID of the ReplicaSet that controls them.
func (c *Controller) podMapForDeployment(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (map[types.UID][]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("invalid selector: %w", err)
	}
	pods, err := c.podLister.Pods(d.Namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	m := make(map[types.UID][]*corev1.Pod, len(rss))
	for _, rs := range rss {
		m[rs.UID] = nil
	}
	for _, p := range pods {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil {
			continue
		}
		if _, ok := m[ref.UID]; ok {
			m[ref.UID] = append(m[ref.UID], p)
		}
	}
	return m, nil
}

// syncDeployment is the seed's syncDeployment.
func (c *Controller) syncDeployment(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil //nolint:nilerr // a malformed key never syncs
	}
	cached, err := c.dLister.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Deployment %s: %w", key, err)
	}
	d := cached.DeepCopy()
	if sel := d.Spec.Selector; sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		// An empty selector would match every pod in the namespace: refuse to act.
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			_, err := c.client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
			if err != nil {
				return fmt.Errorf("updating status: %w", err)
			}
		}
		return nil
	}
	rsList, err := c.getReplicaSetsForDeployment(ctx, d)
	if err != nil {
		return err
	}
	podMap, err := c.podMapForDeployment(d, rsList)
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return c.syncStatusOnly(ctx, d, rsList)
	}
	if err := c.checkPausedConditions(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return c.sync(ctx, d, rsList)
	}
	scaling, err := c.isScalingEvent(ctx, d, rsList)
	if err != nil {
		return err
	}
	if scaling {
		return c.sync(ctx, d, rsList)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return c.rolloutRecreate(ctx, d, rsList, podMap)
	default:
		return c.rolloutRolling(ctx, d, rsList)
	}
}
