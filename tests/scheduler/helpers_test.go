// Package scheduler_test runs wasmplane's scheduler against a real in-process API server.
package scheduler_test

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"io"
	"k8s.io/apimachinery/pkg/util/wait"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/wasmplane/wasmplane/core/scheduler"
	"github.com/wasmplane/wasmplane/core/server"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

type env struct {
	client kubernetes.Interface
	sched  *scheduler.Scheduler
	reg    *prometheus.Registry
}

// startEnv starts an API server and a scheduler with cfg (nil = default).
func startEnv(t testing.TB, cfg *scheduler.Configuration) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inst, err := server.Start(ctx, server.Config{DataDir: t.TempDir(), Port: 0, DisableScheduler: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		cancel()
		t.Fatalf("starting server: %v", err)
	}
	rc := inst.RESTConfig()
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	factory := informers.NewSharedInformerFactory(client, 0)
	s, err := scheduler.New(client, factory, scheduler.Config{Configuration: cfg, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.Run(ctx); err != nil {
			t.Errorf("scheduler: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		inst.Close()
	})
	return &env{client: client, sched: s, reg: reg}
}

type nodeSpec struct {
	name        string
	cpu, mem    string
	pods        string
	labels      map[string]string
	taints      []v1.Taint
	unschedulbl bool
}

func makeNode(n nodeSpec) *v1.Node {
	if n.pods == "" {
		n.pods = "110"
	}
	labels := map[string]string{"kubernetes.io/hostname": n.name}
	for k, v := range n.labels {
		labels[k] = v
	}
	rl := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(n.cpu),
		v1.ResourceMemory: resource.MustParse(n.mem),
		v1.ResourcePods:   resource.MustParse(n.pods),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels},
		Spec:       v1.NodeSpec{Taints: n.taints, Unschedulable: n.unschedulbl},
		Status:     v1.NodeStatus{Capacity: rl, Allocatable: rl},
	}
}

func (e *env) createNode(t testing.TB, n nodeSpec) {
	t.Helper()
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), makeNode(n), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node %s: %v", n.name, err)
	}
}

func (e *env) createNamespace(t testing.TB, ns string) {
	t.Helper()
	_, err := e.client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
}

func requests(cpu, mem string) v1.ResourceRequirements {
	rl := v1.ResourceList{}
	if cpu != "" {
		rl[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		rl[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return v1.ResourceRequirements{Requests: rl}
}

func basePod(ns, name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.example/app:1", Resources: requests("100m", "128Mi")}}},
	}
}

func (e *env) createPod(t testing.TB, p *v1.Pod) {
	t.Helper()
	if _, err := e.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", p.Name, err)
	}
}

// waitFor polls cond until it is true or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	// A failing check is retried, not fatal (a Get may race the create); the last error
	// goes into the failure.
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), waitfor.Interval, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

func (e *env) waitBound(t testing.TB, ns, name string, timeout time.Duration) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	waitFor(t, timeout, fmt.Sprintf("pod %s/%s to be bound", ns, name), func() (bool, error) {
		p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Spec.NodeName != "", nil
	})
	return pod
}

func (e *env) waitUnschedulable(t testing.TB, ns, name string, timeout time.Duration) *v1.PodCondition {
	t.Helper()
	var cond *v1.PodCondition
	waitFor(t, timeout, fmt.Sprintf("pod %s/%s to be Unschedulable", ns, name), func() (bool, error) {
		p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for i := range p.Status.Conditions {
			c := &p.Status.Conditions[i]
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				cond = c
				return true, nil
			}
		}
		return false, nil
	})
	return cond
}

// counter reads a counter from the registry (0 if absent).
func (e *env) counter(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

func metavOpts() metav1.CreateOptions { return metav1.CreateOptions{} }
