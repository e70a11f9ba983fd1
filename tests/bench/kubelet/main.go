// Command kubelet measures pod startup latency through the kubelet: pods are created at a
// fixed rate against a node run by `wasmplane agent` (a separate process, so that its RSS
// is the kubelet's alone) on the built-in WASI runtime, and the time from each create to
// the pod being Running and Ready (seen by a watch) is reported as p50/p99, with the
// kubelet's RSS once 110 pods run and at the end. By default the runtime runs as its own
// process too (`wasmplane runtime`), so that its RSS and CPU are reported apart from the
// kubelet's and the API server's; -runtime-process=false serves CRI from this process.
//
//	go run ./tests/bench/kubelet -pods 200 -rate 20
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/examples/workloads"
	"github.com/wasmplane/wasmplane/runtime/cri/images"
	"github.com/wasmplane/wasmplane/runtime/cri/wasi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const nodeName = "bench-node"

func main() {
	pods := flag.Int("pods", 200, "pods to create")
	rate := flag.Int("rate", 20, "creates per second")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	warmup := flag.Bool("warmup", true, "start (and delete) one untimed pod first, so the module is compiled")
	agentBin := flag.String("agent", "wasmplane", "the node agent binary: wasmplane (run as `wasmplane agent`) or wasmplane-agent (the agent-only binary)")
	profileDir := flag.String("profile", "", "write CPU profiles of the timed phase (agent.pprof: the kubelet; bench.pprof: this process, the API server and, with -runtime-process=false, the runtime) and the kubelet's heap at the end (agent-heap.pprof) into this directory")
	runtimeProcess := flag.Bool("runtime-process", true, "run the built-in WASI runtime as its own process (`wasmplane runtime`), so its RSS and CPU are measured apart; false serves CRI from this process, next to the API server")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *agentBin != "wasmplane" && *agentBin != "wasmplane-agent" {
		fmt.Fprintln(os.Stderr, "error: -agent is wasmplane or wasmplane-agent")
		os.Exit(2)
	}
	if err := run(ctx, *pods, *rate, *warmup, *agentBin, *profileDir, *runtimeProcess); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, numPods, rate int, warmup bool, agentBin, profileDir string, runtimeProcess bool) error {
	dir, err := os.MkdirTemp("", "wasmplane-kubelet-bench-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	inst, err := server.Start(ctx, server.Config{DataDir: filepath.Join(dir, "server"), Port: 0, DisableControllers: true, DisableScheduler: true, Logger: quiet})
	if err != nil {
		return fmt.Errorf("starting the API server: %w", err)
	}
	defer inst.Close()
	fmt.Printf("building the workload and the %s binary…\n", agentBin)
	mods, err := workloads.Build(ctx, filepath.Join(dir, "wasm"))
	if err != nil {
		return err
	}
	bin := filepath.Join(dir, agentBin)
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/wasmplane/wasmplane/cmd/"+agentBin).CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", agentBin, err, out)
	}
	// rtPid is the runtime process's, 0 when the runtime runs in this process.
	endpoint, rtPid := "", 0
	if runtimeProcess {
		wasmplaneBin := bin
		if agentBin != "wasmplane" {
			wasmplaneBin = filepath.Join(dir, "wasmplane")
			if out, err := exec.CommandContext(ctx, "go", "build", "-o", wasmplaneBin, "github.com/wasmplane/wasmplane/cmd/wasmplane").CombinedOutput(); err != nil {
				return fmt.Errorf("building wasmplane: %w\n%s", err, out)
			}
		}
		rt, err := startRuntime(ctx, wasmplaneBin, dir, mods["sleeper"])
		if err != nil {
			return err
		}
		defer rt.stop()
		endpoint, rtPid = rt.endpoint, rt.cmd.Process.Pid
	} else {
		rt, err := wasi.Serve(ctx, wasi.Config{Socket: filepath.Join(dir, "cri.sock"), RootDir: filepath.Join(dir, "runtime"), Logger: quiet})
		if err != nil {
			return fmt.Errorf("starting the runtime: %w", err)
		}
		defer rt.Close()
		if _, err := rt.Images().ImportFile(ctx, mods["sleeper"], "sleeper:latest"); err != nil {
			return fmt.Errorf("importing sleeper: %w", err)
		}
		endpoint = rt.Endpoint()
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	args := []string{"--kubeconfig"}
	if agentBin == "wasmplane" {
		args = append([]string{"agent"}, args...)
	}
	agent := exec.CommandContext(agentCtx, bin, append(args, inst.KubeconfigPath(), "--node-name", nodeName,
		"--container-runtime-endpoint", endpoint, "--root-dir", filepath.Join(dir, "agent"), "--kubelet-port", "-1",
		"--max-pods", strconv.Itoa(numPods+10), "--log-level", "warn")...)
	agent.Stderr = os.Stderr
	agent.Cancel = func() error { return agent.Process.Signal(os.Interrupt) }
	agent.WaitDelay = 30 * time.Second
	if err := agent.Start(); err != nil {
		stopAgent()
		return fmt.Errorf("starting the agent: %w", err)
	}
	defer func() { stopAgent(); _ = agent.Wait() }()
	cfg, err := clientcmd.BuildConfigFromFlags("", inst.KubeconfigPath())
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if err := waitNodeReady(ctx, cs); err != nil {
		return err
	}
	fmt.Printf("node ready; kubelet RSS idle: %s\n", rss(agent.Process.Pid))
	if rtPid != 0 {
		fmt.Printf("runtime RSS idle: %s\n", rss(rtPid))
	}
	if warmup {
		// One pod first, so that the runtime's one-time module compilation is not timed.
		if err := warm(ctx, cs); err != nil {
			return err
		}
	}
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	latencies := make([]time.Duration, 0, numPods)
	rss110, rtRSS110 := "", ""
	done := make(chan error, 1)
	go func() {
		seen := map[string]bool{}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				done <- fmt.Errorf("watch error: %v", ev.Object)
				return
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || seen[p.Name] || !runningReady(p) {
				continue
			}
			now := time.Now()
			mu.Lock()
			at, ok := created[p.Name]
			if !ok {
				mu.Unlock()
				continue
			}
			seen[p.Name] = true
			latencies = append(latencies, now.Sub(at))
			n := len(latencies)
			mu.Unlock()
			if n == 110 {
				rss110 = rss(agent.Process.Pid)
				if rtPid != 0 {
					rtRSS110 = rss(rtPid)
				}
			}
			if n == numPods {
				done <- nil
				return
			}
		}
		done <- errors.New("watch closed")
	}()
	var stopProfiles func() error
	if profileDir != "" {
		port, err := kubeletPort(ctx, cs)
		if err != nil {
			return err
		}
		if stopProfiles, err = startProfiles(ctx, profileDir, port, time.Duration(numPods/rate+5)*time.Second); err != nil {
			return err
		}
		if rtPid != 0 {
			// The runtime process serves no pprof endpoint: only the CLI's flags reach it.
			fmt.Println("-profile: bench.pprof covers the API server only; the runtime runs as its own process and is not profiled (use -runtime-process=false to profile it)")
		}
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	benchCPU0, agentCPU0, rtCPU0 := selfCPU(), procCPU(agent.Process.Pid), time.Duration(0)
	if rtPid != 0 {
		rtCPU0 = procCPU(rtPid)
	}
	start := time.Now()
	for i := range numPods {
		<-tick.C
		name := fmt.Sprintf("p-%04d", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: nodeName,
			Containers: []corev1.Container{{Name: "c", Image: "sleeper:latest", ImagePullPolicy: corev1.PullIfNotPresent}}}}
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s: %w", name, err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		mu.Lock()
		n := len(latencies)
		mu.Unlock()
		return fmt.Errorf("only %d of %d pods running: %w", n, numPods, ctx.Err())
	}
	total := time.Since(start)
	benchCPU, agentCPU, rtCPU := selfCPU()-benchCPU0, procCPU(agent.Process.Pid)-agentCPU0, time.Duration(0)
	if rtPid != 0 {
		rtCPU = procCPU(rtPid) - rtCPU0
	}
	if stopProfiles != nil {
		if err := stopProfiles(); err != nil {
			return err
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	fmt.Printf("pods: %d at %d/s, all Running after %s\n", numPods, rate, total.Round(time.Millisecond))
	fmt.Printf("startup latency create→Running+Ready: p50 %s  p99 %s  max %s\n",
		pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	// CPU time is steadier than latency on a shared machine: it is the work done, whatever
	// else ran.
	perPod := func(d time.Duration) string {
		return fmt.Sprintf("%s (%s/pod)", d.Round(time.Millisecond), (d / time.Duration(numPods)).Round(10*time.Microsecond))
	}
	if rtPid != 0 {
		// This process's CPU is the API server's (and the benchmark's own client and watch).
		fmt.Printf("CPU time while starting them: kubelet %s; runtime %s; API server %s\n",
			perPod(agentCPU), perPod(rtCPU), perPod(benchCPU))
	} else {
		fmt.Printf("CPU time while starting them: kubelet %s; API server and runtime %s\n", perPod(agentCPU), perPod(benchCPU))
	}
	if rss110 != "" {
		fmt.Printf("kubelet RSS with 110 pods: %s\n", rss110)
	}
	fmt.Printf("kubelet RSS with %d pods: %s\n", numPods, rss(agent.Process.Pid))
	if rtPid != 0 {
		if rtRSS110 != "" {
			fmt.Printf("runtime RSS with 110 pods: %s\n", rtRSS110)
		}
		fmt.Printf("runtime RSS with %d pods: %s\n", numPods, rss(rtPid))
	}
	return nil
}

// runtimeProc is the built-in runtime run as `wasmplane runtime`.
type runtimeProc struct {
	cmd      *exec.Cmd
	endpoint string
	cancel   context.CancelFunc
	exited   chan struct{} // closed once cmd.Wait returned
}

// stop interrupts the runtime, as Ctrl-C would, and waits for it to exit.
func (r *runtimeProc) stop() {
	r.cancel()
	<-r.exited
}

// startRuntime imports the module into the store under dir/runtime before the runtime
// starts (so it is there on its first request) and starts `wasmplane runtime` on
// dir/cri.sock, returning once the socket accepts connections.
func startRuntime(ctx context.Context, bin, dir, module string) (*runtimeProc, error) {
	root := filepath.Join(dir, "runtime")
	store, err := images.Open(filepath.Join(root, "images"))
	if err != nil {
		return nil, fmt.Errorf("opening the runtime's image store: %w", err)
	}
	if _, err := store.ImportFile(ctx, module, "sleeper:latest"); err != nil {
		return nil, fmt.Errorf("importing sleeper: %w", err)
	}
	sock := filepath.Join(dir, "cri.sock")
	rctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(rctx, bin, "runtime", "--listen", "unix://"+sock, "--root", root, "--log-level", "warn")
	cmd.Stderr = os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("starting the runtime: %w", err)
	}
	r := &runtimeProc{cmd: cmd, endpoint: "unix://" + sock, cancel: cancel, exited: make(chan struct{})}
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(r.exited) }()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return r, nil
		}
		select {
		case <-r.exited:
			cancel()
			return nil, fmt.Errorf("the runtime exited before serving: %w", waitErr)
		case <-deadline.C:
			r.stop()
			return nil, fmt.Errorf("the runtime's socket %s accepted no connection within 30s", sock)
		case <-ctx.Done():
			r.stop()
			return nil, fmt.Errorf("waiting for the runtime's socket: %w", ctx.Err())
		case <-t.C:
		}
	}
}

