// Package nodelifecycle is the node lifecycle controller: it watches Node Leases, marks a
// node whose kubelet stopped renewing its Lease as Ready=Unknown, taints it
// node.kubernetes.io/unreachable (NoSchedule and NoExecute) or not-ready, marks its pods
// not ready, and — as the NoExecute taint manager — evicts pods once their toleration of
// the taint runs out (at once for pods that do not tolerate it).
package nodelifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/disruptiontarget"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Kubernetes' defaults.
const (
	DefaultGracePeriod   = 40 * time.Second
	DefaultMonitorPeriod = 5 * time.Second
	nodeNameIndex        = "spec.nodeName"
)

// Options tune the controller (tests shorten the periods).
type Options struct {
	// GracePeriod is how long a Lease may go unrenewed before the node is unhealthy.
	GracePeriod time.Duration
	// MonitorPeriod is how often nodes and taints are checked.
	MonitorPeriod time.Duration
	// Logger receives logs.
	Logger *slog.Logger
}

// Controller watches node health.
type Controller struct {
	client kubernetes.Interface
	opts   Options
	log    *slog.Logger
	nodes  corelisters.NodeLister
	leases coordlisters.LeaseLister
	pods   cache.Indexer
	synced []cache.InformerSynced

	mu     sync.Mutex
	health map[string]*nodeHealth
}

// nodeHealth records when this controller last saw the Lease change, on its own clock,
// so that a kubelet's clock skew cannot hide a dead node.
type nodeHealth struct {
	renew    time.Time
	observed time.Time
}

// New returns a controller fed by factory's node, lease and pod informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.GracePeriod <= 0 {
		opts.GracePeriod = DefaultGracePeriod
	}
	if opts.MonitorPeriod <= 0 {
		opts.MonitorPeriod = DefaultMonitorPeriod
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	nodes := factory.Core().V1().Nodes()
	leases := factory.Coordination().V1().Leases()
	pods := factory.Core().V1().Pods()
	if err := pods.Informer().AddIndexers(cache.Indexers{nodeNameIndex: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{p.Spec.NodeName}, nil
	}}); err != nil {
		return nil, fmt.Errorf("node lifecycle: pod index: %w", err)
	}
	return &Controller{
		client: client, opts: opts, log: opts.Logger.With("controller", "nodelifecycle"),
		nodes: nodes.Lister(), leases: leases.Lister(), pods: pods.Informer().GetIndexer(),
		synced: []cache.InformerSynced{nodes.Informer().HasSynced, leases.Informer().HasSynced, pods.Informer().HasSynced},
		health: map[string]*nodeHealth{},
	}, nil
}

// Run checks nodes every MonitorPeriod until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.log.Info("started", "grace", c.opts.GracePeriod, "period", c.opts.MonitorPeriod)
	t := time.NewTicker(c.opts.MonitorPeriod)
	defer t.Stop()
	for {
		c.Sync(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync runs one pass over every node at time now.
func (c *Controller) Sync(ctx context.Context, now time.Time) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		seen[n.Name] = true
		if err := c.monitorNode(ctx, n, now); err != nil && ctx.Err() == nil {
			c.log.Warn("monitoring node", "node", n.Name, "err", err)
		}
	}
	c.mu.Lock()
	for name := range c.health {
		if !seen[name] {
			delete(c.health, name)
		}
	}
	c.mu.Unlock()
	for _, n := range nodes {
		if err := c.evict(ctx, n, now); err != nil && ctx.Err() == nil {
			c.log.Warn("evicting pods", "node", n.Name, "err", err)
		}
	}
}

func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// lastHeartbeat is the latest Lease renewal, else the Ready condition's heartbeat.
func (c *Controller) lastHeartbeat(n *corev1.Node) time.Time {
	var t time.Time
	if l, err := c.leases.Leases(corev1.NamespaceNodeLease).Get(n.Name); err == nil && l.Spec.RenewTime != nil {
		t = l.Spec.RenewTime.Time
	}
	if rc := readyCondition(n); rc != nil && rc.LastHeartbeatTime.After(t) {
		t = rc.LastHeartbeatTime.Time
	}
	if t.IsZero() {
		t = n.CreationTimestamp.Time
	}
	return t
}

func (c *Controller) monitorNode(ctx context.Context, n *corev1.Node, now time.Time) error {
	hb := c.lastHeartbeat(n)
	c.mu.Lock()
	h, ok := c.health[n.Name]
	if !ok || !hb.Equal(h.renew) {
		h = &nodeHealth{renew: hb, observed: now}
		c.health[n.Name] = h
	}
	observed := h.observed
	c.mu.Unlock()
	rc := readyCondition(n)
	if now.Sub(observed) > c.opts.GracePeriod && (rc == nil || rc.Status != corev1.ConditionUnknown) {
		c.log.Info("node stopped posting status", "node", n.Name, "lastHeartbeat", hb)
		if err := c.markUnknown(ctx, n, now); err != nil {
			return err
		}
		if err := c.markPodsNotReady(ctx, n.Name); err != nil {
			return err
		}
		// Re-read: the taints below compare against the updated Ready condition.
		updated, err := c.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading node: %w", err)
		}
		n = updated
	}
	return c.reconcileTaints(ctx, n, now)
}

