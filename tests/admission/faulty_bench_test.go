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
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkUnrelatedRequestsBesideFaultyPlugins measures the latency of requests that no
// plugin sees — a GET of a ConfigMap and a pod create in a namespace without plugins —
// while faulty validating plugins (one looping until its 1 s deadline, one growing its
// memory to the limit, one trapping) are called 200 times a second in other namespaces,
// beside the same requests with nothing else running (before and after, to show the
// drift). Reports p50/p99 in µs; the goal is a faulty p99 within 1.5× the quiet one.
func BenchmarkUnrelatedRequestsBesideFaultyPlugins(b *testing.B) {
	s := testserver.StartAPI(b)
	e := envFor(b, s.Instance)
	cs := s.Clientset(b, false)
	ctx := context.Background()
	var faultyNS []string
	for _, name := range []string{"loop", "membomb", "trap"} {
		ns := benchNamespace(b, cs, "faulty-"+name)
		e.apply(b, ns, name, e.push(b, wasmtest.WAT(b, name)), []wasmv1.Hook{wasmv1.HookValidate}, `{}`, wasmv1.Fail)
		faultyNS = append(faultyNS, ns)
	}
	clean := benchNamespace(b, cs, "clean")
	if _, err := cs.CoreV1().ConfigMaps(clean).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "read-me"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	measure := func(b *testing.B) {
		var gets, creates []time.Duration
		for range b.N {
			start := time.Now()
			if _, err := cs.CoreV1().ConfigMaps(clean).Get(ctx, "read-me", metav1.GetOptions{}); err != nil {
				b.Fatal(err)
			}
			gets = append(gets, time.Since(start))
			start = time.Now()
			if _, err := cs.CoreV1().Pods(clean).Create(ctx, simplePod(fmt.Sprintf("p-%d", seq.Add(1))), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			creates = append(creates, time.Since(start))
		}
		for name, d := range map[string][]time.Duration{"get": gets, "create": creates} {
			slices.Sort(d)
			b.ReportMetric(float64(d[len(d)/2].Microseconds()), name+"-p50-µs")
			b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), name+"-p99-µs")
		}
	}
	b.Run("quiet", measure)
	b.Run("faulty=200/s", func(b *testing.B) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var failed, calls atomic.Int64
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(5 * time.Millisecond) // 200 a second
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					calls.Add(1)
					p := simplePod(fmt.Sprintf("f-%d", seq.Add(1)))
					if _, err := cs.CoreV1().Pods(faultyNS[i%len(faultyNS)]).Create(cctx, p, metav1.CreateOptions{}); err != nil {
						failed.Add(1)
					}
				}()
			}
		}()
		time.Sleep(2 * time.Second) // until the looping calls fill their slots and time out
		b.ResetTimer()
		measure(b)
		b.StopTimer()
		close(stop)
		wg.Wait()
		b.ReportMetric(float64(calls.Load()), "faulty-calls")
		if failed.Load() != calls.Load() {
			b.Errorf("%d of %d creates into faulty plugins succeeded", calls.Load()-failed.Load(), calls.Load())
		}
	})
	b.Run("quiet-again", measure)
}
