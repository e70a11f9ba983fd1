// Command apiserver benchmarks a running wasmplane (or any Kubernetes API server) through
// client-go and prints the API server's headline figures: create throughput, create latency at a
// fixed rate, watch fan-out delay, paged list time at scale, and server RSS.
//
//	go run ./tests/bench/apiserver                      # starts `wasmplane up` itself
//	go run ./tests/bench/apiserver -kubeconfig K -pid P # against a server already running
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/peers"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/pager"
)

type options struct {
	kubeconfig   string
	pid          int
	creates      int
	workers      int
	rate         int
	rateSeconds  int
	watchers     int
	watchRate    int
	watchSeconds int
	scalePods    int
	scaleNodes   int
	json         bool
	phases       string
	upArgs       string
	profileDir   string
	profileSecs  int
	bin          string
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of a running server (default: start `wasmplane up` in a temp dir)")
	flag.IntVar(&o.pid, "pid", 0, "server process id, for RSS (with -kubeconfig)")
	flag.IntVar(&o.creates, "creates", 5000, "pods created for the throughput figure")
	flag.IntVar(&o.workers, "workers", 32, "parallel clients for the throughput figure")
	flag.IntVar(&o.rate, "rate", 200, "creates/s for the latency figure")
	flag.IntVar(&o.rateSeconds, "rate-seconds", 10, "duration of the latency run")
	flag.IntVar(&o.watchers, "watchers", 1000, "concurrent pod watchers for the fan-out figure")
	flag.IntVar(&o.watchRate, "watch-rate", 200, "events/s during the fan-out run")
	flag.IntVar(&o.watchSeconds, "watch-seconds", 10, "duration of the fan-out run")
	flag.IntVar(&o.scalePods, "scale-pods", 0, "pods to store for the scale figure (issue target: 150000; 0 skips)")
	flag.IntVar(&o.scaleNodes, "scale-nodes", 5000, "nodes to store for the scale figure")
	flag.BoolVar(&o.json, "json", false, "use JSON instead of protobuf")
	flag.StringVar(&o.phases, "phases", "throughput,latency,fanout,scale", "comma-separated phases to run")
	flag.StringVar(&o.upArgs, "up-args", "--disable-kubelet", "extra flags for `wasmplane up` (space-separated), e.g. \"--disable-kubelet --disable-controllers --disable-scheduler\"")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write server CPU profiles of the fan-out and paged-list phases here")
	flag.StringVar(&o.bin, "wasmplane-bin", "", "run this wasmplane binary instead of building ./cmd/wasmplane (e.g. to compare two builds)")
	flag.IntVar(&o.profileSecs, "profile-seconds", 5, "length of each server CPU profile")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		slog.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.kubeconfig == "" {
		stop, kc, pid, err := startServer(ctx, o.bin, strings.Fields(o.upArgs))
		if err != nil {
			return err
		}
		defer stop()
		o.kubeconfig, o.pid = kc, pid
		fmt.Printf("idle RSS after start: %s\n", rss(o.pid))
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	if !o.json {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if err := ensureNS(ctx, cs, "bench"); err != nil {
		return err
	}
	phases := map[string]bool{}
	for _, p := range strings.Split(o.phases, ",") {
		phases[strings.TrimSpace(p)] = true
	}
	if phases["throughput"] {
		if err := throughput(ctx, cs, o); err != nil {
			return err
		}
	}
	if phases["latency"] {
		if err := paced(ctx, cs, o); err != nil {
			return err
		}
	}
	if phases["fanout"] {
		if err := fanout(ctx, cfg, cs, o); err != nil {
			return err
		}
	}
	if phases["scale"] && o.scalePods > 0 {
		if err := scale(ctx, cs, o); err != nil {
			return err
		}
	}
	fmt.Printf("server RSS at end: %s\n", rss(o.pid))
	return nil
}

func startServer(ctx context.Context, prebuilt string, upArgs []string) (func(), string, int, error) {
	dir, err := os.MkdirTemp("", "wasmplane-bench-")
	if err != nil {
		return nil, "", 0, fmt.Errorf("temp dir: %w", err)
	}
	if prebuilt == "" {
		// Built first, so that the ready time below is the server's alone.
		if prebuilt, err = peers.BuildWasmplane(ctx, dir); err != nil {
			_ = os.RemoveAll(dir)
			return nil, "", 0, err
		}
	}
	start := time.Now()
	c, err := peers.StartWasmplane(ctx, prebuilt, dir, upArgs...)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", 0, err
	}
	fmt.Printf("wasmplane up: ready in %v\n", time.Since(start).Round(time.Millisecond))
	stop := func() {
		c.Stop()
		_ = os.RemoveAll(dir)
	}
	return stop, c.Kubeconfig, c.Procs["wasmplane"].Pid, nil
}

func ensureNS(ctx context.Context, cs kubernetes.Interface, name string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace: %w", err)
	}
	return nil
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/hello:1",
			Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}},
	}
}

