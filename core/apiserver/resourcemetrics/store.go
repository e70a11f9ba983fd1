package resourcemetrics

import (
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// pair is the last two readings of a node or container; prev is zero until there are two.
type pair struct{ prev, last Point }

// Store keeps the last two scrapes' readings: rates need two cumulative figures.
type Store struct {
	mu    sync.RWMutex
	nodes map[string]pair
	pods  map[types.NamespacedName]map[string]pair // by pod, then container
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{nodes: map[string]pair{}, pods: map[types.NamespacedName]map[string]pair{}}
}

// Update replaces the store's contents with one scrape round's batches by node name:
// a node or container absent from it is forgotten, as metrics-server forgets what its
// last round did not read. A reading no newer than the last one kept leaves the pair
// as it was.
func (s *Store) Update(batches map[string]*Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes := make(map[string]pair, len(batches))
	pods := map[types.NamespacedName]map[string]pair{}
	for name, b := range batches {
		old, hadNode := s.nodes[name]
		if b.Node != nil {
			nodes[name] = advance(old, *b.Node, hadNode)
		}
		for k, p := range b.Containers {
			pod := types.NamespacedName{Namespace: k.Namespace, Name: k.Pod}
			cur, had := s.pods[pod][k.Container]
			if !had && hadNode && !old.last.Timestamp.IsZero() && p.StartTime.After(old.last.Timestamp) && p.StartTime.Before(p.Timestamp) {
				// Started since the node's last scrape: its CPU time was 0 when it started,
				// which gives a rate one round early (metrics-server does the same).
				cur, had = pair{last: Point{Timestamp: p.StartTime, StartTime: p.StartTime}}, true
			}
			if pods[pod] == nil {
				pods[pod] = map[string]pair{}
			}
			pods[pod][k.Container] = advance(cur, p, had)
		}
	}
	s.nodes, s.pods = nodes, pods
}

// advance adds p to cur when it is newer.
func advance(cur pair, p Point, had bool) pair {
	switch {
	case !had:
		return pair{last: p}
	case p.Timestamp.After(cur.last.Timestamp):
		return pair{prev: cur.last, last: p}
	}
	return cur
}

// usage is the CPU rate and memory of a pair, the window and the time they are for;
// ok is false without two readings or when the counter went back (a restart).
func usage(p pair) (cpu, mem resource.Quantity, at time.Time, window time.Duration, err error) {
	if p.prev.Timestamp.IsZero() {
		return cpu, mem, at, 0, fmt.Errorf("one reading only")
	}
	if p.last.StartTime.Before(p.prev.StartTime) || p.last.CPUNanoSeconds < p.prev.CPUNanoSeconds {
		return cpu, mem, at, 0, fmt.Errorf("restarted between readings")
	}
	window = p.last.Timestamp.Sub(p.prev.Timestamp)
	rate := float64(p.last.CPUNanoSeconds-p.prev.CPUNanoSeconds) / window.Seconds() // nanocores
	cpu = *resource.NewScaledQuantity(int64(rate), resource.Nano)
	mem = *resource.NewQuantity(int64(p.last.MemoryBytes), resource.BinarySI)
	return cpu, mem, p.last.Timestamp, window, nil
}

// NodeMetrics returns node's metrics, false until two scrapes have read it.
func (s *Store) NodeMetrics(node *corev1.Node) (*metricsv1beta1.NodeMetrics, bool) {
	s.mu.RLock()
	p, ok := s.nodes[node.Name]
	s.mu.RUnlock()
	if !ok {
		return nil, false
	}
	cpu, mem, at, window, err := usage(p)
	if err != nil {
		return nil, false
	}
	return &metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels, CreationTimestamp: metav1.Now()},
		Timestamp:  metav1.NewTime(at), Window: metav1.Duration{Duration: window},
		Usage: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
	}, true
}

// PodMetrics returns pod's metrics, false unless every container it reported has a
// rate; the pod's timestamp and window are its earliest container's.
func (s *Store) PodMetrics(pod *corev1.Pod) (*metricsv1beta1.PodMetrics, bool) {
	s.mu.RLock()
	cs, ok := s.pods[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]
	s.mu.RUnlock()
	if !ok || len(cs) == 0 {
		return nil, false
	}
	m := &metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels, CreationTimestamp: metav1.Now()},
		Containers: make([]metricsv1beta1.ContainerMetrics, 0, len(cs)),
	}
	// In the pod's container order, then any the spec does not name.
	order := make([]string, 0, len(cs))
	for _, c := range pod.Spec.Containers {
		if _, ok := cs[c.Name]; ok {
			order = append(order, c.Name)
		}
	}
	var rest []string
	for name := range cs {
		if !slices.Contains(order, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	order = append(order, rest...)
	for _, name := range order {
		cpu, mem, at, window, err := usage(cs[name])
		if err != nil {
			return nil, false
		}
		if m.Timestamp.IsZero() || at.Before(m.Timestamp.Time) {
			m.Timestamp, m.Window = metav1.NewTime(at), metav1.Duration{Duration: window}
		}
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: name,
			Usage: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}})
	}
	return m, true
}
