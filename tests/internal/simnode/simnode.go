// Package simnode simulates nodes for benchmarks of the control plane: each node is a
// Node object whose Lease is renewed, and one agent plays the kubelet of them all,
// writing the status a kubelet would for the pods bound to them without running any
// container. Pods that run to completion (restartPolicy Never or OnFailure) succeed at
// once, the others run and turn ready at once, so a benchmark on simulated nodes times
// the API server, the controllers and the scheduler, never containers.
package simnode

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// leaseDuration is the kubelet's default; the node lifecycle controllers count a node
// healthy while its Lease is younger than their grace period.
const leaseDuration = 40 * time.Second

// Cluster is a set of simulated nodes and the agent acting as their kubelet.
type Cluster struct {
	cs     kubernetes.Interface
	log    *slog.Logger
	mu     sync.Mutex
	nodes  map[string]bool
	nextIP atomic.Uint32
	queue  workqueue.TypedRateLimitingInterface[cache.ObjectName]
	pods   cache.Indexer
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start runs the agent with workers parallel status writers; it acts for the nodes that
// AddNodes registers and stops with Stop or when ctx ends.
func Start(ctx context.Context, cs kubernetes.Interface, workers int, log *slog.Logger) (*Cluster, error) {
	ctx, cancel := context.WithCancel(ctx)
	c := &Cluster{cs: cs, log: log, nodes: map[string]bool{}, cancel: cancel,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())}
	// Only bound pods concern a kubelet.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	}))
	inf := factory.Core().V1().Pods().Informer()
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && c.owns(p) && p.Status.Phase == corev1.PodPending {
			c.queue.Add(cache.MetaObjectToName(p))
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }}); err != nil {
		cancel()
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	c.pods = inf.GetIndexer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		factory.Shutdown()
		return nil, fmt.Errorf("simulated nodes: pod cache not synced: %w", context.Cause(ctx))
	}
	for range max(workers, 1) {
		c.wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	c.wg.Go(func() {
		<-ctx.Done()
		c.queue.ShutDown()
		factory.Shutdown()
	})
	c.wg.Go(func() { c.renewLeases(ctx) })
	return c, nil
}

// Stop ends the agent and waits for its goroutines; the Node objects stay.
func (c *Cluster) Stop() {
	c.cancel()
	c.wg.Wait()
}

// AddNodes registers the named nodes as Ready, with capacity for maxPods pods, and
// their Leases; the agent then acts as their kubelet.
func (c *Cluster) AddNodes(ctx context.Context, names []string, maxPods int) error {
	for _, name := range names {
		if _, err := c.cs.CoreV1().Nodes().Create(ctx, Node(name, maxPods), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("registering simulated node %s: %w", name, err)
		}
		if err := c.renewLease(ctx, name); err != nil {
			return err
		}
		c.mu.Lock()
		c.nodes[name] = true
		c.mu.Unlock()
	}
	// Pods may have been bound before the node was ours.
	for _, obj := range c.pods.List() {
		if p := obj.(*corev1.Pod); c.owns(p) && p.Status.Phase == corev1.PodPending {
			c.queue.Add(cache.MetaObjectToName(p))
		}
	}
	return nil
}

// Node is a Ready node object with room for maxPods pods.
func Node(name string, maxPods int) *corev1.Node {
	rl := corev1.ResourceList{
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
	}
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux"}},
		Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl, Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now}}},
	}
}

func (c *Cluster) owns(p *corev1.Pod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[p.Spec.NodeName]
}

// renewLeases renews every node's Lease at a quarter of its duration, as a kubelet does.
func (c *Cluster) renewLeases(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, leaseDuration/4, false, func(ctx context.Context) (bool, error) {
		c.mu.Lock()
		names := make([]string, 0, len(c.nodes))
		for n := range c.nodes {
			names = append(names, n)
		}
		c.mu.Unlock()
		for _, n := range names {
			if err := c.renewLease(ctx, n); err != nil && ctx.Err() == nil {
				c.log.Warn("renewing a simulated node's lease", "node", n, "err", err)
			}
		}
		return false, nil
	})
}

func (c *Cluster) renewLease(ctx context.Context, node string) error {
	leases := c.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(leaseDuration / time.Second)
	l, err := leases.Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: &secs, RenewTime: &now}}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the lease of %s: %w", node, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the lease of %s: %w", node, err)
	}
	l.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renewing the lease of %s: %w", node, err)
	}
	return nil
}

// next writes one pod's status; it reports false once the queue shuts down.
func (c *Cluster) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.start(ctx, key); err != nil && ctx.Err() == nil {
		c.log.Warn("simulated kubelet: writing pod status", "pod", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// start writes the status of a pod the node has "run": Succeeded for a pod that runs to
// completion, Running and Ready for the others.
func (c *Cluster) start(ctx context.Context, key cache.ObjectName) error {
	obj, ok, err := c.pods.GetByKey(key.String())
	if err != nil || !ok {
		return err
	}
	pod := obj.(*corev1.Pod)
	if pod.Status.Phase != corev1.PodPending || !c.owns(pod) {
		return nil
	}
	pod = pod.DeepCopy()
	now := metav1.Now()
	n := c.nextIP.Add(1)
	ip := netip.AddrFrom4([4]byte{10, 128 + byte(n>>16), byte(n >> 8), byte(n)})
	pod.Status.HostIP, pod.Status.PodIP = "10.0.0.1", ip.String()
	pod.Status.HostIPs, pod.Status.PodIPs = []corev1.HostIP{{IP: "10.0.0.1"}}, []corev1.PodIP{{IP: ip.String()}}
	pod.Status.StartTime = &now
	completes := pod.Spec.RestartPolicy == corev1.RestartPolicyNever || pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure
	ready := corev1.ConditionTrue
	pod.Status.Phase = corev1.PodRunning
	if completes {
		pod.Status.Phase, ready = corev1.PodSucceeded, corev1.ConditionFalse
	}
	pod.Status.ContainerStatuses = nil
	for _, ctr := range pod.Spec.Containers {
		st := corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, ImageID: ctr.Image, Ready: !completes, Started: ptr.To(!completes)}
		if completes {
			st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}
		} else {
			st.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, st)
	}
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		st := ready
		if t == corev1.PodInitialized || t == corev1.PodScheduled {
			st = corev1.ConditionTrue
		}
		SetCondition(pod, t, st, now)
	}
	_, err = c.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		// The informer brings the newer pod; it is enqueued again if still pending.
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating the status of %s: %w", key, err)
	}
	return nil
}

// SetCondition sets a pod condition, moving its transition time only when the status
// changes, as the kubelet does.
func SetCondition(pod *corev1.Pod, t corev1.PodConditionType, st corev1.ConditionStatus, now metav1.Time) {
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == t {
			if c.Status != st {
				c.Status, c.LastTransitionTime = st, now
			}
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: st, LastTransitionTime: now})
}

// Names are the names of n nodes, prefix-0 … prefix-(n-1), starting at from.
func Names(prefix string, from, n int) []string {
	out := make([]string, 0, n)
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}