func throughput(ctx context.Context, cs kubernetes.Interface, o options) error {
	var next atomic.Int64
	var failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < o.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(o.creates) {
					return
				}
				if _, err := cs.CoreV1().Pods("bench").Create(ctx, pod("tp-"+strconv.FormatInt(i, 10)), metav1.CreateOptions{}); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	fmt.Printf("pod create throughput: %d creates in %v with %d workers = %.0f creates/s (%d failed)\n",
		o.creates, d.Round(time.Millisecond), o.workers, float64(o.creates)/d.Seconds(), failed.Load())
	return nil
}

func paced(ctx context.Context, cs kubernetes.Interface, o options) error {
	n := o.rate * o.rateSeconds
	lat := make([]time.Duration, n)
	interval := time.Second / time.Duration(o.rate)
	var wg sync.WaitGroup
	start := time.Now()
	var failed atomic.Int64
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			t := time.Now()
			if _, err := cs.CoreV1().Pods("bench").Create(ctx, pod("lat-"+strconv.Itoa(i)), metav1.CreateOptions{}); err != nil {
				failed.Add(1)
			}
			lat[i] = time.Since(t)
		}(i)
	}
	wg.Wait()
	p50, p99 := percentiles(lat)
	fmt.Printf("pod create latency at %d creates/s for %ds: p50 %v, p99 %v (%d failed)\n", o.rate, o.rateSeconds, p50, p99, failed.Load())
	return nil
}

func percentiles(d []time.Duration) (time.Duration, time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)*50/100].Round(10 * time.Microsecond), s[min(len(s)-1, len(s)*99/100)].Round(10 * time.Microsecond)
}

// fanout starts N watchers on one namespace, creates pods at a fixed rate, and measures
// the delay from each create's acknowledgement to each watcher's receipt.
func fanout(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, o options) error {
	if err := ensureNS(ctx, cs, "fanout"); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	total := o.watchRate * o.watchSeconds
	var mu sync.Mutex
	sent := make(map[string]time.Time, total)
	delays := make([]time.Duration, 0, total*o.watchers)
	var received atomic.Int64
	var ready sync.WaitGroup
	var done sync.WaitGroup
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = 0
	for w := 0; w < o.watchers; w++ {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			wi, err := cs.CoreV1().Pods("fanout").Watch(ctx, metav1.ListOptions{})
			ready.Done()
			if err != nil {
				return
			}
			defer wi.Stop()
			local := make([]time.Duration, 0, total)
			for ev := range wi.ResultChan() {
				if ev.Type != watch.Added {
					continue
				}
				now := time.Now()
				p := ev.Object.(*corev1.Pod)
				ts, err := time.Parse(time.RFC3339Nano, p.Annotations["sent"])
				if err != nil {
					continue
				}
				local = append(local, now.Sub(ts))
				if received.Add(1) == int64(total*o.watchers) {
					cancel()
				}
			}
			mu.Lock()
			delays = append(delays, local...)
			mu.Unlock()
		}()
	}
	ready.Wait()
	interval := time.Second / time.Duration(o.watchRate)
	profDone := startProfile(ctx, cs, o, "fanout")
	cpu0, self0 := serverCPU(o.pid), selfCPU()
	start := time.Now()
	for i := 0; i < total; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		p := pod("fo-" + strconv.Itoa(i))
		p.Annotations = map[string]string{"sent": time.Now().Format(time.RFC3339Nano)}
		if _, err := cs.CoreV1().Pods("fanout").Create(ctx, p, metav1.CreateOptions{}); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("fan-out create: %w", err)
		}
		mu.Lock()
		sent[p.Name] = time.Now()
		mu.Unlock()
	}
	select {
	case <-ctx.Done():
	case <-time.After(60 * time.Second):
		cancel()
	}
	done.Wait()
	wall := time.Since(start)
	cpu1, self1 := serverCPU(o.pid), selfCPU()
	profDone()
	p50, p99 := percentiles(delays)
	fmt.Printf("watch fan-out: %d watchers, %d events/s for %ds: %d of %d deliveries, delay p50 %v, p99 %v\n",
		o.watchers, o.watchRate, o.watchSeconds, len(delays), total*o.watchers, p50, p99)
	fmt.Printf("watch fan-out CPU over %v: server %v, benchmark client %v\n", wall.Round(time.Millisecond),
		(cpu1 - cpu0).Round(time.Millisecond), (self1 - self0).Round(time.Millisecond))
	return nil
}

