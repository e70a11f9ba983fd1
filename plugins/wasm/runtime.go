// Package wasm is wasmplane's WebAssembly plugin host: it compiles content-addressed
// modules with wazero (with an on-disk compilation cache), runs them from bounded pools
// of pre-warmed instances under always-on limits, swaps modules at run time, and speaks
// the plugin ABI v1 of sdk/ABI.md through typed helpers for every hook.
package wasm

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// RuntimeConfig configures a Runtime.
type RuntimeConfig struct {
	// CacheDir keeps compiled machine code across restarts; empty means in memory only.
	CacheDir string
	// Logger receives plugin logs and host events; nil = discarded.
	Logger *slog.Logger
	// Registerer receives the plugin metrics; nil means no metrics are registered.
	Registerer prometheus.Registerer
	// MaxMemoryBytes caps any plugin's memory limit; 0 means 4 GiB (the wasm32 maximum).
	MaxMemoryBytes uint64

	// CallBounds bound how much guest code runs at once and suspend plugins that keep
	// faulting; zero fields take the defaults.
	CallBounds

	// termination is how deadlines stop guests; only benchmarks change the default.
	termination termination
}

// CallBounds are the runtime's protections of the host against its guests, chosen by the
// operator (flags of `wasmplane up`).
type CallBounds struct {
	// MaxConcurrentCalls bounds the hook calls running guest code at once, across every
	// plugin of the runtime; calls beyond it wait for a slot until their deadline. 0 means
	// GOMAXPROCS (see docs/wasm-performance.md, "Bounding guest concurrency").
	MaxConcurrentCalls int
	// MaxConcurrentCallsPerPlugin bounds one plugin's calls running at once, so that one
	// plugin cannot take every slot; 0 means MaxConcurrentCalls - 1 (at least 1).
	MaxConcurrentCallsPerPlugin int
	// SuspendAfter is how many calls of a module in a row may run out of time or memory
	// before its calls are suspended (see breaker); 0 means DefaultSuspendAfter, negative
	// never suspends.
	SuspendAfter int
	// SuspendFor is the first suspension (0: DefaultSuspendFor); each failed probe doubles
	// it up to MaxSuspension (0: DefaultMaxSuspension).
	SuspendFor    time.Duration
	MaxSuspension time.Duration
}

// Runtime compiles modules and loads plugins. It is safe for concurrent use.
type Runtime struct {
	cfg     RuntimeConfig
	log     *slog.Logger
	rt      wazero.Runtime
	cache   wazero.CompilationCache
	metrics *metrics

	mu      sync.Mutex
	modules map[string]*moduleEntry

	instances sync.Map // instance name -> *instance, for host functions
	seq       atomic.Uint64
	// calls holds one token per hook call running guest code (MaxConcurrentCalls).
	calls chan struct{}
}

// NewRuntime starts a wazero runtime with the WASI sandbox and the wasmplane host module.
func NewRuntime(ctx context.Context, cfg RuntimeConfig) (*Runtime, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxMemoryBytes == 0 || cfg.MaxMemoryBytes > 1<<32 {
		cfg.MaxMemoryBytes = 1 << 32
	}
	if cfg.MaxConcurrentCalls <= 0 {
		cfg.MaxConcurrentCalls = runtime.GOMAXPROCS(0)
	}
	if cfg.MaxConcurrentCallsPerPlugin <= 0 {
		cfg.MaxConcurrentCallsPerPlugin = max(1, cfg.MaxConcurrentCalls-1)
	}
	cfg.MaxConcurrentCallsPerPlugin = min(cfg.MaxConcurrentCallsPerPlugin, cfg.MaxConcurrentCalls)
	if cfg.SuspendAfter == 0 {
		cfg.SuspendAfter = DefaultSuspendAfter
	}
	if cfg.SuspendFor <= 0 {
		cfg.SuspendFor = DefaultSuspendFor
	}
	if cfg.MaxSuspension <= 0 {
		cfg.MaxSuspension = DefaultMaxSuspension
	}
	var cache wazero.CompilationCache
	var err error
	if cfg.CacheDir != "" {
		cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasm: compilation cache %s: %w", cfg.CacheDir, err)
		}
	} else {
		cache = wazero.NewCompilationCache()
	}
	rc := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(cache).
		WithCloseOnContextDone(cfg.termination == termWazero).
		WithMemoryLimitPages(uint32(cfg.MaxMemoryBytes / 65536))
	r := &Runtime{
		cfg:     cfg,
		log:     cfg.Logger,
		rt:      wazero.NewRuntimeWithConfig(ctx, rc),
		cache:   cache,
		modules: map[string]*moduleEntry{},
		calls:   make(chan struct{}, cfg.MaxConcurrentCalls),
	}
	r.metrics, err = newMetrics(cfg.Registerer)
	if err != nil {
		_ = r.rt.Close(ctx)
		return nil, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r.rt); err != nil {
		_ = r.rt.Close(ctx)
		return nil, fmt.Errorf("wasm: instantiate WASI: %w", err)
	}
	_, err = r.rt.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(r.hostLog), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).
		WithParameterNames("level", "ptr", "len").
		Export(abi.HostLog).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(r.hostCheckpoint), nil, nil).
		Export(checkpointImport).
		Instantiate(ctx)
	if err != nil {
		_ = r.rt.Close(ctx)
		return nil, fmt.Errorf("wasm: instantiate host module: %w", err)
	}
	if err := r.instantiateOPAHost(ctx); err != nil {
		_ = r.rt.Close(ctx)
		return nil, err
	}
	return r, nil
}

// Close stops every instance and frees the compiled code; plugins of this runtime stop
// working. The on-disk cache is kept.
func (r *Runtime) Close(ctx context.Context) error {
	err := r.rt.Close(ctx)
	if cerr := r.cache.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wasm: close runtime: %w", err)
	}
	return nil
}

// hostLog implements wasmplane.log (ABI §5).
func (r *Runtime) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	v, ok := r.instances.Load(mod.Name())
	if !ok {
		return
	}
	in := v.(*instance)
	level, ptr, n := api.DecodeI32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	if n > maxLogMessage {
		n = maxLogMessage
	}
	msg, ok := mod.Memory().Read(ptr, n)
	if !ok {
		return
	}
	var l slog.Level
	switch level {
	case abi.LevelDebug:
		l = slog.LevelDebug
	case abi.LevelWarn:
		l = slog.LevelWarn
	case abi.LevelError:
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	in.logMessage(ctx, l, string(msg))
}
