package wasm

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// TestHotReload: 8 goroutines call validate while the module is swapped 100 times; no
// call fails and every answer comes from one of the two modules.
func TestHotReload(t *testing.T) {
	r, reg := newTestRuntime(t)
	ctx := context.Background()
	src, err := readWAT(t, "good")
	if err != nil {
		t.Fatal(err)
	}
	v1 := wasmtest.WATSource(t, src)
	// Same module, other answer: the data segment says v2 instead of v1.
	v2 := wasmtest.WATSource(t, strings.Replace(src, `\"v1\"`, `\"v2\"`, 1))
	mods := make([]*Module, 2)
	for i, w := range [][]byte{v1, v2} {
		m, err := r.Compile(ctx, w, Digest(w))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(ctx)
		mods[i] = m
	}
	p, err := r.Load(ctx, mods[0], PluginConfig{Name: "reload", Limits: Limits{Instances: 2, MaxInstances: 8}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)

	var stop atomic.Bool
	var calls, failures atomic.Int64
	seen := [2]atomic.Int64{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				resp, err := p.Validate(ctx, admission)
				calls.Add(1)
				switch {
				case err != nil:
					failures.Add(1)
					t.Errorf("call failed during swaps: %v", err)
				case resp.Message == "v1":
					seen[0].Add(1)
				case resp.Message == "v2":
					seen[1].Add(1)
				default:
					failures.Add(1)
					t.Errorf("answer from neither module: %+v", resp)
				}
			}
		}()
	}
	for i := range 100 {
		if err := p.Swap(ctx, mods[(i+1)%2]); err != nil {
			t.Fatalf("swap %d: %v", i, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d calls during 100 swaps: %d from v1, %d from v2, %d failed", calls.Load(), seen[0].Load(), seen[1].Load(), failures.Load())
	if failures.Load() != 0 {
		t.Fatalf("%d calls failed", failures.Load())
	}
	if p.Digest() != mods[0].Digest() {
		t.Errorf("after an even number of swaps the plugin runs %s, want %s", p.Digest(), mods[0].Digest())
	}
	// Every replaced set is closed once idle: only the current set's instances live. An
	// instance a caller asked for while its set was current may still be starting in the
	// background (pool.go grow); its set closes it as soon as it lands, so wait for that.
	deadline := time.Now().Add(10 * time.Second)
	live := gaugeValue(t, reg, "wasmplane_wasm_instances")
	for (live < 1 || live > 8) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		live = gaugeValue(t, reg, "wasmplane_wasm_instances")
	}
	if live < 1 || live > 8 {
		t.Errorf("%v instances alive 10 s after the swaps, want those of the current set only (1..8)", live)
	}
}

func readWAT(t *testing.T, name string) (string, error) {
	t.Helper()
	b, err := osReadFile(wasmtest.ModuleRoot(t) + "/examples/plugins/wat/" + name + ".wat")
	return string(b), err
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			sum := 0.0
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
