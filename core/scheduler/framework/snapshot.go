package framework

import "fmt"

// NodeInfoLister reads the node infos of one snapshot.
type NodeInfoLister interface {
	// List returns every node info of the snapshot, in the snapshot's order.
	List() []*NodeInfo
	// Get returns one node info by node name.
	Get(name string) (*NodeInfo, error)
}

// Snapshot is an immutable-per-cycle view of the cluster's nodes and their pods. The cache
// updates it incrementally between cycles (only changed nodes are re-cloned).
type Snapshot struct {
	// NodeInfoMap indexes the node infos by node name.
	NodeInfoMap map[string]*NodeInfo
	// NodeInfoList holds the node infos that have a Node object, in a stable order.
	NodeInfoList []*NodeInfo
	// Index maps node name to its position in NodeInfoList.
	Index map[string]int
	// Generation is the cache generation the snapshot reflects.
	Generation int64
	// NodeSetGeneration is the cache's node-set generation the list reflects.
	NodeSetGeneration int64
}

// NewEmptySnapshot returns an empty snapshot for the cache to fill.
func NewEmptySnapshot() *Snapshot {
	return &Snapshot{NodeInfoMap: map[string]*NodeInfo{}, Index: map[string]int{}}
}

// NewSnapshot builds a snapshot from explicit node infos (tests and preemption dry runs).
func NewSnapshot(infos ...*NodeInfo) *Snapshot {
	s := NewEmptySnapshot()
	for _, ni := range infos {
		if ni.Node() == nil {
			continue
		}
		s.NodeInfoMap[ni.Node().Name] = ni
		s.Index[ni.Node().Name] = len(s.NodeInfoList)
		s.NodeInfoList = append(s.NodeInfoList, ni)
	}
	return s
}

// List returns the node infos.
func (s *Snapshot) List() []*NodeInfo { return s.NodeInfoList }

// Get returns the node info named name.
func (s *Snapshot) Get(name string) (*NodeInfo, error) {
	ni, ok := s.NodeInfoMap[name]
	if !ok || ni.Node() == nil {
		return nil, fmt.Errorf("node %q not found in snapshot", name)
	}
	return ni, nil
}

// NumNodes is the number of nodes in the snapshot.
func (s *Snapshot) NumNodes() int { return len(s.NodeInfoList) }
