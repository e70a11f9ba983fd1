// Package cache is the scheduler's view of nodes and the pods on them, including pods
// assumed on a node before their binding is observed, so that decisions never wait for
// the informer. Each scheduling cycle works on an incrementally updated Snapshot.
package cache

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// DefaultAssumedPodTTL bounds how long an assumed pod whose binding finished may wait for
// the informer to confirm it before it is expired.
const DefaultAssumedPodTTL = 30 * time.Second

type podState struct {
	pod *v1.Pod
	// deadline is set once binding finished; the assumed pod expires after it.
	deadline        *time.Time
	bindingFinished bool
}

// nodeItem is a node info in a most-recently-updated-first doubly linked list, so that a
// snapshot update visits only the nodes changed since the last one.
type nodeItem struct {
	info       *framework.NodeInfo
	prev, next *nodeItem
}

// Cache is safe for concurrent use.
type Cache struct {
	ttl   time.Duration
	clock clock.Clock
	log   *slog.Logger

	mu       sync.RWMutex
	nodes    map[string]*nodeItem
	head     *nodeItem
	pods     map[types.UID]*podState
	assumed  map[types.UID]bool
	gen      int64
	nodeSet  int64 // bumped when the set of nodes with a Node object changes
	nodeList []string
}

// New returns an empty cache (ttl 0 = DefaultAssumedPodTTL; nil clock = real).
func New(ttl time.Duration, clk clock.Clock, log *slog.Logger) *Cache {
	if ttl <= 0 {
		ttl = DefaultAssumedPodTTL
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cache{ttl: ttl, clock: clk, log: log, nodes: map[string]*nodeItem{}, pods: map[types.UID]*podState{}, assumed: map[types.UID]bool{}}
}

// Run expires assumed pods every second until ctx ends.
func (c *Cache) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.CleanupExpiredAssumedPods()
		}
	}
}

func (c *Cache) nextGen() int64 { c.gen++; return c.gen }

// touch moves the node to the list head and bumps its generation.
func (c *Cache) touch(name string) *nodeItem {
	it, ok := c.nodes[name]
	if !ok {
		it = &nodeItem{info: framework.NewNodeInfo()}
		c.nodes[name] = it
	} else if it != c.head {
		if it.prev != nil {
			it.prev.next = it.next
		}
		if it.next != nil {
			it.next.prev = it.prev
		}
		it.prev, it.next = nil, nil
	}
	if it != c.head {
		it.next = c.head
		if c.head != nil {
			c.head.prev = it
		}
		c.head = it
	}
	it.info.Generation = c.nextGen()
	return it
}

func (c *Cache) unlink(name string) {
	it, ok := c.nodes[name]
	if !ok {
		return
	}
	if it.prev != nil {
		it.prev.next = it.next
	}
	if it.next != nil {
		it.next.prev = it.prev
	}
	if c.head == it {
		c.head = it.next
	}
	delete(c.nodes, name)
}

func (c *Cache) addPodLocked(pod *v1.Pod) {
	c.touch(pod.Spec.NodeName).info.AddPod(pod)
}

func (c *Cache) removePodLocked(pod *v1.Pod) error {
	it, ok := c.nodes[pod.Spec.NodeName]
	if !ok {
		return fmt.Errorf("node %q of pod %s/%s not in cache", pod.Spec.NodeName, pod.Namespace, pod.Name)
	}
	if err := it.info.RemovePod(pod); err != nil {
		return err
	}
	c.touch(pod.Spec.NodeName)
	if len(it.info.Pods) == 0 && it.info.Node() == nil {
		c.unlink(pod.Spec.NodeName)
	}
	return nil
}

// AssumePod accounts pod (with Spec.NodeName set) on its node before it is bound.
func (c *Cache) AssumePod(pod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pods[pod.UID]; ok {
		return fmt.Errorf("pod %s/%s is in the cache, so can't be assumed", pod.Namespace, pod.Name)
	}
	c.addPodLocked(pod)
	c.pods[pod.UID] = &podState{pod: pod}
	c.assumed[pod.UID] = true
	return nil
}

// FinishBinding starts the TTL of an assumed pod whose bind call returned.
func (c *Cache) FinishBinding(pod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.pods[pod.UID]
	if ok && c.assumed[pod.UID] {
		d := c.clock.Now().Add(c.ttl)
		ps.deadline = &d
		ps.bindingFinished = true
	}
	return nil
}

// ForgetPod drops an assumed pod (its binding failed).
func (c *Cache) ForgetPod(pod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.pods[pod.UID]
	if !ok || !c.assumed[pod.UID] {
		return fmt.Errorf("pod %s/%s wasn't assumed so cannot be forgotten", pod.Namespace, pod.Name)
	}
	if err := c.removePodLocked(ps.pod); err != nil {
		return err
	}
	delete(c.pods, pod.UID)
	delete(c.assumed, pod.UID)
	return nil
}

