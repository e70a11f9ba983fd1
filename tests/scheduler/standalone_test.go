package scheduler_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler"
	"github.com/wasmplane/wasmplane/core/server"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// TestPreemption: a high-priority pod that fits nowhere evicts the lower-priority pod and
// is bound to the freed node (nominatedNodeName on the way).
func TestPreemption(t *testing.T) {
	e := startEnv(t, nil)
	e.createNode(t, nodeSpec{name: "only", cpu: "2", mem: "4Gi"})
	const ns = "preempt"
	e.createNamespace(t, ns)
	// Priorities come from PriorityClasses: the Priority admission plugin refuses a pod
	// that sets spec.priority itself, as Kubernetes does.
	for name, value := range map[string]int32{"low": 1, "high": 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := e.client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	victim := basePod(ns, "victim")
	victim.Spec.PriorityClassName = "low"
	victim.Spec.Containers[0].Resources = requests("1500m", "1Gi")
	// No kubelet runs here to finish a graceful deletion: let the eviction be immediate.
	zero := int64(0)
	victim.Spec.TerminationGracePeriodSeconds = &zero
	e.createPod(t, victim)
	e.waitBound(t, ns, "victim", 20*time.Second)

	pre := basePod(ns, "preemptor")
	pre.Spec.PriorityClassName = "high"
	pre.Spec.Containers[0].Resources = requests("1500m", "1Gi")
	e.createPod(t, pre)
	got := e.waitBound(t, ns, "preemptor", 30*time.Second)
	if got.Spec.NodeName != "only" {
		t.Fatalf("preemptor on %q", got.Spec.NodeName)
	}
	if _, err := e.client.CoreV1().Pods(ns).Get(context.Background(), "victim", metav1.GetOptions{}); err == nil {
		t.Fatal("victim was not evicted")
	}
}

// TestStandaloneWithLeaderElection runs `wasmplane scheduler`'s code path: its own
// client, a Lease, metrics over HTTP.
func TestStandaloneWithLeaderElection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	inst, err := server.Start(ctx, server.Config{DataDir: t.TempDir(), Port: 0, DisableScheduler: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	client, err := kubernetes.NewForConfig(inst.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := scheduler.DefaultConfiguration()
	cfg.LeaderElection.ResourceName = "wasmplane-scheduler-test"
	addrCh := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := scheduler.RunStandalone(ctx, inst.RESTConfig(), scheduler.StandaloneOptions{
			Configuration: cfg, Logger: quiet, MetricsAddress: "127.0.0.1:0", Identity: "test-1",
			OnListening: func(a string) { addrCh <- a },
		})
		if err != nil {
			t.Errorf("RunStandalone: %v", err)
		}
	}()
	defer wg.Wait()
	defer cancel()
	e := &env{client: client}
	e.createNode(t, nodeSpec{name: "n1", cpu: "4", mem: "8Gi"})
	e.createNamespace(t, "standalone")
	e.createPod(t, basePod("standalone", "p"))
	e.waitBound(t, "standalone", "p", 30*time.Second)

	lease, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "wasmplane-scheduler-test", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "test-1" {
		t.Fatalf("lease holder %v", lease.Spec.HolderIdentity)
	}
	addr := <-addrCh
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{
		`scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1`,
		"scheduler_scheduling_attempt_duration_seconds_bucket",
		`scheduler_pending_pods{queue="active"}`,
	} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	_ = v1.PodScheduled
}

// TestStandaloneStandsAgainAfterLosingLease: a scheduler whose Lease is taken from it (as
// when it cannot renew while etcd changes leader) stops scheduling, keeps running as a
// candidate, takes the Lease back once the other holder's expires and schedules again.
func TestStandaloneStandsAgainAfterLosingLease(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	inst, err := server.Start(ctx, server.Config{DataDir: t.TempDir(), Port: 0, DisableScheduler: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	client, err := kubernetes.NewForConfig(inst.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	const lease = "wasmplane-scheduler-restand"
	cfg := scheduler.DefaultConfiguration()
	cfg.LeaderElection.ResourceName = lease
	cfg.LeaderElection.LeaseDuration = metav1.Duration{Duration: 2 * time.Second}
	cfg.LeaderElection.RenewDeadline = metav1.Duration{Duration: 1500 * time.Millisecond}
	cfg.LeaderElection.RetryPeriod = metav1.Duration{Duration: 200 * time.Millisecond}
	done := make(chan error, 1)
	go func() {
		done <- scheduler.RunStandalone(ctx, inst.RESTConfig(), scheduler.StandaloneOptions{Configuration: cfg, Logger: quiet, Identity: "restand-1"})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunStandalone: %v", err)
		}
	}()
	e := &env{client: client}
	e.createNode(t, nodeSpec{name: "n1", cpu: "4", mem: "8Gi"})
	e.createNamespace(t, "restand")
	e.createPod(t, basePod("restand", "before"))
	e.waitBound(t, "restand", "before", 30*time.Second)

	// Another identity takes the Lease, as a rival would after this holder missed renewals.
	holder := func(ctx context.Context) string {
		l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		rival := "rival"
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = &rival, &now, &now
		_, err = client.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("taking the Lease: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("RunStandalone returned after losing its Lease: %v", err)
	default:
	}
	// The rival never renews: the scheduler must take the Lease back and schedule again.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return holder(ctx) == "restand-1", nil
	})
	if err != nil {
		t.Fatalf("the scheduler did not stand again (holder %q): %v", holder(ctx), err)
	}
	e.createPod(t, basePod("restand", "after"))
	e.waitBound(t, "restand", "after", 30*time.Second)
}
