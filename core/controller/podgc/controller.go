// Package podgc is the pod garbage collector, as kube-controller-manager's: it deletes the
// pods nothing else will — those bound to a node that no longer exists, those deleted
// before they were ever scheduled, those terminating on a node that is down and declared
// out of service — and keeps the number of terminated pods under a threshold. A pod of a
// node that is gone is first marked Failed with a DisruptionTarget condition
// (DeletionByPodGC), so that its Job replaces it and a podFailurePolicy can tell why it went.
package podgc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/wasmplane/wasmplane/core/disruptiontarget"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Kubernetes' defaults (kube-controller-manager's --terminated-pod-gc-threshold, and the
// podgc controller's check period and quarantine).
const (
	DefaultTerminatedThreshold = 12500
	checkPeriod                = 20 * time.Second
	// quarantine is how long a node must be missing from the cache before its pods are
	// collected: a node being re-registered, or not yet seen by the informer, keeps them.
	quarantine = 40 * time.Second
)

// Options configure the collector.
type Options struct {
	// TerminatedThreshold is how many terminated (Succeeded or Failed) pods may exist
	// before the oldest are deleted; 0 means DefaultTerminatedThreshold, negative never.
	TerminatedThreshold int
	// Clock is the real clock when nil.
	Clock  clock.PassiveClock
	Logger *slog.Logger // nil = discarded
}

// Controller is the pod garbage collector.
type Controller struct {
	client    kubernetes.Interface
	pods      corelisters.PodLister
	nodes     corelisters.NodeLister
	synced    []cache.InformerSynced
	threshold int
	clock     clock.PassiveClock
	log       *slog.Logger
	// missing is when each node named by a pod was first found missing from the cache.
	// Only the collector's own goroutine uses it.
	missing map[string]time.Time
}

// New returns a collector fed by factory's pod and node informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, o Options) *Controller {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.TerminatedThreshold == 0 {
		o.TerminatedThreshold = DefaultTerminatedThreshold
	}
	pods, nodes := factory.Core().V1().Pods(), factory.Core().V1().Nodes()
	return &Controller{client: client, pods: pods.Lister(), nodes: nodes.Lister(),
		synced:    []cache.InformerSynced{pods.Informer().HasSynced, nodes.Informer().HasSynced},
		threshold: o.TerminatedThreshold, clock: o.Clock, log: o.Logger.With("controller", "pod-garbage-collector"),
		missing: map[string]time.Time{}}
}

// Run collects every check period until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.Collect(ctx); err != nil {
			c.log.Warn("pod garbage collection", "err", err)
		}
	}, checkPeriod)
}

// Collect does one pass over the cached pods.
func (c *Controller) Collect(ctx context.Context) error {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	known := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		known[n.Name] = n
	}
	now := c.clock.Now()
	var errs []error
	var terminated []*corev1.Pod
	seen := map[string]bool{}
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil && p.Spec.NodeName == "":
			// Deleted before it was scheduled: no kubelet will ever finish it.
			errs = append(errs, c.forceDelete(ctx, p, "", ""))
		case p.Spec.NodeName != "" && known[p.Spec.NodeName] == nil:
			seen[p.Spec.NodeName] = true
			if gone, err := c.nodeGone(ctx, p.Spec.NodeName, now); err != nil {
				errs = append(errs, err)
			} else if gone {
				errs = append(errs, c.forceDelete(ctx, p, disruptiontarget.ReasonPodGC, "PodGC: node no longer exists"))
			}
		case p.DeletionTimestamp != nil && outOfService(known[p.Spec.NodeName]):
			// A node declared out of service while down: its pods will never be
			// confirmed terminated by its kubelet.
			errs = append(errs, c.forceDelete(ctx, p, "", ""))
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
			terminated = append(terminated, p)
		}
	}
	for name := range c.missing {
		if !seen[name] {
			delete(c.missing, name) // back, or no pod names it any more
		}
	}
	if c.threshold > 0 && len(terminated) > c.threshold {
		slices.SortFunc(terminated, func(a, b *corev1.Pod) int {
			return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
		})
		for _, p := range terminated[:len(terminated)-c.threshold] {
			c.log.Info("deleting terminated pod over the threshold", "pod", p.Namespace+"/"+p.Name, "threshold", c.threshold)
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("deleting terminated pod %s/%s: %w", p.Namespace, p.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// nodeGone tells whether a node missing from the cache has been missing for the
// quarantine and the API server confirms it does not exist.
func (c *Controller) nodeGone(ctx context.Context, name string, now time.Time) (bool, error) {
	first, ok := c.missing[name]
	if !ok {
		c.missing[name] = now
		return false, nil
	}
	if now.Sub(first) < quarantine {
		return false, nil
	}
	_, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("checking node %s: %w", name, err)
	}
	delete(c.missing, name) // it exists: the cache was behind
	return false, nil
}

// forceDelete marks a pod that has not terminated Failed (with a DisruptionTarget
// condition when reason is set) and deletes it at once, as kube-controller-manager's
// collector does for pods no kubelet will finish.
func (c *Controller) forceDelete(ctx context.Context, p *corev1.Pod, reason, message string) error {
	c.log.Info("deleting pod", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName, "reason", reason)
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		if err := c.markFailed(ctx, p, reason, message); err != nil {
			return err
		}
	}
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
		Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// markFailed sets the phase Failed, with the DisruptionTarget condition when reason is
// given.
func (c *Controller) markFailed(ctx context.Context, p *corev1.Pod, reason, message string) error {
	if reason != "" {
		return disruptiontarget.Mark(ctx, c.client, p, reason, message, true)
	}
	patch := []byte(`{"status":{"phase":"Failed"}}`)
	_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking pod %s/%s failed: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// outOfService tells whether n is not ready and carries the out-of-service taint.
func outOfService(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeOutOfService && t.Effect == corev1.TaintEffectNoExecute
	})
	ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
	return tainted && !ready
}
