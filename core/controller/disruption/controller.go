// Package disruption is the disruption controller: it keeps every PodDisruptionBudget's
// status (healthy and desired pod counts, disruptions allowed, the DisruptionAllowed
// condition) from the pods it selects, and forgets pods the eviction subresource recorded
// as disrupted once they are gone or overdue, as kube-controller-manager's does.
package disruption

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DeletionTimeout is how long a pod the eviction subresource recorded as disrupted may
// take to be deleted before the budget counts it again (Kubernetes' value).
const DeletionTimeout = 2 * time.Minute

// Controller keeps PodDisruptionBudgets' status.
type Controller struct {
	client    kubernetes.Interface
	pdbLister policylisters.PodDisruptionBudgetLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	log       *slog.Logger
	now       func() time.Time
}

// New returns a controller fed by factory's PodDisruptionBudget and Pod informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pdbs, pods := factory.Policy().V1().PodDisruptionBudgets(), factory.Core().V1().Pods()
	c := &Controller{client: client, pdbLister: pdbs.Lister(), podLister: pods.Lister(),
		synced: []cache.InformerSynced{pdbs.Informer().HasSynced, pods.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "disruption"}),
		log: log.With("controller", "disruption"), now: time.Now}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := pdbs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue}); err != nil {
		return nil, fmt.Errorf("adding PodDisruptionBudget handler: %w", err)
	}
	podChanged := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			c.enqueueBudgetsOf(pod)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: podChanged, DeleteFunc: podChanged,
		UpdateFunc: func(o, n any) {
			op, np := o.(*corev1.Pod), n.(*corev1.Pod)
			if !apiequality.Semantic.DeepEqual(op.Labels, np.Labels) {
				c.enqueueBudgetsOf(op)
			}
			c.enqueueBudgetsOf(np)
		}}); err != nil {
		return nil, fmt.Errorf("adding pod handler: %w", err)
	}
	return c, nil
}

// Run syncs budgets with workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, c.synced, c.sync, c.log, "poddisruptionbudget")
}

func (c *Controller) enqueueBudgetsOf(pod *corev1.Pod) {
	budgets, err := c.pdbLister.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, b := range budgets {
		if selects(b, pod) {
			c.queue.Add(b.Namespace + "/" + b.Name)
		}
	}
}

// selects tells whether a budget covers a pod: a budget without a selector covers none,
// an empty selector every pod of its namespace (policy/v1).
func selects(b *policyv1.PodDisruptionBudget, pod *corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	return err == nil && sel.Matches(labels.Set(pod.Labels))
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pdb, err := c.pdbLister.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	status, recheck, calcErr := c.compute(ctx, pdb)
	if calcErr != nil {
		// Fail safe, as Kubernetes: no disruption is allowed while the budget cannot be
		// worked out.
		status = *pdb.Status.DeepCopy()
		status.DisruptionsAllowed = 0
		status.ObservedGeneration = pdb.Generation
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: policyv1.DisruptionAllowedCondition,
			Status: metav1.ConditionFalse, Reason: policyv1.SyncFailedReason, Message: calcErr.Error(), ObservedGeneration: pdb.Generation})
	}
	if err := c.write(ctx, pdb, status); err != nil {
		return err
	}
	if calcErr != nil {
		return calcErr
	}
	if !recheck.IsZero() {
		c.queue.AddAfter(key, recheck.Sub(c.now())+time.Second)
	}
	return nil
}

// compute works out a budget's status from its pods; recheck is when a disrupted pod
// that still exists becomes overdue (zero = none).
func (c *Controller) compute(ctx context.Context, pdb *policyv1.PodDisruptionBudget) (policyv1.PodDisruptionBudgetStatus, time.Time, error) {
	var st policyv1.PodDisruptionBudgetStatus
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return st, time.Time{}, fmt.Errorf("invalid selector: %w", err)
	}
	pods, err := c.podLister.Pods(pdb.Namespace).List(sel)
	if err != nil {
		return st, time.Time{}, err
	}
	expected, desired, err := c.expectedAndDesired(ctx, pdb, pods)
	if err != nil {
		return st, time.Time{}, err
	}
	now := c.now()
	disrupted, recheck := c.stillDisrupted(pdb, pods, now)
	healthy := int32(0)
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if _, ok := disrupted[p.Name]; ok {
			continue
		}
		if podReady(p) {
			healthy++
		}
	}
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	st = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptedPods: disrupted,
		DisruptionsAllowed: allowed, CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: expected,
		Conditions: append([]metav1.Condition(nil), pdb.Status.Conditions...)}
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: policyv1.InsufficientPodsReason, ObservedGeneration: pdb.Generation}
	if allowed > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	return st, recheck, nil
}

