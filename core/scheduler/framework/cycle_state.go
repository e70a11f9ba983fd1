package framework

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// StateKey names a piece of plugin state in a CycleState.
type StateKey string

// StateData is plugin state kept for one scheduling cycle.
type StateData interface {
	// Clone copies the data (preemption dry runs work on copies).
	Clone() StateData
}

// CycleState is the scratch space plugins share during one pod's scheduling cycle. It is
// safe for concurrent use because Filter and Score run over nodes in parallel.
type CycleState struct {
	mu   sync.RWMutex
	data map[StateKey]StateData
	// SkipFilterPlugins are plugins whose PreFilter returned Skip for this pod.
	SkipFilterPlugins sets.Set[string]
	// SkipScorePlugins are plugins whose PreScore returned Skip for this pod.
	SkipScorePlugins sets.Set[string]
	// RecordPluginMetrics says whether this cycle samples per-plugin latencies.
	RecordPluginMetrics bool
	// plugins is the plugin set of the cycle (set by RunPreFilterPlugins), so that
	// PostFilter (preemption) re-runs exactly the filters of this cycle.
	plugins *PluginSet
}

// Plugins is the plugin set of the cycle (nil before PreFilter ran).
func (c *CycleState) Plugins() *PluginSet { return c.plugins }

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{data: map[StateKey]StateData{}, SkipFilterPlugins: sets.New[string](), SkipScorePlugins: sets.New[string]()}
}

// Read returns the data stored under key.
func (c *CycleState) Read(key StateKey) (StateData, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if d, ok := c.data[key]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
}

// Write stores data under key.
func (c *CycleState) Write(key StateKey, d StateData) {
	c.mu.Lock()
	c.data[key] = d
	c.mu.Unlock()
}

// Delete removes key.
func (c *CycleState) Delete(key StateKey) {
	c.mu.Lock()
	delete(c.data, key)
	c.mu.Unlock()
}

// Clone deep-copies the state.
func (c *CycleState) Clone() *CycleState {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := NewCycleState()
	for k, v := range c.data {
		n.data[k] = v.Clone()
	}
	n.SkipFilterPlugins = c.SkipFilterPlugins.Clone()
	n.SkipScorePlugins = c.SkipScorePlugins.Clone()
	n.RecordPluginMetrics = c.RecordPluginMetrics
	n.plugins = c.plugins
	return n
}

// ReadAs reads key and asserts its type.
func ReadAs[T StateData](c *CycleState, key StateKey) (T, error) {
	var zero T
	d, err := c.Read(key)
	if err != nil {
		return zero, err
	}
	t, ok := d.(T)
	if !ok {
		return zero, fmt.Errorf("state %q has type %T, want %T", key, d, zero)
	}
	return t, nil
}
