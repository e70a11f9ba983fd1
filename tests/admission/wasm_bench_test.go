package admission_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// BenchmarkPodCreateWasmValidate measures pod create latency through an API-only server
// with 0, 1 and 5 validating WASM plugins matching the pods: the require-labels example
// built from Rust (the fastest validate call of the example languages) and from standard
// Go, each plugin configured to require the label the pods carry, so every create runs
// every plugin and is admitted. Reports p50/p99 in microseconds; the goal is at most
// 100 µs per plugin at p50.
func BenchmarkPodCreateWasmValidate(b *testing.B) {
	s := testserver.StartAPI(b)
	e := envFor(b, s.Instance)
	cs := s.Clientset(b, false)
	ctx := context.Background()
	modules := []struct {
		lang string
		wasm []byte
	}{
		{"rust", wasmtest.Rust(b, "require-labels")},
		{"go", wasmtest.Go(b, "examples/plugins/go/require-labels")},
	}
	type setup struct {
		name string
		ns   string
	}
	// Plugins are set up once, outside b.Run, which calls its function several times.
	setups := []setup{{name: "plugins=0", ns: benchNamespace(b, cs, "bench-none")}}
	for _, m := range modules {
		digest := e.push(b, m.wasm)
		for _, n := range []int{1, 5} {
			ns := benchNamespace(b, cs, fmt.Sprintf("bench-%s-%d", m.lang, n))
			for i := range n {
				e.apply(b, ns, fmt.Sprintf("require-team-%d", i), digest, []wasmv1.Hook{wasmv1.HookValidate}, `{"labels":["team"]}`, wasmv1.Fail)
			}
			setups = append(setups, setup{name: fmt.Sprintf("%s/plugins=%d", m.lang, n), ns: ns})
		}
	}
	for _, st := range setups {
		created := 0
		create := func(b *testing.B) time.Duration {
			p := simplePod(fmt.Sprintf("p-%d", created))
			p.Labels = map[string]string{"team": "bench"}
			created++
			start := time.Now()
			if _, err := cs.CoreV1().Pods(st.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			return time.Since(start)
		}
		b.Run(st.name, func(b *testing.B) {
			// Warm the plugins' instance pools and the client's connection.
			for range 20 {
				create(b)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				lat = append(lat, create(b))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// benchNamespace creates a namespace named name.
func benchNamespace(b *testing.B, cs kubernetes.Interface, name string) string {
	b.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating namespace: %v", err)
	}
	return name
}
