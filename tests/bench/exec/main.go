// Command exec measures `kubectl exec` round trips against wasmplane: an in-process API
// server, the built-in WASI runtime and a kubelet run a toolbox pod, then a trivial command
// (`toolbox true`) is executed -n times each through CRI ExecSync (the runtime alone),
// client-go's WebSocket executor (what
// kubectl 1.37 uses), its SPDY executor, and the real kubectl binary (a process per exec,
// so its start-up is included). Each path's p50 and p99 are printed.
//
//	go run ./tests/bench/exec -n 200
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
	"time"

	"github.com/wasmplane/wasmplane/core/kubelet"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/examples/workloads"
	"github.com/wasmplane/wasmplane/runtime/cri/wasi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	n := flag.Int("n", 200, "execs per path")
	kubectl := flag.Bool("kubectl", true, "also time the real kubectl binary (built from tests/cmd/kubectl)")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *n, *kubectl); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int, withKubectl bool) error {
	dir, err := os.MkdirTemp("", "wasmplane-exec-bench-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.DiscardHandler)
	inst, err := server.Start(ctx, server.Config{DataDir: filepath.Join(dir, "server"), Port: 0, DisableControllers: true, DisableScheduler: true, Logger: quiet})
	if err != nil {
		return fmt.Errorf("starting the API server: %w", err)
	}
	defer inst.Close()
	fmt.Println("building the workloads…")
	mods, err := workloads.Build(ctx, filepath.Join(dir, "wasm"))
	if err != nil {
		return err
	}
	rt, err := wasi.Serve(ctx, wasi.Config{Socket: filepath.Join(dir, "cri.sock"), RootDir: filepath.Join(dir, "runtime"), Logger: quiet})
	if err != nil {
		return fmt.Errorf("starting the runtime: %w", err)
	}
	defer rt.Close()
	if _, err := rt.Images().ImportFile(ctx, mods["toolbox"], "toolbox:latest"); err != nil {
		return fmt.Errorf("importing toolbox: %w", err)
	}
	cfg := inst.RESTConfig()
	stopNode, err := server.StartNode(ctx, server.NodeConfig{RESTConfig: cfg, NodeName: "bench-node", RootDir: filepath.Join(dir, "node"),
		RuntimeEndpoint: rt.Endpoint(), Port: -1, Logger: quiet})
	if err != nil {
		return fmt.Errorf("starting the kubelet: %w", err)
	}
	defer stopNode()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "bench-node",
		Containers: []corev1.Container{{Name: "main", Image: "toolbox:latest", Args: []string{"sleep", "1h"}, ImagePullPolicy: corev1.PullIfNotPresent}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the pod: %w", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "box", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		return fmt.Errorf("waiting for the pod to run: %w", err)
	}
	u := cs.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("box").SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "main", Command: []string{"toolbox", "true"}, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
	executors := []struct {
		name string
		new  func() (remotecommand.Executor, error)
	}{
		{"client-go WebSocket (v5.channel.k8s.io)", func() (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(rest.CopyConfig(cfg), "GET", u.String())
		}},
		{"client-go SPDY (v5.channel.k8s.io)", func() (remotecommand.Executor, error) {
			return remotecommand.NewSPDYExecutor(rest.CopyConfig(cfg), "POST", u)
		}},
	}
	// The runtime's own cost: the same command through CRI ExecSync, no streams or proxies.
	rs, _, err := kubelet.Connect(ctx, rt.Endpoint())
	if err != nil {
		return err
	}
	defer rs.Close(context.Background())
	ctrs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil || len(ctrs) != 1 {
		return fmt.Errorf("finding the running container: %d found, %v", len(ctrs), err)
	}
	d, err := timeN(n+1, func() error {
		_, _, err := rs.ExecSync(ctx, ctrs[0].Id, []string{"toolbox", "true"}, 10*time.Second)
		return err
	})
	if err != nil {
		return fmt.Errorf("ExecSync: %w", err)
	}
	report("CRI ExecSync (runtime only)", d[1:])
	for _, e := range executors {
		d, err := timeN(n+1, func() error {
			ex, err := e.new()
			if err != nil {
				return err
			}
			return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
		})
		if err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		report(e.name, d[1:]) // the first exec compiled nothing but warmed connections up
	}
	if !withKubectl {
		return nil
	}
	bin := filepath.Join(dir, "kubectl")
	fmt.Println("building kubectl…")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/wasmplane/wasmplane/tests/cmd/kubectl").CombinedOutput(); err != nil {
		return fmt.Errorf("building kubectl: %w\n%s", err, out)
	}
	home := filepath.Join(dir, "home")
	d, err = timeN(n+1, func() error {
		cmd := exec.CommandContext(ctx, bin, "--kubeconfig", inst.KubeconfigPath(), "-n", "default", "exec", "box", "--", "toolbox", "true")
		cmd.Env = append(os.Environ(), "HOME="+home)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kubectl exec: %w", err)
	}
	report("kubectl exec (a process per exec)", d[1:])
	return nil
}

// timeN runs f n times in a row and returns each run's duration.
func timeN(n int, f func() error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	if len(out) == 0 {
		return nil, errors.New("no runs")
	}
	return out, nil
}

func report(name string, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	fmt.Printf("%-40s n=%d  p50 %6.1f ms  p99 %6.1f ms\n", name, len(d), ms(q(0.50)), ms(q(0.99)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
