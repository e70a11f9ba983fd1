// Package queue is the scheduling queue: activeQ (ordered by the profile's QueueSort,
// i.e. priority then timestamp), backoffQ (exponential backoff per pod) and the
// unschedulable pods, which cluster events move back (and a periodic flush as a last resort).
package queue

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/metrics"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// Defaults as in Kubernetes.
const (
	// DefaultPodInitialBackoff is the first backoff.
	DefaultPodInitialBackoff = time.Second
	// DefaultPodMaxBackoff caps the backoff.
	DefaultPodMaxBackoff = 10 * time.Second
	// DefaultPodMaxInUnschedulablePodsDuration is how long a pod may sit in the
	// unschedulable pool before the periodic flush retries it without any event.
	DefaultPodMaxInUnschedulablePodsDuration = 5 * time.Minute
)

// Cluster events that may make unschedulable pods schedulable.
const (
	// EventNodeAdd is a new node.
	EventNodeAdd = "NodeAdd"
	// EventNodeUpdate is a node change that can matter (labels, taints, allocatable…).
	EventNodeUpdate = "NodeUpdate"
	// EventAssignedPodDelete is a bound pod leaving (frees resources and ports).
	EventAssignedPodDelete = "AssignedPodDelete"
	// EventAssignedPodUpdate is a bound pod changing (e.g. labels for affinity).
	EventAssignedPodUpdate = "AssignedPodUpdate"
	// EventAssignedPodAdd is a newly bound pod (affinity may now be satisfied).
	EventAssignedPodAdd = "AssignedPodAdd"
	// EventForceActivate is an explicit request.
	EventForceActivate = "ForceActivate"
	// EventUnschedulableTimeout is the periodic flush.
	EventUnschedulableTimeout = "UnschedulableTimeout"
)

// Options configure the queue.
type Options struct {
	// Clock (nil = real clock); tests pass a fake one.
	Clock clock.WithTicker
	// InitialBackoff (0 = 1 s).
	InitialBackoff time.Duration
	// MaxBackoff (0 = 10 s).
	MaxBackoff time.Duration
	// MaxInUnschedulable (0 = 5 min).
	MaxInUnschedulable time.Duration
	// Metrics receives the pending-pod gauges (nil = none).
	Metrics *metrics.Metrics
}

// PriorityQueue is the scheduling queue. It is safe for concurrent use.
type PriorityQueue struct {
	opts  Options
	clock clock.WithTicker

	mu            sync.Mutex
	cond          *sync.Cond
	active        *podHeap
	backoff       *podHeap
	unschedulable map[types.UID]*framework.QueuedPodInfo
	inFlight      map[types.UID]bool
	// schedulingCycle counts Pops; moveRequestCycle is the cycle of the last move
	// request. A pod that fails in a cycle that saw a move request goes to backoff, not to
	// the unschedulable pool, so an event that arrived while it was being scheduled is
	// not lost.
	schedulingCycle  int64
	moveRequestCycle int64
	closed           bool
}