// AddPod is the informer seeing a bound pod; it confirms an assumed pod (moving it if it
// landed elsewhere).
func (c *Cache) AddPod(pod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.pods[pod.UID]
	switch {
	case ok && c.assumed[pod.UID]:
		if err := c.removePodLocked(ps.pod); err != nil {
			c.log.Error("removing assumed pod", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
		c.addPodLocked(pod)
		delete(c.assumed, pod.UID)
		ps.deadline = nil
		ps.pod = pod
	case !ok:
		c.addPodLocked(pod)
		c.pods[pod.UID] = &podState{pod: pod}
	default:
		return fmt.Errorf("pod %s/%s was already in added state", pod.Namespace, pod.Name)
	}
	return nil
}

// UpdatePod replaces a bound pod.
func (c *Cache) UpdatePod(oldPod, newPod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.pods[oldPod.UID]
	if !ok {
		c.addPodLocked(newPod)
		c.pods[newPod.UID] = &podState{pod: newPod}
		return nil
	}
	if c.assumed[oldPod.UID] {
		// The informer's add has not arrived yet; treat the update as the confirmation.
		delete(c.assumed, oldPod.UID)
	}
	if err := c.removePodLocked(ps.pod); err != nil {
		return err
	}
	c.addPodLocked(newPod)
	ps.pod = newPod
	ps.deadline = nil
	return nil
}

// RemovePod forgets a deleted (or terminated) bound pod.
func (c *Cache) RemovePod(pod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.pods[pod.UID]
	if !ok {
		return nil
	}
	err := c.removePodLocked(ps.pod)
	delete(c.pods, pod.UID)
	delete(c.assumed, pod.UID)
	return err
}

// IsAssumedPod reports whether the pod is assumed and not yet confirmed.
func (c *Cache) IsAssumedPod(pod *v1.Pod) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.assumed[pod.UID]
}

// GetPod returns the cached copy of a pod.
func (c *Cache) GetPod(pod *v1.Pod) (*v1.Pod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps, ok := c.pods[pod.UID]
	if !ok {
		return nil, false
	}
	return ps.pod, true
}

// AddNode adds or replaces a node object.
func (c *Cache) AddNode(node *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it, ok := c.nodes[node.Name]
	if !ok || it.info.Node() == nil {
		c.nodeSet++
		c.nodeList = append(c.nodeList, node.Name)
	}
	c.touch(node.Name).info.SetNode(node)
}

// UpdateNode replaces a node object.
func (c *Cache) UpdateNode(_, node *v1.Node) { c.AddNode(node) }

// RemoveNode removes a node; its pods stay accounted until they are deleted.
func (c *Cache) RemoveNode(node *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it, ok := c.nodes[node.Name]
	if !ok || it.info.Node() == nil {
		return
	}
	c.nodeSet++
	for i, n := range c.nodeList {
		if n == node.Name {
			c.nodeList = append(c.nodeList[:i], c.nodeList[i+1:]...)
			break
		}
	}
	it.info.RemoveNode()
	c.touch(node.Name)
	if len(it.info.Pods) == 0 {
		c.unlink(node.Name)
	}
}

// NodeCount is the number of nodes with a Node object.
func (c *Cache) NodeCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.nodeList)
}

// PodCount is the number of pods (assumed included).
func (c *Cache) PodCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.pods)
}

// CleanupExpiredAssumedPods expires assumed pods whose binding finished more than the TTL
// ago without the informer confirming them.
func (c *Cache) CleanupExpiredAssumedPods() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for uid := range c.assumed {
		ps := c.pods[uid]
		if !ps.bindingFinished || ps.deadline == nil || now.Before(*ps.deadline) {
			continue
		}
		c.log.Warn("assumed pod expired", "pod", ps.pod.Namespace+"/"+ps.pod.Name, "node", ps.pod.Spec.NodeName)
		if err := c.removePodLocked(ps.pod); err != nil {
			c.log.Error("expiring assumed pod", "err", err)
		}
		delete(c.pods, uid)
		delete(c.assumed, uid)
	}
}

// UpdateSnapshot brings snap up to date: only nodes changed since its generation are
// re-cloned (the list is walked most-recent first and stops at the first unchanged node).
func (c *Cache) UpdateSnapshot(snap *framework.Snapshot) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	rebuild := snap.NodeSetGeneration != c.nodeSet
	for it := c.head; it != nil && it.info.Generation > snap.Generation; it = it.next {
		ni := it.info.Clone()
		name := ""
		if n := ni.Node(); n != nil {
			name = n.Name
		} else {
			// A node known only through its pods stays out of the snapshot.
			continue
		}
		snap.NodeInfoMap[name] = ni
		if i, ok := snap.Index[name]; ok && !rebuild {
			snap.NodeInfoList[i] = ni
		}
	}
	if rebuild {
		for name := range snap.NodeInfoMap {
			if it, ok := c.nodes[name]; !ok || it.info.Node() == nil {
				delete(snap.NodeInfoMap, name)
			}
		}
		snap.NodeInfoList = make([]*framework.NodeInfo, 0, len(c.nodeList))
		snap.Index = make(map[string]int, len(c.nodeList))
		for _, name := range c.nodeList {
			ni, ok := snap.NodeInfoMap[name]
			if !ok {
				ni = c.nodes[name].info.Clone()
				snap.NodeInfoMap[name] = ni
			}
			snap.Index[name] = len(snap.NodeInfoList)
			snap.NodeInfoList = append(snap.NodeInfoList, ni)
		}
		snap.NodeSetGeneration = c.nodeSet
	}
	snap.Generation = c.gen
}