func warm(ctx context.Context, cs kubernetes.Interface) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "warmup"}, Spec: corev1.PodSpec{NodeName: nodeName,
		Containers: []corev1.Container{{Name: "c", Image: "sleeper:latest", ImagePullPolicy: corev1.PullIfNotPresent}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the warm-up pod: %w", err)
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "warmup", metav1.GetOptions{})
		if err == nil && runningReady(p) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("warm-up pod never ran: %w", ctx.Err())
		case <-t.C:
		}
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods("default").Delete(ctx, "warmup", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return fmt.Errorf("deleting the warm-up pod: %w", err)
	}
	return nil
}

func runningReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitNodeReady(ctx context.Context, cs kubernetes.Interface) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node never became Ready: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// rss reads VmRSS of a process and its parts: anonymous memory (heap, stacks) and file
// pages (the binary's code and data that were touched).
func rss(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	v := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, val, ok := strings.Cut(l, ":"); ok {
			v[k] = strings.TrimSpace(val)
		}
	}
	return fmt.Sprintf("%s (anon %s, file %s)", v["VmRSS"], v["RssAnon"], v["RssFile"])
}

// kubeletPort is the port the agent registered in its Node's status.
func kubeletPort(ctx context.Context, cs kubernetes.Interface) (int, error) {
	n, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("reading the node: %w", err)
	}
	return int(n.Status.DaemonEndpoints.KubeletEndpoint.Port), nil
}

// startProfiles profiles this process (the API server, and the runtime when it runs
// in-process) and, through the kubelet's /debug/pprof, the agent for at most d; stop ends
// this process's profile, waits for the agent's and fetches the agent's heap profile.
func startProfiles(ctx context.Context, dir string, port int, d time.Duration) (stop func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("profile dir: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "bench.pprof"))
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("profile: %w", err)
	}
	// The agent serves a self-signed certificate and, without a client CA, anyone.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	base := fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/", port)
	fetch := func(url, file string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("fetching %s: %w", url, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("fetching %s: %s", url, resp.Status)
		}
		out, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, resp.Body); err != nil {
			out.Close()
			return fmt.Errorf("fetching %s: %w", url, err)
		}
		return out.Close()
	}
	agentDone := make(chan error, 1)
	go func() { agentDone <- fetch(fmt.Sprintf("%sprofile?seconds=%d", base, int(d.Seconds())), "agent.pprof") }()
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
		if err := <-agentDone; err != nil {
			return err
		}
		return fetch(base+"heap?gc=1", "agent-heap.pprof")
	}, nil
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is another process's user and system CPU time (utime and stime of
// /proc/<pid>/stat, in clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces; the fields after it are space-separated.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
