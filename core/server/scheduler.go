package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wasmplane/wasmplane/core/scheduler"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/manager"
	"github.com/wasmplane/wasmplane/plugins/wasm/schedplugin"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// startScheduler runs the scheduler against the API server through client-go, as a
// separate kube-scheduler would (single process: no leader election), with its metrics on
// reg (nil = not exported) and a scheduling-only WASM plugin manager on the scheduler's
// own runtime (compiled code cached in cacheDir; "" = in memory), so WasmPlugin and
// ClusterWasmPlugin objects with filter/score hooks join the scheduler's profiles and are
// hot-swapped in place. The returned func stops it and waits for it.
func startScheduler(ctx context.Context, cfg *rest.Config, log *slog.Logger, reg prometheus.Registerer, cacheDir string, bounds wasm.CallBounds) (stop func(), err error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "wasmplane-scheduler"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("scheduler client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	s, err := scheduler.New(client, factory, scheduler.Config{Registerer: reg, Logger: log.With("component", "scheduler")})
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	host, _ := os.Hostname()
	run, err := SchedulerPlugins(ctx, SchedulerPluginsConfig{RESTConfig: cfg, Scheduler: s, CacheDir: cacheDir,
		Registerer: reg, CallBounds: bounds, ServerName: "scheduler-" + host, Logger: log})
	if err != nil {
		cancel()
		return nil, err
	}
	wg.Go(run)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("scheduler stopped", "err", err)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	}, nil
}

// SchedulerPluginsConfig configures SchedulerPlugins.
type SchedulerPluginsConfig struct {
	// RESTConfig is the scheduler's client configuration.
	RESTConfig *rest.Config
	// Scheduler receives the plugins.
	Scheduler *scheduler.Scheduler
	// CacheDir keeps compiled modules across restarts ("" = in memory).
	CacheDir string
	// Registerer receives the WASM runtime's metrics (nil = none).
	Registerer prometheus.Registerer
	// ServerName identifies this scheduler in plugin status.
	ServerName string
	// CallBounds bound the guest code of the scheduler's plugins (zero: the defaults of
	// schedplugin.CallBounds).
	CallBounds wasm.CallBounds
	// Logger (nil = discarded).
	Logger *slog.Logger
}

// schedulerTarget is the scheduler as the plugin manager's target, with the cycle count
// that tells when a replaced plugin can no longer be in use.
type schedulerTarget struct{ *scheduler.Scheduler }

// SchedulingCycle implements manager.CycleCounter.
func (t schedulerTarget) SchedulingCycle() int64 { return t.Queue().SchedulingCycle() }

// SchedulerPlugins prepares the scheduler's own WASM runtime and a scheduling-only plugin
// manager watching plugin objects with the scheduler's client. The returned run blocks
// until ctx ends, then unloads the plugins and closes the runtime.
func SchedulerPlugins(ctx context.Context, c SchedulerPluginsConfig) (run func(), err error) {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := rest.CopyConfig(c.RESTConfig)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("scheduler plugin manager client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("scheduler plugin manager dynamic client: %w", err)
	}
	if c.CacheDir != "" {
		if err := os.MkdirAll(c.CacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("scheduler WASM cache: %w", err)
		}
	}
	rt, err := wasm.NewRuntime(ctx, wasm.RuntimeConfig{CacheDir: c.CacheDir, Logger: log.With("component", "scheduler-wasm"), Registerer: registererWith(c.Registerer, "scheduler"),
		CallBounds: schedplugin.CallBounds(c.CallBounds)})
	if err != nil {
		return nil, fmt.Errorf("starting the scheduler's WASM runtime: %w", err)
	}
	m := manager.New(manager.Config{Runtime: rt, Client: client, Dynamic: dyn, ServerName: c.ServerName,
		Logger: log.With("component", "scheduler"), Scheduler: schedulerTarget{c.Scheduler}})
	return func() {
		if err := m.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("scheduler WASM plugin manager stopped", "err", err)
		}
		if err := rt.Close(context.WithoutCancel(ctx)); err != nil {
			log.Warn("closing the scheduler's WASM runtime", "err", err)
		}
	}, nil
}

// registererWith labels the WASM runtime's metrics with the component that owns the
// runtime, so the API server's and the scheduler's can share one registry; nil stays nil.
func registererWith(reg prometheus.Registerer, component string) prometheus.Registerer {
	if reg == nil {
		return nil
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{"component": component}, reg)
}
