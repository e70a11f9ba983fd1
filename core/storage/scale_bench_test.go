package storage

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var scalePods = flag.Int("storage.scale", 0, "pods BenchmarkScale stores (e.g. 150000); 0 skips it")

// BenchmarkScale stores -storage.scale pods, then measures a cache (re)build, the cache's
// heap, and listing everything (unpaged and by pages of 500) from the cache and from etcd.
// go test ./core/storage -run XXX -bench Scale -benchtime 1x -storage.scale 150000
func BenchmarkScale(b *testing.B) {
	if *scalePods == 0 {
		b.Skip("set -storage.scale")
	}
	n := *scalePods
	e := newTestEtcd(b)
	ctx := context.Background()
	t0 := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ns := fmt.Sprintf("ns-%03d", i%100)
				name := fmt.Sprintf("pod-%06d", i)
				p := pod(ns, name, map[string]string{"app": fmt.Sprint(i % 50)})
				p.Spec.NodeName = fmt.Sprintf("node-%04d", i%5000)
				if err := e.Create(ctx, podKey(e.cfg, ns, name), p, nil); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	createRate := float64(n) / time.Since(t0).Seconds()

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 = time.Now()
	c := NewCacher(e, CacherConfig{})
	defer c.Stop()
	if err := c.Ready(ctx); err != nil {
		b.Fatal(err)
	}
	build := time.Since(t0).Seconds()
	// Once more, now that etcd is idle: what an API server restart costs.
	t0 = time.Now()
	c2 := NewCacher(e, CacherConfig{})
	if err := c2.Ready(ctx); err != nil {
		b.Fatal(err)
	}
	rebuild := time.Since(t0).Seconds()
	c2.Stop()
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapInuse-before.HeapInuse) / (1 << 20)

	timeList := func(s Interface, limit int64) float64 {
		t0 := time.Now()
		opts := ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: limit}}
		got := 0
		for {
			list := &corev1.PodList{}
			if err := s.GetList(ctx, e.cfg.Prefix+"/", opts, list); err != nil {
				b.Fatal(err)
			}
			got += len(list.Items)
			if list.Continue == "" {
				break
			}
			opts.Predicate.Continue = list.Continue
		}
		if got != n {
			b.Fatalf("listed %d of %d", got, n)
		}
		return time.Since(t0).Seconds()
	}
	b.ResetTimer() // (drops metrics reported so far: report everything after it)
	b.ReportMetric(createRate, "creates/s")
	b.ReportMetric(build, "cache-build-s")
	b.ReportMetric(rebuild, "cache-rebuild-s")
	b.ReportMetric(heap, "cache-heap-MiB")
	for i := 0; i < b.N; i++ {
		b.ReportMetric(timeList(c, 0), "cache-list-all-s")
		b.ReportMetric(timeList(c, 500), "cache-list-paged500-s")
		b.ReportMetric(timeList(e, 500), "etcd-list-paged500-s")
	}
}
