package admission_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// BenchmarkCallBoundsCost measures what the guest-concurrency bounds cost admission
// throughput: two API servers in this process, one with the default bounds (GOMAXPROCS
// calls at once, one fewer per plugin) and one with them lifted, each with a Rust and a
// standard-Go require-labels validator on the pods of one namespace; 32 clients create
// pods on one server, then on the other, round after round (b.N creates per side and
// round), so that both see the same machine. Reports each side's creates/s summed over
// the rounds and bounded/unbounded in percent; the goal is a loss of at most 5 %.
func BenchmarkCallBoundsCost(b *testing.B) {
	const clients, rounds = 32, 3
	type side struct {
		name string
		cs   kubernetes.Interface
		ns   string
		took time.Duration
	}
	var sides []*side
	for _, sd := range []struct {
		name   string
		bounds wasm.CallBounds
	}{
		{"bounded", wasm.CallBounds{}},
		{"unbounded", wasm.CallBounds{MaxConcurrentCalls: 1 << 16, MaxConcurrentCallsPerPlugin: 1 << 16}},
	} {
		s := testserver.StartAPI(b, func(c *server.Config) { c.WasmCallBounds = sd.bounds })
		e := envFor(b, s.Instance)
		cs := s.Clientset(b, false)
		ns := benchNamespace(b, cs, "bounds")
		for _, m := range []struct{ name, digest string }{
			{"rust", e.push(b, wasmtest.Rust(b, "require-labels"))},
			{"go", e.push(b, wasmtest.Go(b, "examples/plugins/go/require-labels"))},
		} {
			e.apply(b, ns, "require-team-"+m.name, m.digest, []wasmv1.Hook{wasmv1.HookValidate}, `{"labels":["team"]}`, wasmv1.Fail)
		}
		sides = append(sides, &side{name: sd.name, cs: cs, ns: ns})
	}
	var seq atomic.Int64
	burst := func(sd *side, n int) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		start := time.Now()
		for range clients {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					p := simplePod(fmt.Sprintf("p-%d", seq.Add(1)))
					p.Labels = map[string]string{"team": "bench"}
					if _, err := sd.cs.CoreV1().Pods(sd.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		close(errs)
		if err := <-errs; err != nil {
			b.Fatalf("%s: create: %v", sd.name, err)
		}
		return took
	}
	// Warm both: instance pools, clients' connections, caches.
	for _, sd := range sides {
		burst(sd, 200)
	}
	b.ResetTimer()
	var ratios []float64
	for r := range rounds {
		var per []time.Duration
		// Alternate which side goes first, so neither always follows the other's writes.
		order := []*side{sides[0], sides[1]}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, sd := range order {
			d := burst(sd, b.N)
			sd.took += d
			per = append(per, d)
		}
		if r%2 == 1 {
			per[0], per[1] = per[1], per[0]
		}
		ratios = append(ratios, per[1].Seconds()/per[0].Seconds()) // bounded/unbounded throughput
	}
	b.StopTimer()
	for _, sd := range sides {
		b.ReportMetric(float64(rounds*b.N)/sd.took.Seconds(), sd.name+"-creates/s")
	}
	slices.Sort(ratios)
	b.ReportMetric(100*ratios[len(ratios)/2], "bounded/unbounded-%")
}
