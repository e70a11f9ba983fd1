package examples_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/wasmplane/wasmplane/plugins/wasm"
)

// nativeLabelScore is label-score's logic as a native Go scheduler plugin would run it,
// on Node objects already in memory.
func nativeLabelScore(nodes []*corev1.Node, label string, scores []int64) []int64 {
	scores = scores[:0]
	for _, n := range nodes {
		v := n.Labels[label]
		var s int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				s = 0
				break
			}
			s = s*10 + int64(c-'0')
			if s > 100 {
				s = 100
				break
			}
		}
		scores = append(scores, s)
	}
	return scores
}

// cpuLoop runs op as the benchmark loop and reports the process CPU time per op
// (cpu-ns/op) beside the wall time, which on a shared machine measures its load too.
func cpuLoop(b *testing.B, op func()) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0 := cpu()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpu()-c0)/float64(b.N), "cpu-ns/op")
}

func benchNodes(n int) []*corev1.Node {
	nodes := make([]*corev1.Node, n)
	for i := range nodes {
		nodes[i] = node(i, map[string]string{
			"example.com/priority":        strconv.Itoa(i % 120),
			"kubernetes.io/hostname":      "node-" + strconv.Itoa(i),
			"kubernetes.io/os":            "linux",
			"kubernetes.io/arch":          "amd64",
			"topology.kubernetes.io/zone": "zone-" + strconv.Itoa(i%3),
		})
	}
	return nodes
}

// BenchmarkScore5000 scores 5,000 nodes for one pod: the Go-SDK WASM plugin through the
// host (steady state: node documents cached and already in the instance's node table)
// against the same logic as a native function.
func BenchmarkScore5000(b *testing.B) {
	nodes := benchNodes(5000)
	b.Run("native", func(b *testing.B) {
		scores := make([]int64, 0, len(nodes))
		cpuLoop(b, func() { scores = nativeLabelScore(nodes, "example.com/priority", scores) })
	})
	r := runtime(b)
	// The first call decodes 5,000 node documents in the guest; give it time.
	limits := wasm.Limits{Instances: 1, Timeout: time.Minute}
	p, err := pluginWith(b, r, "label-score", `{"label":"example.com/priority"}`, limits)
	if err != nil {
		b.Fatal(err)
	}
	cache := wasm.NewNodeCache()
	in := &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(b, cache, nodes)}
	// Warm up: the first call defines every node in the instance's node table.
	if _, err := p.Score(context.Background(), in); err != nil {
		b.Fatal(err)
	}
	b.Run("wasm", func(b *testing.B) {
		cpuLoop(b, func() {
			if _, err := p.Score(context.Background(), in); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("wasm-cold-table", func(b *testing.B) {
		// Every call on a fresh plugin instance: all 5,000 documents cross and are decoded.
		for b.Loop() {
			b.StopTimer()
			q, err := pluginWith(b, r, "label-score", `{"label":"example.com/priority"}`, limits)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := q.Score(context.Background(), in); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = q.Close(context.Background())
			b.StartTimer()
		}
	})
}