// expectedAndDesired are Kubernetes' expected pod count and desired healthy count: an
// integer minAvailable needs no controller; a percentage or maxUnavailable is taken of
// the scale of the controllers the pods belong to.
func (c *Controller) expectedAndDesired(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (int32, int32, error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		expected, err := c.expectedScale(ctx, pdb, pods)
		if err != nil {
			return 0, 0, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, err
		}
		return expected, max(expected-int32(maxUnavailable), 0), nil
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		return int32(len(pods)), pdb.Spec.MinAvailable.IntVal, nil
	case pdb.Spec.MinAvailable != nil:
		expected, err := c.expectedScale(ctx, pdb, pods)
		if err != nil {
			return 0, 0, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, err
		}
		return expected, int32(minAvailable), nil
	}
	return int32(len(pods)), 0, nil
}

// expectedScale sums the replicas of the controllers of pods, each counted once: a
// ReplicaSet of a Deployment counts as the Deployment. Pods without a controller are
// left out, as Kubernetes leaves them out, with a warning.
func (c *Controller) expectedScale(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (int32, error) {
	seen := map[types.UID]bool{}
	total, unmanaged := int32(0), 0
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			unmanaged++
			continue
		}
		if seen[ref.UID] {
			continue
		}
		uid, replicas, err := c.scaleOf(ctx, p.Namespace, ref)
		if err != nil {
			return 0, err
		}
		if seen[uid] {
			seen[ref.UID] = true
			continue
		}
		seen[ref.UID], seen[uid] = true, true
		total += replicas
	}
	if unmanaged > 0 {
		c.log.Warn("pods selected by the budget have no controller; its percentage or maxUnavailable ignores them",
			"poddisruptionbudget", pdb.Namespace+"/"+pdb.Name, "pods", unmanaged)
	}
	return total, nil
}

// scaleOf is the uid and desired replicas of the workload behind a pod's controller.
func (c *Controller) scaleOf(ctx context.Context, ns string, ref *metav1.OwnerReference) (types.UID, int32, error) {
	replicas := func(r *int32) int32 {
		if r == nil {
			return 1
		}
		return *r
	}
	switch ref.Kind {
	case "ReplicaSet":
		rs, err := c.client.AppsV1().ReplicaSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", 0, fmt.Errorf("reading ReplicaSet %s/%s: %w", ns, ref.Name, err)
		}
		if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == "Deployment" {
			d, err := c.client.AppsV1().Deployments(ns).Get(ctx, owner.Name, metav1.GetOptions{})
			if err != nil {
				return "", 0, fmt.Errorf("reading Deployment %s/%s: %w", ns, owner.Name, err)
			}
			return d.UID, replicas(d.Spec.Replicas), nil
		}
		return rs.UID, replicas(rs.Spec.Replicas), nil
	case "StatefulSet":
		s, err := c.client.AppsV1().StatefulSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", 0, fmt.Errorf("reading StatefulSet %s/%s: %w", ns, ref.Name, err)
		}
		return s.UID, replicas(s.Spec.Replicas), nil
	case "ReplicationController":
		rc, err := c.client.CoreV1().ReplicationControllers(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", 0, fmt.Errorf("reading ReplicationController %s/%s: %w", ns, ref.Name, err)
		}
		return rc.UID, replicas(rc.Spec.Replicas), nil
	}
	return "", 0, fmt.Errorf("found no controllers for pod controlled by %s %q", ref.Kind, ref.Name)
}

// stillDisrupted keeps the disrupted pods that exist, are not yet being deleted and are
// not overdue; recheck is when the first of them becomes overdue.
func (c *Controller) stillDisrupted(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, now time.Time) (map[string]metav1.Time, time.Time) {
	var out map[string]metav1.Time
	var recheck time.Time
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		at, ok := pdb.Status.DisruptedPods[p.Name]
		if !ok {
			continue
		}
		due := at.Add(DeletionTimeout)
		if !due.After(now) {
			c.log.Info("evicted pod was not deleted in time; counted again", "pod", p.Namespace+"/"+p.Name, "due", due)
			continue
		}
		if out == nil {
			out = map[string]metav1.Time{}
		}
		out[p.Name] = at
		if recheck.IsZero() || due.Before(recheck) {
			recheck = due
		}
	}
	return out, recheck
}

func (c *Controller) write(ctx context.Context, pdb *policyv1.PodDisruptionBudget, st policyv1.PodDisruptionBudgetStatus) error {
	if apiequality.Semantic.DeepEqual(pdb.Status, st) {
		return nil
	}
	n := pdb.DeepCopy()
	n.Status = st
	_, err := c.client.PolicyV1().PodDisruptionBudgets(n.Namespace).UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the status of PodDisruptionBudget %s/%s: %w", n.Namespace, n.Name, err)
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
