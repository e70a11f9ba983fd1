package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// Limits bound what one plugin may use; zero fields take the defaults of sdk/ABI.md §6.
type Limits struct {
	// MemoryBytes is the linear memory limit of each instance (default 128 MiB).
	MemoryBytes uint64
	// Timeout is the deadline of one hook call (default 1 s).
	Timeout time.Duration
	// InitTimeout is the deadline to instantiate, start and configure an instance (10 s).
	InitTimeout time.Duration
	// MaxInputBytes bounds a request (default 16 MiB).
	MaxInputBytes int
	// MaxOutputBytes bounds an answer (default 4 MiB).
	MaxOutputBytes int
	// Instances are created at load, ahead of need: the caller's parallelism
	// (default GOMAXPROCS).
	Instances int
	// MaxInstances bounds the pool; calls beyond it wait (default max(Instances, 64)).
	MaxInstances int
}

// Defaults of Limits.
const (
	DefaultMemoryBytes    = 128 << 20
	DefaultTimeout        = time.Second
	DefaultInitTimeout    = 10 * time.Second
	DefaultMaxInputBytes  = 16 << 20
	DefaultMaxOutputBytes = 4 << 20
	DefaultMaxInstances   = 64
)

func (l Limits) withDefaults(maxMemory uint64) Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	l.MemoryBytes = min(l.MemoryBytes, maxMemory)
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.InitTimeout <= 0 {
		l.InitTimeout = DefaultInitTimeout
	}
	if l.MaxInputBytes <= 0 {
		l.MaxInputBytes = DefaultMaxInputBytes
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if l.Instances <= 0 {
		l.Instances = runtime.GOMAXPROCS(0)
	}
	if l.MaxInstances <= 0 {
		l.MaxInstances = max(l.Instances, DefaultMaxInstances)
	}
	l.Instances = min(l.Instances, l.MaxInstances)
	return l
}

// PluginConfig describes a plugin to load.
type PluginConfig struct {
	// Name and Namespace name the plugin object (Namespace is empty when cluster-scoped).
	Name      string
	Namespace string
	// Config is passed to the configure hook verbatim; nil means {}.
	Config json.RawMessage
	// Limits bound the plugin's instances and calls.
	Limits Limits
}

// Plugin is a loaded plugin: a module, its configuration and a pool of instances. Its
// methods are safe for concurrent use. Swap replaces the module without failing calls.
type Plugin struct {
	r      *Runtime
	cfg    PluginConfig
	label  string
	config json.RawMessage
	limits Limits
	cur    atomic.Pointer[instanceSet]
	swapMu sync.Mutex
	hm     [numHooks]*hookMetrics
	// running holds one token per call of this plugin running guest code
	// (RuntimeConfig.MaxConcurrentCallsPerPlugin).
	running chan struct{}
	// logs bounds the plugin's lines in the server's log across all its instances.
	logs *LogBudget
}

// LogBudget is the plugin's budget of lines in the server's log; adapters that log about
// the plugin's failures spend it too.
func (p *Plugin) LogBudget() *LogBudget { return p.logs }

// Load instantiates a plugin from a compiled module: it pre-warms Limits.Instances
// instances, each checked for the ABI version and configured. The plugin takes its own
// reference to m; the caller may Close m afterwards.
func (r *Runtime) Load(ctx context.Context, m *Module, cfg PluginConfig) (*Plugin, error) {
	p := &Plugin{r: r, cfg: cfg, label: cfg.Name, limits: cfg.Limits.withDefaults(r.cfg.MaxMemoryBytes),
		running: make(chan struct{}, r.cfg.MaxConcurrentCallsPerPlugin), logs: NewLogBudget(0, 0)}
	if cfg.Namespace != "" {
		p.label = cfg.Namespace + "/" + cfg.Name
	}
	p.config = cfg.Config
	if len(p.config) == 0 {
		p.config = json.RawMessage("{}")
	}
	p.hm = r.metrics.forPlugin(p.label)
	s, err := newInstanceSet(ctx, p, m.e.acquire())
	if err != nil {
		_ = m.e.release(ctx)
		return nil, fmt.Errorf("wasm: load plugin %s (%s): %w", p.label, m.Digest(), err)
	}
	p.cur.Store(s)
	r.log.Info("wasm plugin loaded", "plugin", p.label, "digest", m.Digest(), "hooks", m.Hooks(), "instances", p.limits.Instances)
	return p, nil
}

// Swap replaces the plugin's module (hot reload). The new module is instantiated and
// configured first; if that fails the plugin keeps the old one and Swap returns the
// error. Calls in flight finish on the old instances, which are closed when the last of
// them returns; calls that start after Swap returns use the new module.
func (p *Plugin) Swap(ctx context.Context, m *Module) error {
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	if p.cur.Load() == nil {
		return &Error{Plugin: p.label, Kind: ErrClosed}
	}
	s, err := newInstanceSet(ctx, p, m.e.acquire())
	if err != nil {
		_ = m.e.release(ctx)
		return fmt.Errorf("wasm: swap plugin %s to %s: %w", p.label, m.Digest(), err)
	}
	old := p.cur.Swap(s)
	from := old.mod.Digest()
	old.release(context.WithoutCancel(ctx))
	p.r.log.Info("wasm plugin swapped", "plugin", p.label, "from", from, "to", m.Digest())
	return nil
}

