// Command scheduler measures scheduling throughput like Kubernetes' scheduler_perf
// SchedulingBasic: N nodes (Node objects, no kubelet) and M pods created through the API;
// the figure is pods/s from the first pod create to the last bind.
//
//	go run ./tests/bench/scheduler -nodes 5000 -pods 10000
//	go run ./tests/bench/scheduler -kubeconfig K -no-scheduler   # time another scheduler
//	go run ./tests/bench/scheduler -peer ~/.cache/wasmplane-peers/kube-scheduler  # side by side
//
// By default it starts the API server (embedded etcd) and wasmplane's scheduler in this
// process, as scheduler_perf does.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wasmplane/wasmplane/core/scheduler"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	nodes := flag.Int("nodes", 5000, "nodes to create")
	pods := flag.Int("pods", 10000, "pods to create")
	workers := flag.Int("workers", 16, "parallel creators")
	kubeconfig := flag.String("kubeconfig", "", "use a running API server (default: start one in-process)")
	noScheduler := flag.Bool("no-scheduler", false, "do not start wasmplane's scheduler (time another one)")
	precreate := flag.Bool("precreate", false, "create all pods before starting the scheduler and time scheduler start → last bind (isolates the scheduler from create throughput)")
	proto := flag.Bool("protobuf", false, "clients speak protobuf (as kube-scheduler does; slower against wasmplane today)")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured phase")
	plugins := flag.String("plugins", "", "add the example Filter+Score plugins: native (Go twins), wasm (the modules), compare (native, then wasm, each on a fresh server), or bounds (the modules with the guest-concurrency bounds lifted, then with the default bounds: the bounds' cost)")
	lang := flag.String("lang", "go", "the language of the example WASM plugins -plugins loads: go or rust")
	peer := flag.String("peer", "", "path of a kube-scheduler binary: run wasmplane's scheduler, then this one, each on a fresh in-process server, same nodes and pods")
	peerArgs := flag.String("peer-args", "--kube-api-qps=1000 --kube-api-burst=2000", "extra kube-scheduler flags (space-separated) for -peer")
	rounds := flag.Int("rounds", 1, "repeat the runs (both sides of -plugins compare or -peer, in turn) this many times and print each round's ratio and the median: one run pair varies by ±15 % on a 2-core machine")
	var bounds wasm.CallBounds
	flag.IntVar(&bounds.MaxConcurrentCalls, "wasm-max-concurrent-calls", 0, "the WASM runtime's bound on calls running guest code at once (0: its default, GOMAXPROCS)")
	flag.IntVar(&bounds.MaxConcurrentCallsPerPlugin, "wasm-max-concurrent-calls-per-plugin", 0, "the bound per plugin (0: the scheduler's default)")
	peerConfig := flag.String("peer-config", "", "a KubeSchedulerConfiguration file for -peer (the string KUBECONFIG in it is replaced by the server's kubeconfig path; -peer-args then only adds flags)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	type runSpec struct{ plugins, peer string }
	runs := []runSpec{{plugins: *plugins}}
	switch {
	case *plugins == "compare":
		runs = []runSpec{{plugins: "native"}, {plugins: "wasm"}}
	case *plugins == "bounds":
		runs = []runSpec{{plugins: "wasm-unbounded"}, {plugins: "wasm"}}
	}
	if *lang != "go" {
		for i := range runs {
			if strings.HasPrefix(runs[i].plugins, "wasm") {
				runs[i].plugins += "/" + *lang
			}
		}
	}
	switch {
	case *peer != "":
		if *kubeconfig != "" || *noScheduler || *plugins != "" {
			fmt.Fprintln(os.Stderr, "error: -peer starts its own servers; it excludes -kubeconfig, -no-scheduler and -plugins")
			os.Exit(2)
		}
		runs = []runSpec{{}, {peer: *peer}}
	}
	label := func(r runSpec) string {
		switch {
		case r.plugins != "":
			return "plugins: " + r.plugins
		case r.peer != "":
			return "scheduler: " + r.peer + " " + *peerArgs
		case *peer != "":
			return "scheduler: wasmplane"
		}
		return ""
	}
	var ratios []float64
	for round := 1; round <= max(*rounds, 1); round++ {
		var got []float64
		for _, r := range runs {
			if l := label(r); l != "" {
				fmt.Println(l)
			}
			p := peerRun{path: r.peer, args: strings.Fields(*peerArgs), config: *peerConfig}
			if p.config != "" {
				p.args = nil
			}
			tput, err := run(*nodes, *pods, *workers, *kubeconfig, *noScheduler || r.peer != "", *proto, *precreate, *timeout, r.plugins, bounds, p)
			if err != nil {
				fmt.Fprintln(os.Stderr, "error:", err)
				pprof.StopCPUProfile()
				os.Exit(1)
			}
			got = append(got, tput)
		}
		if len(got) == 2 {
			ratios = append(ratios, got[1]/got[0])
			fmt.Printf("round %d: %s %.1f pods/s, %s %.1f pods/s, second/first %.1f %%\n", round, label(runs[0]), got[0], label(runs[1]), got[1], 100*got[1]/got[0])
		}
	}
	if len(ratios) > 1 {
		sorted := slices.Sorted(slices.Values(ratios))
		fmt.Printf("median second/first over %d rounds: %.1f %% (min %.1f %%, max %.1f %%)\n", len(ratios), 100*sorted[len(sorted)/2], 100*sorted[0], 100*sorted[len(sorted)-1])
	}
}

