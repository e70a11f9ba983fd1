package wasi

import (
	"fmt"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkCRILatency measures the CRI calls a pod start makes, over a real unix-socket
// gRPC connection, and reports their p50 and p99 in milliseconds. Each iteration runs one
// pod: RunPodSandbox, CreateContainer (the module is already compiled: the kubelet's first
// pod of an image pays the compile once) and StartContainer of a sleeping guest. Pods are
// removed outside the timed calls.
func BenchmarkCRILatency(b *testing.B) {
	e := newEnv(b)
	e.importWorkload(b, "sleeper", "sleeper")
	// Warm the compiled-module cache, as any earlier pod of the image would.
	warm := e.runSandbox(b, "warm", nil)
	e.createContainer(b, warm, "warm", ctrOpts{image: "sleeper"})

	var run, create, start []time.Duration
	var sandboxes []string
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		sb := e.runSandbox(b, fmt.Sprintf("pod-%d", i), map[string]string{"app": "bench"})
		t1 := time.Now()
		id := e.createContainer(b, sb, "c", ctrOpts{image: "sleeper"})
		t2 := time.Now()
		e.start(b, id)
		t3 := time.Now()
		run, create, start = append(run, t1.Sub(t0)), append(create, t2.Sub(t1)), append(start, t3.Sub(t2))
		sandboxes = append(sandboxes, sb)
		if len(sandboxes) == 100 { // keep the node at a realistic size
			b.StopTimer()
			for _, sb := range sandboxes {
				if _, err := e.rt.RemovePodSandbox(ctxT(b), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
					b.Fatal(err)
				}
			}
			sandboxes = sandboxes[:0]
			b.StartTimer()
		}
	}
	b.StopTimer()
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"RunPodSandbox", run}, {"CreateContainer", create}, {"StartContainer", start}} {
		b.ReportMetric(percentile(m.d, 0.50), m.name+"-p50-ms")
		b.ReportMetric(percentile(m.d, 0.99), m.name+"-p99-ms")
	}
}

func percentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return float64(s[i].Microseconds()) / 1000
}