// Close stops the plugin: new calls fail with ErrClosed, calls in flight finish, and
// Close waits for them (bounded by ctx) before returning.
func (p *Plugin) Close(ctx context.Context) error {
	p.swapMu.Lock()
	old := p.cur.Swap(nil)
	p.swapMu.Unlock()
	if old == nil {
		return nil
	}
	old.release(context.WithoutCancel(ctx))
	select {
	case <-old.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wasm: close plugin %s: %w", p.label, ctx.Err())
	}
}

// Name returns the plugin's label: namespace/name, or name when cluster-scoped.
func (p *Plugin) Name() string { return p.label }

// Digest returns the digest of the module the plugin runs now.
func (p *Plugin) Digest() string {
	s := p.acquire()
	if s == nil {
		return ""
	}
	defer s.release(context.Background())
	return s.mod.Digest()
}

// Implements tells whether the plugin's current module exports hook.
func (p *Plugin) Implements(hook string) bool {
	s := p.acquire()
	if s == nil {
		return false
	}
	defer s.release(context.Background())
	return s.mod.Implements(hook)
}

// Limits returns the plugin's effective limits.
func (p *Plugin) Limits() Limits { return p.limits }

// WantsRequested tells whether the current module's configure asked for "requested"
// (ABI §7.5), so that a scheduler computes it only for plugins that read it.
func (p *Plugin) WantsRequested() bool { return p.flags().Requested }

// WantsFullPods tells whether the current module's configure asked for whole Pods in
// filter/score requests ("fullPods", ABI §7.5) rather than compact pod documents.
func (p *Plugin) WantsFullPods() bool { return p.flags().FullPods }

// ObjectForm is the form in which the current module's configure asked for the objects of
// validate requests ("compactPods", "objectMetadata", ABI §7.1).
func (p *Plugin) ObjectForm() ObjectForm { return objectForm(p.flags()) }

// flags is what the current module's configure asked for (zero when none is loaded).
func (p *Plugin) flags() abi.ConfigureResponse {
	s := p.acquire()
	if s == nil {
		return abi.ConfigureResponse{}
	}
	defer s.release(context.Background())
	return s.flags
}

func (p *Plugin) acquire() *instanceSet {
	for {
		s := p.cur.Load()
		if s == nil {
			return nil
		}
		if s.tryAcquire() {
			return s
		}
		// s was swapped out and drained between Load and tryAcquire; the new set is
		// already in p.cur.
	}
}

// Call runs hook with a raw request and returns a copy of the raw answer. It applies
// the ABI envelope: an answer carrying "error" fails with ErrGuest.
func (p *Plugin) Call(ctx context.Context, hook string, req []byte) ([]byte, error) {
	var out []byte
	err := p.invoke(ctx, hook, func(*instance) ([]byte, error) { return req, nil }, func(b []byte) error {
		if err := checkEnvelope(b); err != nil {
			return err
		}
		out = append([]byte(nil), b...)
		return nil
	}, nil)
	return out, err
}

// invoke runs one call on an instance of the current set. build makes the request for
// that instance; decode reads the answer in place; commit, if set, runs after success.
func (p *Plugin) invoke(ctx context.Context, hook string, build func(*instance) ([]byte, error), decode func([]byte) error, commit func(*instance)) (err error) {
	var hm *hookMetrics
	if id, ok := hookOf(hook); ok {
		hm = p.hm[id]
	}
	start := time.Now()
	defer func() {
		if hm != nil {
			hm.observe(p, start, err)
		}
	}()
	s := p.acquire()
	if s == nil {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrClosed}
	}
	defer s.release(ctx)
	if !s.hooks.has(hook) {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrNotImplemented}
	}
	probe, err := s.brk.allow(start)
	if err != nil {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrSuspended, Err: err}
	}
	ran := false
	if probe {
		// A probe that ends before running guest code leaves the next call to probe.
		defer func() {
			if !ran {
				s.brk.abandon()
			}
		}()
	}
	deadline := start.Add(p.limits.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if p.r.cfg.termination == termWazero {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	// The plugin's slot first, then an instance, then the runtime's slot: a call never
	// holds a slot of the runtime while it waits for something of its own plugin.
	if err := enter(ctx, p.running, deadline); err != nil {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrTimeout, Err: fmt.Errorf("waiting for one of the plugin's %d call slots: %w", cap(p.running), err)}
	}
	defer func() { <-p.running }()
	in, err := s.get(ctx, deadline)
	if err != nil {
		return err
	}
	if err := enter(ctx, p.r.calls, deadline); err != nil {
		s.put(ctx, in, false)
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrTimeout, Err: fmt.Errorf("waiting for one of the host's %d call slots: %w", cap(p.r.calls), err)}
	}
	defer func() { <-p.r.calls }()
	in.shaped = false
	req, err := build(in)
	if err != nil {
		s.put(ctx, in, false)
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrBadInput, Err: err}
	}
	err = in.call(ctx, deadline, hook, req, decode)
	ran = true
	s.brk.record(time.Now(), probe, err)
	if err == nil && commit != nil {
		commit(in)
	}
	discard := err != nil && (KindOf(err).discards() || (commit != nil && KindOf(err) != ErrInputTooLarge && KindOf(err) != ErrNotImplemented))
	s.put(ctx, in, discard)
	return err
}

// enter takes a token of sem, waiting for one until deadline or until ctx is done. Only
// a call that has to wait pays for a timer.
func enter(ctx context.Context, sem chan struct{}, deadline time.Time) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case sem <- struct{}{}:
		return nil
	case <-t.C:
		return context.DeadlineExceeded
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