func (c *Controller) markUnknown(ctx context.Context, n *corev1.Node, now time.Time) error {
	n = n.DeepCopy()
	types := []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}
	for _, t := range types {
		found := false
		for i := range n.Status.Conditions {
			cond := &n.Status.Conditions[i]
			if cond.Type != t {
				continue
			}
			found = true
			if cond.Status != corev1.ConditionUnknown {
				cond.Status, cond.LastTransitionTime = corev1.ConditionUnknown, metav1.NewTime(now)
			}
			cond.Reason, cond.Message = "NodeStatusUnknown", "Kubelet stopped posting node status."
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.",
				LastHeartbeatTime: n.CreationTimestamp, LastTransitionTime: metav1.NewTime(now)})
		}
	}
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("marking node %s Unknown: %w", n.Name, err)
	}
	return nil
}

// markPodsNotReady sets Ready=False on the node's pods, as Kubernetes does when it stops
// hearing from the kubelet that would otherwise report it.
func (c *Controller) markPodsNotReady(ctx context.Context, node string) error {
	objs, err := c.pods.ByIndex(nodeNameIndex, node)
	if err != nil {
		return fmt.Errorf("pods of node: %w", err)
	}
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		var conds []corev1.PodCondition
		changed := false
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status != corev1.ConditionFalse {
				cond.Status, cond.Reason, cond.LastTransitionTime = corev1.ConditionFalse, "NodeNotReady", metav1.Now()
				changed = true
			}
			conds = append(conds, cond)
		}
		if !changed {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": p.UID}, "status": map[string]any{"conditions": conds}})
		if _, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("marking pod %s/%s not ready: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// Taint keys this controller owns.
var ownedTaints = []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady}

// reconcileTaints keeps the unreachable / not-ready taints in line with Ready.
func (c *Controller) reconcileTaints(ctx context.Context, n *corev1.Node, now time.Time) error {
	var want string
	if rc := readyCondition(n); rc != nil {
		switch rc.Status {
		case corev1.ConditionUnknown:
			want = corev1.TaintNodeUnreachable
		case corev1.ConditionFalse:
			want = corev1.TaintNodeNotReady
		}
	}
	var keep []corev1.Taint
	has := map[corev1.TaintEffect]bool{}
	changed := false
	for _, t := range n.Spec.Taints {
		if slices.Contains(ownedTaints, t.Key) {
			if t.Key != want {
				changed = true
				continue
			}
			has[t.Effect] = true
		}
		keep = append(keep, t)
	}
	if want != "" {
		for _, eff := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
			if !has[eff] {
				t := corev1.Taint{Key: want, Effect: eff}
				if eff == corev1.TaintEffectNoExecute {
					ts := metav1.NewTime(now)
					t.TimeAdded = &ts
				}
				keep = append(keep, t)
				changed = true
			}
		}
	}
	if !changed {
		return nil
	}
	n = n.DeepCopy()
	n.Spec.Taints = keep
	if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("updating taints of node %s: %w", n.Name, err)
	}
	c.log.Info("node taints updated", "node", n.Name, "taint", want)
	return nil
}

// EvictionTime decides when a pod must leave a node with these NoExecute taints: ok=false
// means never (every taint tolerated forever); a zero time means now.
func EvictionTime(pod *corev1.Pod, taints []corev1.Taint) (time.Time, bool) {
	var at time.Time
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		var seconds *int64
		for j := range pod.Spec.Tolerations {
			tol := &pod.Spec.Tolerations[j]
			if tol.ToleratesTaint(klog.Background(), t, false) {
				// The shortest finite toleration wins, as in Kubernetes' taint manager.
				if tol.TolerationSeconds != nil && (seconds == nil || *tol.TolerationSeconds < *seconds) {
					seconds = tol.TolerationSeconds
				}
				tolerated = true
			}
		}
		if !tolerated {
			return time.Time{}, true
		}
		if seconds == nil {
			continue
		}
		added := time.Time{}
		if t.TimeAdded != nil {
			added = t.TimeAdded.Time
		}
		when := added.Add(time.Duration(max(*seconds, 0)) * time.Second)
		if at.IsZero() || when.Before(at) {
			at = when
		}
	}
	if at.IsZero() {
		return time.Time{}, false
	}
	return at, true
}

// evict deletes the node's pods whose toleration of its NoExecute taints has run out.
func (c *Controller) evict(ctx context.Context, n *corev1.Node, now time.Time) error {
	var noExec []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			noExec = append(noExec, t)
		}
	}
	if len(noExec) == 0 {
		return nil
	}
	objs, err := c.pods.ByIndex(nodeNameIndex, n.Name)
	if err != nil {
		return fmt.Errorf("pods of node: %w", err)
	}
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp != nil {
			continue
		}
		at, evict := EvictionTime(p, noExec)
		if !evict || at.After(now) {
			continue
		}
		c.log.Info("evicting pod from tainted node", "pod", p.Namespace+"/"+p.Name, "node", n.Name)
		if err := disruptiontarget.Mark(ctx, c.client, p, disruptiontarget.ReasonTaint, "Taint manager: deleting due to NoExecute taint", false); err != nil {
			return err
		}
		uid := p.UID
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}
