package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wasmplane/wasmplane/core/scheduler"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// TestWasmStandaloneScheduler runs `wasmplane scheduler`'s code path (RunStandalone with
// the WASM plugin manager as its extension, its own client and runtime) against an API
// server without a scheduler: a cluster plugin's filter decides where pods go.
func TestWasmStandaloneScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	mods := wasmtest.GoAll(t, nodeLabelFilterPkg)
	s := testserver.StartAPI(t)
	dyn, err := dynamic.NewForConfig(s.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := toolkit.NewClientForConfig(s.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	e := &wasmEnv{env: &env{client: s.Clientset(t, false)}, srv: s, dyn: dyn, tk: tk}

	cacheDir := t.TempDir() // before the cleanup below, so it is removed after the scheduler stopped
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	no := false
	cfg := scheduler.DefaultConfiguration()
	cfg.LeaderElection.LeaderElect = &no
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := scheduler.RunStandalone(ctx, s.Config(false), scheduler.StandaloneOptions{Configuration: cfg, Logger: testserver.Logger(),
			Extend: func(ctx context.Context, sched *scheduler.Scheduler, rc *rest.Config, reg prometheus.Registerer) {
				run, err := server.SchedulerPlugins(ctx, server.SchedulerPluginsConfig{RESTConfig: rc, Scheduler: sched,
					CacheDir: cacheDir, Registerer: reg, ServerName: "standalone-scheduler", Logger: testserver.Logger()})
				if err != nil {
					t.Errorf("scheduler plugins: %v", err)
					return
				}
				run()
			}})
		if err != nil && ctx.Err() == nil {
			t.Errorf("standalone scheduler: %v", err)
		}
	}()

	const ns = "standalone"
	e.createNamespace(t, ns)
	for i := 0; i < 3; i++ {
		n := nodeSpec{name: nodeName(i), cpu: "4", mem: "8Gi", labels: map[string]string{}}
		if i == 2 {
			n.labels["wasm-ok"] = "yes"
		}
		e.createNode(t, n)
	}
	e.apply(t, "", "only-labelled", pluginSpec(e.push(t, mods[nodeLabelFilterPkg]), filterHooks, `{"label":"wasm-ok"}`, 0))
	for _, name := range []string{"a", "b", "c"} {
		e.createPod(t, basePod(ns, name))
		if got := e.waitBound(t, ns, name, 30*time.Second); got.Spec.NodeName != nodeName(2) {
			t.Fatalf("pod %s on %s; the cluster plugin admits only %s", name, got.Spec.NodeName, nodeName(2))
		}
	}
}