// scale stores many pods and nodes, then lists every pod paged by 500.
func scale(ctx context.Context, cs kubernetes.Interface, o options) error {
	if err := ensureNS(ctx, cs, "scale"); err != nil {
		return err
	}
	start := time.Now()
	if err := parallel(ctx, o.scaleNodes, o.workers, func(i int) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", i), Labels: map[string]string{"zone": fmt.Sprint(i % 3)}},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{}}}
		_, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	if err := parallel(ctx, o.scalePods, o.workers, func(i int) error {
		p := pod(fmt.Sprintf("sc-%06d", i))
		p.Spec.NodeName = fmt.Sprintf("node-%05d", i%max(o.scaleNodes, 1))
		_, err := cs.CoreV1().Pods("scale").Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	fmt.Printf("scale: stored %d nodes and %d pods in %v; server RSS %s\n", o.scaleNodes, o.scalePods, time.Since(start).Round(time.Second), rss(o.pid))
	if o.profileDir != "" {
		// What holds the server's memory with everything stored.
		if data, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").DoRaw(ctx); err != nil {
			slog.Error("server heap profile", "err", err)
		} else if err := os.WriteFile(filepath.Join(o.profileDir, "heap.pprof"), data, 0o644); err != nil {
			slog.Error("writing heap profile", "err", err)
		}
	}
	profDone := startProfile(ctx, cs, o, "list")
	cpu0, self0 := serverCPU(o.pid), selfCPU()
	start = time.Now()
	count := 0
	pg := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Pods("").List(ctx, opts)
	})
	pg.PageSize = 500
	err := pg.EachListItem(ctx, metav1.ListOptions{}, func(runtime.Object) error { count++; return nil })
	if err != nil {
		return fmt.Errorf("paged list: %w", err)
	}
	wall := time.Since(start)
	cpu1, self1 := serverCPU(o.pid), selfCPU()
	fmt.Printf("scale: listed all %d pods paged by 500 in %v (CPU: server %v, benchmark client %v); server RSS %s\n", count,
		wall.Round(time.Millisecond), (cpu1 - cpu0).Round(time.Millisecond), (self1 - self0).Round(time.Millisecond), rss(o.pid))
	profDone()
	return nil
}

func parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil && !apierrors.IsAlreadyExists(err) {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// rss reads a process's resident set size from /proc.
func rss(pid int) string {
	if pid == 0 {
		return "n/a"
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "n/a"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "n/a"
}

// startProfile fetches a server CPU profile of o.profileSecs into o.profileDir/name.pprof
// in the background; the returned func waits for it. Nothing happens without -profile-dir.
func startProfile(ctx context.Context, cs kubernetes.Interface, o options, name string) func() {
	if o.profileDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(o.profileSecs)).DoRaw(ctx)
		if err != nil {
			slog.Error("server CPU profile", "err", err)
			return
		}
		path := filepath.Join(o.profileDir, name+".pprof")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			slog.Error("writing CPU profile", "err", err)
			return
		}
		fmt.Printf("server CPU profile: %s\n", path)
	}()
	return func() { <-done }
}

// serverCPU is the user+system CPU time the process pid has used (0 when unknown).
func serverCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	// Linux reports clock ticks of 1/100 s (USER_HZ) on every supported architecture.
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// selfCPU is the user+system CPU time this benchmark process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
