package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/schedplugin"
)

// SchedulerTarget is the scheduler a scheduling manager feeds WASM Filter/Score plugins
// into; *scheduler.Scheduler implements it. Both calls swap atomically per scheduling
// cycle: cycles already running keep the plugins they started with.
type SchedulerTarget interface {
	// SetExtension adds or replaces (by name) a plugin in the named profiles.
	SetExtension(ext framework.Extension, profiles ...string) error
	// RemoveExtension removes a plugin from the named profiles.
	RemoveExtension(name string, profiles ...string)
}

// CycleCounter is implemented by a SchedulerTarget that can tell when the cycles holding a
// replaced plugin are over: it returns the number of scheduling cycles started so far.
// Scheduling cycles run one at a time, so once the count passes its value at the swap,
// every cycle that could still use the old plugin has finished.
type CycleCounter interface {
	// SchedulingCycle is the number of scheduling cycles started so far.
	SchedulingCycle() int64
}

// DefaultProfile is the profile a plugin joins when spec.scheduler.profiles is empty.
const DefaultProfile = "default-scheduler"

// DefaultSchedulingTimeout is the call deadline of a scheduling plugin without
// spec.limits.timeout. The first call of each instance carries every node document of the
// cluster into its node table (ABI §7.6): with the Go SDK that takes seconds for 5,000
// nodes, and a call cut off at the general 1 s default would discard the instance and
// leave the next call as cold, so the plugin would never answer.
const DefaultSchedulingTimeout = 10 * time.Second

// retireBackstop closes a replaced plugin after this long even if the scheduler started no
// new cycle (an idle scheduler): no scheduling cycle lasts that long.
const retireBackstop = 2 * time.Minute

// schedState is what a scheduling manager has loaded; guarded by Manager.mu.
type schedState struct {
	nodes   *wasm.NodeCache
	entries map[string]*schedEntry
}

// schedEntry is one plugin object loaded into the scheduler.
type schedEntry struct {
	key        string
	name       string // name in the framework: wasm:<ns>/<name> or wasm:<name>
	generation int64
	profiles   []string
	ext        framework.Extension
	plugin     *wasm.Plugin
}

// SchedulingName is the framework name of a plugin object: "wasm:<namespace>/<name>", or
// "wasm:<name>" for a cluster plugin.
func SchedulingName(namespace, name string) string {
	if namespace == "" {
		return "wasm:" + name
	}
	return "wasm:" + namespace + "/" + name
}

// usesScheduling reports whether a plugin has hooks a scheduling manager serves.
func usesScheduling(spec *wasmv1.WasmPluginSpec) bool {
	return slices.Contains(spec.Hooks, wasmv1.HookFilter) || slices.Contains(spec.Hooks, wasmv1.HookScore)
}

func profilesOf(spec *wasmv1.WasmPluginSpec) []string {
	if spec.Scheduler == nil || len(spec.Scheduler.Profiles) == 0 {
		return []string{DefaultProfile}
	}
	return slices.Clone(spec.Scheduler.Profiles)
}

// reconcileScheduling loads, replaces and removes the scheduler's WASM plugins to match
// the objects. A changed object gets a freshly loaded plugin that replaces the old one
// atomically per scheduling cycle; the old one is closed once no cycle can use it.
func (m *Manager) reconcileScheduling(ctx context.Context, objs []any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := &m.sched
	if st.entries == nil {
		st.entries = map[string]*schedEntry{}
		st.nodes = wasm.NewNodeCache()
	}
	seen := map[string]bool{}
	for _, raw := range objs {
		o, err := decode(raw)
		if err != nil {
			m.log.Error("reading plugin object", "err", err)
			continue
		}
		if !usesScheduling(&o.spec) {
			continue
		}
		seen[o.key] = true
		prev := st.entries[o.key]
		if prev != nil && prev.generation == o.generation {
			continue
		}
		e, err := m.loadScheduling(ctx, o)
		if err == nil {
			err = m.install(e, prev)
			if err != nil {
				m.closePlugin(e.plugin)
			}
		}
		if err != nil {
			m.log.Error("loading scheduling plugin", "plugin", o.key, "err", err)
			m.writeStatus(ctx, o, "Failed", "", err.Error())
			// The last good version, if any, keeps serving.
			continue
		}
		m.writeStatus(ctx, o, "Loaded", e.plugin.Digest(), "")
		m.log.Info("scheduling plugin installed", "plugin", e.name, "digest", e.plugin.Digest(), "profiles", e.profiles, "generation", e.generation)
		st.entries[o.key] = e
		if prev != nil {
			m.retireScheduling(ctx, prev.plugin)
		}
	}
	for key, e := range st.entries {
		if seen[key] {
			continue
		}
		m.cfg.Scheduler.RemoveExtension(e.name, e.profiles...)
		delete(st.entries, key)
		m.log.Info("scheduling plugin removed", "plugin", e.name)
		m.retireScheduling(ctx, e.plugin)
	}
}

