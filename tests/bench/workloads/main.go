// Command workloads times the DaemonSet and StatefulSet controllers end to end: an
// in-process wasmplane (API server, controllers, scheduler) with N kubelets on the
// built-in WASI runtime, two DaemonSets of the sleeper workload until a pod runs ready on
// every node (the first includes compiling the module on each node), then StatefulSets of R replicas (OrderedReady, then Parallel) until every
// replica is ready. Each figure is the time from the create to the status saying so.
//
//	go run ./tests/bench/workloads -nodes 4 -replicas 10
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/wasmplane/wasmplane/core/kubelet"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/examples/workloads"
	"github.com/wasmplane/wasmplane/runtime/cri/wasi"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

func main() {
	nodes := flag.Int("nodes", 4, "WASI nodes (each a kubelet and a runtime in this process)")
	replicas := flag.Int("replicas", 10, "StatefulSet replicas")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *nodes, int32(*replicas)); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, nodes int, replicas int32) error {
	dir, err := os.MkdirTemp("", "wasmplane-bench-workloads-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mods, err := workloads.Build(ctx, filepath.Join(dir, "wasm"))
	if err != nil {
		return err
	}
	inst, err := server.Start(ctx, server.Config{DataDir: filepath.Join(dir, "server"), Port: 0, Logger: quiet})
	if err != nil {
		return fmt.Errorf("starting wasmplane: %w", err)
	}
	defer inst.Close()
	for i := range nodes {
		stop, err := startNode(ctx, inst, dir, fmt.Sprintf("node-%d", i), mods["sleeper"], quiet)
		if err != nil {
			return err
		}
		defer stop()
	}
	cfg := inst.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := poll(ctx, func(ctx context.Context) (bool, error) {
		n, err := testserver.ReadyNodes(ctx, cs)
		return n == nodes, err
	}); err != nil {
		return fmt.Errorf("waiting for %d nodes: %w", nodes, err)
	}
	fmt.Printf("%d nodes ready in %v\n", nodes, time.Since(start).Round(time.Millisecond))

	tmpl := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sleeper", Image: "sleeper:latest", ImagePullPolicy: corev1.PullIfNotPresent}}}}
	}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	daemonSet := func(name, what string) error {
		start := time.Now()
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DaemonSetSpec{Selector: sel(name), Template: tmpl(name)}}
		if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := poll(ctx, func(ctx context.Context) (bool, error) {
			d, err := cs.AppsV1().DaemonSets("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && d.Status.DesiredNumberScheduled == int32(nodes) && d.Status.NumberAvailable == int32(nodes), err
		}); err != nil {
			return fmt.Errorf("waiting for DaemonSet %s: %w", name, err)
		}
		fmt.Printf("DaemonSet on %d nodes (%s): all pods ready in %v\n", nodes, what, time.Since(start).Round(time.Millisecond))
		return nil
	}
	// The first pods on a node compile the module there; a second DaemonSet shows the
	// controller's and the scheduler's part without that.
	if err := daemonSet("agent", "first pods of the module on each node"); err != nil {
		return err
	}
	if err := daemonSet("agent2", "module already compiled"); err != nil {
		return err
	}

	for _, policy := range []appsv1.PodManagementPolicyType{appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement} {
		name := "db-" + map[appsv1.PodManagementPolicyType]string{appsv1.OrderedReadyPodManagement: "ordered", appsv1.ParallelPodManagement: "parallel"}[policy]
		start := time.Now()
		set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), Selector: sel(name), Template: tmpl(name), ServiceName: name, PodManagementPolicy: policy}}
		if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, set, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := poll(ctx, func(ctx context.Context) (bool, error) {
			s, err := cs.AppsV1().StatefulSets("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && s.Status.ReadyReplicas == replicas, err
		}); err != nil {
			return fmt.Errorf("waiting for StatefulSet %s: %w", name, err)
		}
		el := time.Since(start)
		fmt.Printf("StatefulSet of %d replicas, %s: all ready in %v (%v per replica)\n", replicas, policy, el.Round(time.Millisecond),
			(el / time.Duration(max(replicas, 1))).Round(time.Millisecond))
	}
	return nil
}

// startNode runs a WASI runtime holding the sleeper module and a kubelet named name.
func startNode(ctx context.Context, inst *server.Instance, dir, name, module string, log *slog.Logger) (func(), error) {
	root := filepath.Join(dir, name)
	sock, err := os.MkdirTemp("", "wp-cri-")
	if err != nil {
		return nil, err
	}
	rt, err := wasi.Serve(ctx, wasi.Config{Socket: filepath.Join(sock, "cri.sock"), RootDir: filepath.Join(root, "runtime"), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("starting the WASI runtime of %s: %w", name, err)
	}
	if _, err := rt.Images().ImportFile(ctx, module, "sleeper:latest"); err != nil {
		return nil, errors.Join(fmt.Errorf("importing sleeper on %s: %w", name, err), rt.Close())
	}
	stop, err := server.StartNode(ctx, server.NodeConfig{RESTConfig: inst.RESTConfig(), NodeName: name, RootDir: filepath.Join(root, "node"),
		RuntimeEndpoint: rt.Endpoint(), Port: -1, Logger: log,
		Tune: func(c *kubelet.Config) { c.ResyncPeriod, c.StatusUpdateFrequency = 2*time.Second, time.Second }})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting the kubelet of %s: %w", name, err), rt.Close())
	}
	return func() { stop(); _ = rt.Close(); _ = os.RemoveAll(sock) }, nil
}

func poll(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, cond)
}