// peerRun is another scheduler binary to start against the in-process server.
type peerRun struct {
	path, config string
	args         []string
}

// run creates the nodes and pods, runs the scheduler under test and returns its
// throughput in pods/s.
func run(numNodes, numPods, workers int, kubeconfig string, noScheduler, proto, precreate bool, timeout time.Duration, plugins string, bounds wasm.CallBounds, peer peerRun) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var rc *rest.Config
	var peerKubeconfig, dataDir string
	if kubeconfig == "" {
		dir, err := os.MkdirTemp("", "wasmplane-bench-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		// API server and scheduler only, as scheduler_perf: the node lifecycle controller
		// would taint these kubelet-less nodes unreachable a few minutes into a long run.
		inst, err := server.Start(ctx, server.Config{DataDir: dir, Port: 0, Logger: quiet, DisableScheduler: true, DisableControllers: true})
		if err != nil {
			return 0, fmt.Errorf("starting server: %w", err)
		}
		defer inst.Close()
		rc = inst.RESTConfig()
		peerKubeconfig, dataDir = inst.KubeconfigPath(), dir
	} else {
		var err error
		if rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			return 0, err
		}
		rc.QPS, rc.Burst = -1, 0
	}
	if proto {
		rc.ContentType = "application/vnd.kubernetes.protobuf"
		rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return 0, err
	}
	ns := fmt.Sprintf("bench-%d", time.Now().Unix())
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("namespace: %w", err)
	}

	t0 := time.Now()
	if err := parallel(ctx, numNodes, workers, func(i int) error {
		_, err := client.CoreV1().Nodes().Create(ctx, benchNode(fmt.Sprintf("bench-node-%05d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		return 0, fmt.Errorf("creating nodes: %w", err)
	}
	fmt.Printf("created %d nodes in %v\n", numNodes, time.Since(t0).Round(time.Millisecond))

	// Count binds with our own informer (works whichever scheduler binds).
	var bound atomic.Int64
	allBound := make(chan struct{})
	var lastBind atomic.Int64
	watchFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	podInf := watchFactory.Core().V1().Pods().Informer()
	count := func(p *v1.Pod) {
		if p.Spec.NodeName == "" {
			return
		}
		lastBind.Store(time.Now().UnixNano())
		if bound.Add(1) == int64(numPods) {
			close(allBound)
		}
	}
	if _, err := podInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { count(obj.(*v1.Pod)) },
		UpdateFunc: func(o, n any) {
			if o.(*v1.Pod).Spec.NodeName == "" {
				count(n.(*v1.Pod))
			}
		},
	}); err != nil {
		return 0, err
	}
	// Stop order matters: contexts first, then wait, then informer shutdown.
	watchCtx, stopWatch := context.WithCancel(ctx)
	schedCtx, stopSched := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var factories []informers.SharedInformerFactory
	defer func() {
		stopSched()
		stopWatch()
		wg.Wait()
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	watchFactory.Start(watchCtx.Done())
	factories = append(factories, watchFactory)
	watchFactory.WaitForCacheSync(ctx.Done())

	// wasmplane's scheduler and its plugins are built before any clock starts: compiling
	// and loading WASM modules happens once when a plugin is applied, not per pod, so it
	// is timed apart.
	var sched *scheduler.Scheduler
	var schedFactory informers.SharedInformerFactory
	cleanup, running := func() {}, false
	if !noScheduler && peer.path == "" {
		sc, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
		if err != nil {
			return 0, err
		}
		schedFactory = informers.NewSharedInformerFactory(sc, 0)
		factories = append(factories, schedFactory)
		if sched, err = scheduler.New(sc, schedFactory, scheduler.Config{Registerer: prometheus.NewRegistry(), Logger: quiet}); err != nil {
			return 0, err
		}
		t := time.Now()
		if cleanup, err = addPlugins(ctx, sched, plugins, bounds, quiet); err != nil {
			return 0, err
		}
		defer func() {
			if !running {
				cleanup() // the scheduler never ran to clean up after itself
			}
		}()
		if plugins != "" {
			fmt.Printf("  plugins %s loaded in %v (not timed)\n", plugins, time.Since(t).Round(time.Millisecond))
		}
	}
	startScheduler := func() error {
		if peer.path != "" {
			stop, err := startPeer(ctx, client, peer, peerKubeconfig, dataDir)
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-schedCtx.Done()
				stop()
			}()
		}
		if s, factory := sched, schedFactory; s != nil {
			factory.Start(schedCtx.Done())
			factory.WaitForCacheSync(schedCtx.Done())
			wg.Add(1)
			running = true
			go func() {
				defer wg.Done()
				defer cleanup() // once the scheduler has stopped
				if err := s.Run(schedCtx); err != nil {
					fmt.Fprintln(os.Stderr, "scheduler:", err)
				}
			}()
			wg.Add(1)
			go func() {
				defer wg.Done()
				t := time.NewTicker(5 * time.Second)
				defer t.Stop()
				for {
					select {
					case <-schedCtx.Done():
						return
					case <-t.C:
						a, b, u := s.Queue().Lens()
						fmt.Printf("  progress: bound=%d queue active=%d backoff=%d unschedulable=%d\n", bound.Load(), a, b, u)
					}
				}
			}()
			// Wait until the scheduler saw every node, so pods are not judged on a partial view.
			for s.Cache().NodeCount() < numNodes {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		return nil
	}
	var createLat []time.Duration
	var latMu sync.Mutex
	createPods := func() error {
		return parallel(ctx, numPods, workers, func(i int) error {
			t := time.Now()
			_, err := client.CoreV1().Pods(ns).Create(ctx, benchPod(ns, fmt.Sprintf("pod-%05d", i)), metav1.CreateOptions{})
			latMu.Lock()
			createLat = append(createLat, time.Since(t))
			latMu.Unlock()
			return err
		})
	}
	var start time.Time
	if precreate {
		start = time.Now()
		if err := createPods(); err != nil {
			return 0, fmt.Errorf("creating pods: %w", err)
		}
		fmt.Printf("  %d pods created in %v before the scheduler started\n", numPods, time.Since(start).Round(time.Millisecond))
		start = time.Now()
		if err := startScheduler(); err != nil {
			return 0, err
		}
	} else {
		if err := startScheduler(); err != nil {
			return 0, err
		}
		start = time.Now()
		if err := createPods(); err != nil {
			return 0, fmt.Errorf("creating pods: %w", err)
		}
		created := time.Since(start)
		fmt.Printf("  %d pods created in %v (%.0f creates/s)\n", numPods, created.Round(time.Millisecond), float64(numPods)/created.Seconds())
	}
	select {
	case <-allBound:
	case <-ctx.Done():
		return 0, fmt.Errorf("only %d/%d pods bound: %w", bound.Load(), numPods, ctx.Err())
	}
	elapsed := time.Duration(lastBind.Load() - start.UnixNano())
	sort.Slice(createLat, func(i, j int) bool { return createLat[i] < createLat[j] })
	fmt.Printf("SchedulingBasic nodes=%d pods=%d GOMAXPROCS=%d\n", numNodes, numPods, runtime.GOMAXPROCS(0))
	fmt.Printf("  create latency p50 %v p99 %v\n", createLat[len(createLat)/2].Round(time.Microsecond), createLat[len(createLat)*99/100].Round(time.Microsecond))
	if precreate {
		fmt.Printf("  scheduler start → last bind: %v\n", elapsed.Round(time.Millisecond))
	} else {
		fmt.Printf("  first create → last bind: %v\n", elapsed.Round(time.Millisecond))
	}
	fmt.Printf("  throughput: %.1f pods/s\n", float64(numPods)/elapsed.Seconds())
	return float64(numPods) / elapsed.Seconds(), nil
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
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// benchNode is scheduler_perf's node-default.yaml.
func benchNode(name string) *v1.Node {
	rl := v1.ResourceList{
		v1.ResourcePods:   resource.MustParse("110"),
		v1.ResourceCPU:    resource.MustParse("4"),
		v1.ResourceMemory: resource.MustParse("32Gi"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status:     v1.NodeStatus{Capacity: rl, Allocatable: rl, Phase: v1.NodeRunning, Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
}

// benchPod is scheduler_perf's pod-default.yaml.
func benchPod(ns, name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "pause", Image: "registry.k8s.io/pause:3.10",
			Ports: []v1.ContainerPort{{ContainerPort: 80}},
			Resources: v1.ResourceRequirements{
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")},
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")},
			},
		}}},
	}
}