// New builds a queue ordered by less (the QueueSort plugin's Less).
func New(less func(a, b *framework.QueuedPodInfo) bool, opts Options) *PriorityQueue {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.InitialBackoff <= 0 {
		opts.InitialBackoff = DefaultPodInitialBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultPodMaxBackoff
	}
	if opts.MaxInUnschedulable <= 0 {
		opts.MaxInUnschedulable = DefaultPodMaxInUnschedulablePodsDuration
	}
	q := &PriorityQueue{
		opts:          opts,
		clock:         opts.Clock,
		active:        newHeap(less),
		unschedulable: map[types.UID]*framework.QueuedPodInfo{},
		inFlight:      map[types.UID]bool{},
	}
	q.backoff = newHeap(func(a, b *framework.QueuedPodInfo) bool { return a.BackoffExpiration.Before(b.BackoffExpiration) })
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Run flushes backoffQ every second and long-unschedulable pods every 30 s (as
// Kubernetes) until ctx ends, then closes the queue so Pop returns.
func (q *PriorityQueue) Run(ctx context.Context) {
	backoffTick := q.clock.NewTicker(time.Second)
	defer backoffTick.Stop()
	unschedTick := q.clock.NewTicker(30 * time.Second)
	defer unschedTick.Stop()
	for {
		select {
		case <-ctx.Done():
			q.Close()
			return
		case <-backoffTick.C():
			q.FlushBackoffQCompleted()
		case <-unschedTick.C():
			q.FlushUnschedulablePodsLeftover()
		}
	}
}

// Close makes Pop return nil.
func (q *PriorityQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *PriorityQueue) newInfo(pod *v1.Pod) *framework.QueuedPodInfo {
	return &framework.QueuedPodInfo{PodInfo: framework.NewPodInfo(pod), Timestamp: q.clock.Now()}
}

// Add queues a new pending pod in activeQ.
func (q *PriorityQueue) Add(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.removeLocked(pod.UID)
	q.active.push(q.newInfo(pod))
	q.updateMetricsLocked()
	q.cond.Broadcast()
}

// Update replaces a queued pod's object. A pod in the unschedulable pool is given a new
// chance (its spec may now fit), in backoffQ if its backoff is not over.
func (q *PriorityQueue) Update(oldPod, newPod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	uid := newPod.UID
	if pi := q.active.get(uid); pi != nil {
		pi.PodInfo = framework.NewPodInfo(newPod)
		q.active.update(pi)
		return
	}
	if pi := q.backoff.get(uid); pi != nil {
		pi.PodInfo = framework.NewPodInfo(newPod)
		q.backoff.update(pi)
		return
	}
	if pi, ok := q.unschedulable[uid]; ok {
		pi.PodInfo = framework.NewPodInfo(newPod)
		if oldPod != nil && oldPod.ResourceVersion == newPod.ResourceVersion {
			return
		}
		// Status-only updates (our own PodScheduled condition) must not cause a retry loop.
		if oldPod != nil && specAndMetaEqual(oldPod, newPod) {
			return
		}
		delete(q.unschedulable, uid)
		q.moveLocked(pi)
		q.updateMetricsLocked()
		q.cond.Broadcast()
		return
	}
	if q.inFlight[uid] {
		return
	}
	q.active.push(q.newInfo(newPod))
	q.updateMetricsLocked()
	q.cond.Broadcast()
}

func specAndMetaEqual(a, b *v1.Pod) bool {
	return a.Generation == b.Generation && mapsEqual(a.Labels, b.Labels) && mapsEqual(a.Annotations, b.Annotations)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// Delete removes a pod from every sub-queue.
func (q *PriorityQueue) Delete(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.removeLocked(pod.UID)
	q.updateMetricsLocked()
}

func (q *PriorityQueue) removeLocked(uid types.UID) {
	q.active.remove(uid)
	q.backoff.remove(uid)
	delete(q.unschedulable, uid)
}

// Pop blocks until a pod is in activeQ (or the queue is closed / ctx ends: nil).
func (q *PriorityQueue) Pop(ctx context.Context) *framework.QueuedPodInfo {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.cond.Broadcast()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	var pi *framework.QueuedPodInfo
	for pi == nil {
		if q.closed || ctx.Err() != nil {
			return nil
		}
		switch {
		case q.active.Len() > 0:
			pi = q.active.pop()
		case q.backoff.Len() > 0 && !q.backoff.peek().ErrorBackoff:
			// Nothing else to do: rather than idle until the backoff ends, take the pod
			// from backoffQ (Kubernetes' SchedulerPopFromBackoffQ, on by default since
			// 1.33). Pods backing off after an error still wait.
			pi = q.backoff.pop()
		default:
			q.cond.Wait()
		}
	}
	q.schedulingCycle++
	pi.Attempts++
	if pi.InitialAttemptTimestamp == nil {
		t := q.clock.Now()
		pi.InitialAttemptTimestamp = &t
	}
	q.inFlight[pi.UID()] = true
	q.updateMetricsLocked()
	return pi
}

// Done marks a popped pod as no longer being scheduled.
func (q *PriorityQueue) Done(uid types.UID) {
	q.mu.Lock()
	delete(q.inFlight, uid)
	q.mu.Unlock()
}

// SchedulingCycle is the number of Pops so far.
func (q *PriorityQueue) SchedulingCycle() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.schedulingCycle
}

// backoffDuration is initial × 2^(attempts-1), capped at max.
func (q *PriorityQueue) backoffDuration(pi *framework.QueuedPodInfo) time.Duration {
	d := q.opts.InitialBackoff
	for i := 1; i < pi.Attempts; i++ {
		if d > q.opts.MaxBackoff-d {
			return q.opts.MaxBackoff
		}
		d += d
	}
	return min(d, q.opts.MaxBackoff)
}

// AddUnschedulableIfNotPresent puts back a pod that failed in podSchedulingCycle. An
// Error (not a rejection), or a move request seen during the cycle, sends it to
// backoffQ; otherwise it waits in the unschedulable pool for a cluster event.
func (q *PriorityQueue) AddUnschedulableIfNotPresent(pi *framework.QueuedPodInfo, podSchedulingCycle int64, isError bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, pi.UID())
	if q.active.get(pi.UID()) != nil || q.backoff.get(pi.UID()) != nil || q.unschedulable[pi.UID()] != nil {
		return
	}
	now := q.clock.Now()
	pi.Timestamp = now
	pi.BackoffExpiration = now.Add(q.backoffDuration(pi))
	pi.ErrorBackoff = isError
	if isError || q.moveRequestCycle >= podSchedulingCycle {
		q.backoff.push(pi)
	} else {
		q.unschedulable[pi.UID()] = pi
	}
	q.updateMetricsLocked()
}

// moveLocked puts pi into backoffQ if its backoff is not over, else activeQ.
func (q *PriorityQueue) moveLocked(pi *framework.QueuedPodInfo) {
	if q.clock.Now().Before(pi.BackoffExpiration) {
		q.backoff.push(pi)
		return
	}
	pi.Timestamp = q.clock.Now()
	q.active.push(pi)
}

// MoveAllToActiveOrBackoffQueue moves every unschedulable pod after a cluster event that
// may make them schedulable (node added, pod deleted…), and remembers the event for
// pods currently in flight.
func (q *PriorityQueue) MoveAllToActiveOrBackoffQueue(event string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.moveRequestCycle = q.schedulingCycle
	if len(q.unschedulable) == 0 {
		return
	}
	for uid, pi := range q.unschedulable {
		delete(q.unschedulable, uid)
		q.moveLocked(pi)
	}
	q.updateMetricsLocked()
	q.cond.Broadcast()
}

// Activate moves the given pods (if waiting in backoff or unschedulable) to activeQ now.
func (q *PriorityQueue) Activate(uids ...types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, uid := range uids {
		if pi, ok := q.unschedulable[uid]; ok {
			delete(q.unschedulable, uid)
			q.active.push(pi)
		} else if pi := q.backoff.get(uid); pi != nil {
			q.backoff.remove(uid)
			q.active.push(pi)
		}
	}
	q.updateMetricsLocked()
	q.cond.Broadcast()
}

// FlushBackoffQCompleted moves pods whose backoff ended to activeQ.
func (q *PriorityQueue) FlushBackoffQCompleted() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	moved := false
	for q.backoff.Len() > 0 {
		pi := q.backoff.peek()
		if pi.BackoffExpiration.After(now) {
			break
		}
		q.backoff.pop()
		q.active.push(pi)
		moved = true
	}
	if moved {
		q.updateMetricsLocked()
		q.cond.Broadcast()
	}
}

