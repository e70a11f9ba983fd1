// Command kubelet measures pod startup latency through the kubelet: pods are created at a
// fixed rate against a node run by `wasmplane agent` (a separate process, so that its RSS
// is the kubelet's alone) on the built-in WASI runtime, and the time from each create to
// the pod being Running and Ready (seen by a watch) is reported as p50/p99, with the
// kubelet's RSS once 110 pods run and at the end.
//
//	go run ./tests/bench/kubelet -pods 200 -rate 20
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/examples/workloads"
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
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *pods, *rate, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, numPods, rate int, warmup bool) error {
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
	fmt.Println("building the workload and the wasmplane binary…")
	mods, err := workloads.Build(ctx, filepath.Join(dir, "wasm"))
	if err != nil {
		return err
	}
	bin := filepath.Join(dir, "wasmplane")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/wasmplane/wasmplane/cmd/wasmplane").CombinedOutput(); err != nil {
		return fmt.Errorf("building wasmplane: %w\n%s", err, out)
	}
	rt, err := wasi.Serve(ctx, wasi.Config{Socket: filepath.Join(dir, "cri.sock"), RootDir: filepath.Join(dir, "runtime"), Logger: quiet})
	if err != nil {
		return fmt.Errorf("starting the runtime: %w", err)
	}
	defer rt.Close()
	if _, err := rt.Images().ImportFile(ctx, mods["sleeper"], "sleeper:latest"); err != nil {
		return fmt.Errorf("importing sleeper: %w", err)
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	agent := exec.CommandContext(agentCtx, bin, "agent", "--kubeconfig", inst.KubeconfigPath(), "--node-name", nodeName,
		"--container-runtime-endpoint", rt.Endpoint(), "--root-dir", filepath.Join(dir, "agent"), "--kubelet-port", "-1",
		"--max-pods", strconv.Itoa(numPods+10), "--log-level", "warn")
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
	rss110 := ""
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
			}
			if n == numPods {
				done <- nil
				return
			}
		}
		done <- errors.New("watch closed")
	}()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
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
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	fmt.Printf("pods: %d at %d/s, all Running after %s\n", numPods, rate, total.Round(time.Millisecond))
	fmt.Printf("startup latency create→Running+Ready: p50 %s  p99 %s  max %s\n",
		pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	if rss110 != "" {
		fmt.Printf("kubelet RSS with 110 pods: %s\n", rss110)
	}
	fmt.Printf("kubelet RSS with %d pods: %s\n", numPods, rss(agent.Process.Pid))
	return nil
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

// rss reads VmRSS of a process.
func rss(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
		}
	}
	return "?"
}