// loadScheduling fetches, compiles and loads o's module as a new plugin and wraps it.
func (m *Manager) loadScheduling(ctx context.Context, o *object) (*schedEntry, error) {
	data, err := m.fetch(ctx, o)
	if err != nil {
		return nil, err
	}
	mod, err := m.cfg.Runtime.Compile(ctx, data, o.spec.SHA256)
	if err != nil {
		return nil, fmt.Errorf("compiling module: %w", err)
	}
	defer func() { _ = mod.Close(context.WithoutCancel(ctx)) }()
	filter, score := slices.Contains(o.spec.Hooks, wasmv1.HookFilter), slices.Contains(o.spec.Hooks, wasmv1.HookScore)
	for h, on := range map[wasmv1.Hook]bool{wasmv1.HookFilter: filter, wasmv1.HookScore: score} {
		if on && !mod.Implements(string(h)) {
			return nil, fmt.Errorf("the module does not export the %s hook", h)
		}
	}
	var cfgJSON json.RawMessage
	if o.spec.Config != nil {
		cfgJSON = o.spec.Config.Raw
	}
	lim := limits(o.spec.Limits)
	if lim.Timeout == 0 {
		lim.Timeout = DefaultSchedulingTimeout
	}
	p, err := m.cfg.Runtime.Load(ctx, mod, wasm.PluginConfig{Name: o.name, Namespace: o.namespace, Config: cfgJSON, Limits: lim})
	if err != nil {
		return nil, err
	}
	name := SchedulingName(o.namespace, o.name)
	fp := o.spec.FailurePolicy
	adapter, err := schedplugin.New(schedplugin.Config{Name: name, Plugin: p, Filter: filter, Score: score,
		Ignore: fp != nil && *fp == wasmv1.Ignore, Nodes: m.sched.nodes, Logger: m.log})
	if err != nil {
		m.closePlugin(p)
		return nil, err
	}
	var weight int32
	if o.spec.Scheduler != nil {
		weight = o.spec.Scheduler.Weight
	}
	return &schedEntry{key: o.key, name: name, generation: o.generation, profiles: profilesOf(&o.spec), plugin: p,
		// A tenant's plugin filters and scores only its own namespace's pods.
		ext: framework.Extension{Plugin: adapter, Weight: weight, Namespace: o.namespace}}, nil
}

// install puts e into its profiles in place of prev, and takes prev out of profiles it
// no longer joins. On failure it restores prev where it had been replaced.
func (m *Manager) install(e, prev *schedEntry) error {
	if err := m.cfg.Scheduler.SetExtension(e.ext, e.profiles...); err != nil {
		if prev != nil {
			if rerr := m.cfg.Scheduler.SetExtension(prev.ext, prev.profiles...); rerr != nil {
				m.log.Error("restoring scheduling plugin", "plugin", prev.name, "err", rerr)
			}
		} else {
			m.cfg.Scheduler.RemoveExtension(e.name, e.profiles...)
		}
		return fmt.Errorf("adding %s to profiles %v: %w", e.name, e.profiles, err)
	}
	if prev != nil {
		var gone []string
		for _, p := range prev.profiles {
			if !slices.Contains(e.profiles, p) {
				gone = append(gone, p)
			}
		}
		if len(gone) > 0 {
			m.cfg.Scheduler.RemoveExtension(prev.name, gone...)
		}
	}
	return nil
}

// retireScheduling closes a plugin that was just replaced or removed once the scheduling
// cycles that may still hold it are over (see CycleCounter), or at the backstop.
func (m *Manager) retireScheduling(ctx context.Context, p *wasm.Plugin) {
	counter, ok := m.cfg.Scheduler.(CycleCounter)
	var c0 int64
	if ok {
		c0 = counter.SchedulingCycle()
	}
	m.retired.Add(1)
	go func() {
		defer m.retired.Done()
		backstop := time.NewTimer(retireBackstop)
		defer backstop.Stop()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
	wait:
		for ok {
			select {
			case <-ctx.Done():
				break wait
			case <-backstop.C:
				m.log.Warn("closing replaced scheduling plugin: no new scheduling cycle started", "plugin", p.Name(), "after", retireBackstop)
				break wait
			case <-tick.C:
				if counter.SchedulingCycle() > c0 {
					break wait
				}
			}
		}
		if !ok {
			// Without a cycle count, give the cycle in flight the backstop's time.
			select {
			case <-ctx.Done():
			case <-backstop.C:
			}
		}
		m.closePlugin(p)
	}()
}

// closePlugin closes p, waiting (bounded) for its calls in flight.
func (m *Manager) closePlugin(p *wasm.Plugin) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		m.log.Warn("closing scheduling plugin", "plugin", p.Name(), "err", err)
	}
}

// unloadScheduling takes every WASM plugin out of the scheduler and closes it.
func (m *Manager) unloadScheduling() {
	if m.cfg.Scheduler == nil {
		return
	}
	m.mu.Lock()
	entries := m.sched.entries
	m.sched.entries = nil
	m.mu.Unlock()
	for _, e := range entries {
		m.cfg.Scheduler.RemoveExtension(e.name, e.profiles...)
		m.closePlugin(e.plugin)
	}
}