// FlushUnschedulablePodsLeftover retries pods unschedulable for longer than the limit.
func (q *PriorityQueue) FlushUnschedulablePodsLeftover() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	moved := false
	for uid, pi := range q.unschedulable {
		if now.Sub(pi.Timestamp) > q.opts.MaxInUnschedulable {
			delete(q.unschedulable, uid)
			q.moveLocked(pi)
			moved = true
		}
	}
	if moved {
		q.updateMetricsLocked()
		q.cond.Broadcast()
	}
}

// Pending lists the pods per sub-queue (active, backoff, unschedulable).
func (q *PriorityQueue) Pending() (active, backoff, unschedulable []*v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, pi := range q.active.items {
		active = append(active, pi.Pod)
	}
	for _, pi := range q.backoff.items {
		backoff = append(backoff, pi.Pod)
	}
	for _, pi := range q.unschedulable {
		unschedulable = append(unschedulable, pi.Pod)
	}
	return
}

// Lens returns the sizes of the sub-queues.
func (q *PriorityQueue) Lens() (active, backoff, unschedulable int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active.Len(), q.backoff.Len(), len(q.unschedulable)
}

// Has reports whether the pod is queued anywhere.
func (q *PriorityQueue) Has(uid types.UID) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active.get(uid) != nil || q.backoff.get(uid) != nil || q.unschedulable[uid] != nil
}

