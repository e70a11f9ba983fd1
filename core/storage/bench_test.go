package storage

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// BenchmarkCreateParallel measures pod creates against the embedded etcd.
func BenchmarkCreateParallel(b *testing.B) {
	s := newTestEtcd(b)
	ctx := testCtx(b)
	var seq atomic.Int64
	b.SetParallelism(16) // many clients, as an API server has
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := fmt.Sprintf("p-%d", seq.Add(1))
			if err := s.Create(ctx, podKey(s.cfg, "ns", name), pod("ns", name, nil), nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
}

// BenchmarkGetList10k lists 10,000 pods from the cache and from etcd.
func BenchmarkGetList10k(b *testing.B) {
	c := newTestCacher(b, CacherConfig{})
	createPods(b, c, c.cfg, "ns", 10000)
	ctx := testCtx(b)
	key := c.cfg.Prefix + "/"
	run := func(name string, s Interface, opts ListOptions) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				list := &corev1.PodList{}
				o := opts
				for {
					if err := s.GetList(ctx, key, o, list); err != nil {
						b.Fatal(err)
					}
					if list.Continue == "" {
						break
					}
					o.Predicate.Continue = list.Continue
				}
			}
		})
	}
	run("cache-rv0", c, ListOptions{Recursive: true, ResourceVersion: "0"})
	run("cache-consistent", c, ListOptions{Recursive: true})
	run("cache-paged-500", c, ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 500}})
	run("etcd", c.store, ListOptions{Recursive: true})
	run("etcd-paged-500", c.store, ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 500}})
}

// BenchmarkWatchFanOut sends events at 200/s to 1,000 cache watchers. It reports the
// end-to-end delay (from just before the write to each watcher's receipt, so it includes
// the etcd write) and the fan-out delay (from the first watcher's receipt of an event to
// each other watcher's, i.e. what the cache adds).
func BenchmarkWatchFanOut(b *testing.B) {
	const rate = 200
	watchers := 1000
	if v, err := strconv.Atoi(os.Getenv("FANOUT_WATCHERS")); err == nil {
		watchers = v
	}
	c := newTestCacher(b, CacherConfig{})
	ctx := testCtx(b)
	rv, err := c.CurrentResourceVersion(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	n := b.N
	sent := make([]int64, n)          // unix nanos before each write
	acked := make([]int64, n)         // unix nanos when each write returned
	recv := make([][]int64, watchers) // per watcher, per event: unix nanos of receipt
	var wg sync.WaitGroup
	for i := 0; i < watchers; i++ {
		w, err := c.Watch(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: strconv.FormatUint(rv, 10)})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		recv[i] = make([]int64, n)
		wg.Add(1)
		go func(i int, w watch.Interface) {
			defer wg.Done()
			for got := 0; got < n; got++ {
				ev, ok := <-w.ResultChan()
				if !ok {
					b.Errorf("watcher %d closed after %d events", i, got)
					return
				}
				now := time.Now().UnixNano()
				p := ev.Object.(*CachingObject).shared().(*corev1.Pod) // read-only
				seq, _ := strconv.Atoi(p.Annotations["seq"])
				recv[i][seq] = now
			}
		}(i, w)
	}
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	var writes sync.WaitGroup
	for i := 0; i < n; i++ {
		<-tick.C
		writes.Add(1)
		go func(i int) {
			defer writes.Done()
			name := fmt.Sprintf("p-%d-%d", n, i)
			p := pod("ns", name, nil)
			p.Annotations = map[string]string{"seq": strconv.Itoa(i)}
			sent[i] = time.Now().UnixNano()
			if err := c.Create(ctx, podKey(c.cfg, "ns", name), p, nil); err != nil {
				b.Error(err)
			}
			acked[i] = time.Now().UnixNano()
		}(i)
	}
	writes.Wait()
	wg.Wait()
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[int(float64(len(d)-1)*p)].Microseconds()) / 1000
	}
	wl := make([]time.Duration, n)
	for i := range wl {
		wl[i] = time.Duration(acked[i] - sent[i])
	}
	var e2e, fan []time.Duration
	for ev := 0; ev < n; ev++ {
		first := int64(0)
		for w := range recv {
			if r := recv[w][ev]; r != 0 && (first == 0 || r < first) {
				first = r
			}
		}
		for w := range recv {
			if r := recv[w][ev]; r != 0 {
				e2e = append(e2e, time.Duration(r-sent[ev]))
				fan = append(fan, time.Duration(r-first))
			}
		}
	}
	b.ReportMetric(pct(wl, 0.99), "write-p99-ms")
	if len(e2e) == 0 {
		return
	}
	b.ReportMetric(pct(fan, 0.50), "fanout-p50-ms")
	b.ReportMetric(pct(fan, 0.99), "fanout-p99-ms")
	b.ReportMetric(pct(e2e, 0.50), "e2e-p50-ms")
	b.ReportMetric(pct(e2e, 0.99), "e2e-p99-ms")
	b.ReportMetric(float64(len(e2e))/float64(n), "deliveries/event")
}