// UnschedulableUIDs lists the pods in the unschedulable pool.
func (q *PriorityQueue) UnschedulableUIDs() sets.Set[types.UID] {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := sets.New[types.UID]()
	for uid := range q.unschedulable {
		s.Insert(uid)
	}
	return s
}

func (q *PriorityQueue) updateMetricsLocked() {
	q.opts.Metrics.SetPending(q.active.Len(), q.backoff.Len(), len(q.unschedulable))
}

// podHeap is a heap of pods indexed by uid.
type podHeap struct {
	items []*framework.QueuedPodInfo
	index map[types.UID]int
	less  func(a, b *framework.QueuedPodInfo) bool
}

func newHeap(less func(a, b *framework.QueuedPodInfo) bool) *podHeap {
	return &podHeap{index: map[types.UID]int{}, less: less}
}

// Len implements heap.Interface.
func (h *podHeap) Len() int { return len(h.items) }

// Less implements heap.Interface.
func (h *podHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }

// Swap implements heap.Interface.
func (h *podHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].UID()] = i
	h.index[h.items[j].UID()] = j
}

// Push implements heap.Interface.
func (h *podHeap) Push(x any) {
	pi := x.(*framework.QueuedPodInfo)
	h.index[pi.UID()] = len(h.items)
	h.items = append(h.items, pi)
}

// Pop implements heap.Interface.
func (h *podHeap) Pop() any {
	n := len(h.items)
	pi := h.items[n-1]
	h.items[n-1] = nil
	h.items = h.items[:n-1]
	delete(h.index, pi.UID())
	return pi
}

func (h *podHeap) push(pi *framework.QueuedPodInfo) {
	if i, ok := h.index[pi.UID()]; ok {
		h.items[i] = pi
		heap.Fix(h, i)
		return
	}
	heap.Push(h, pi)
}
func (h *podHeap) pop() *framework.QueuedPodInfo  { return heap.Pop(h).(*framework.QueuedPodInfo) }
func (h *podHeap) peek() *framework.QueuedPodInfo { return h.items[0] }
func (h *podHeap) get(uid types.UID) *framework.QueuedPodInfo {
	if i, ok := h.index[uid]; ok {
		return h.items[i]
	}
	return nil
}
func (h *podHeap) update(pi *framework.QueuedPodInfo) {
	if i, ok := h.index[pi.UID()]; ok {
		heap.Fix(h, i)
	}
}
func (h *podHeap) remove(uid types.UID) {
	if i, ok := h.index[uid]; ok {
		heap.Remove(h, i)
	}
}
