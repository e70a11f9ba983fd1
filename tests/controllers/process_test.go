package controllers

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	wasmplaneOnce sync.Once
	wasmplaneBin  string
	wasmplaneErr  error
)

// Two `wasmplane controller-manager` processes: SIGKILL the leader (no Lease release) and
// the other takes over once the Lease expires.
func TestControllerManagerProcessesKillLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a Lease to expire")
	}
	wasmplaneOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wasmplane-bin")
		if err != nil {
			wasmplaneErr = err
			return
		}
		wasmplaneBin, wasmplaneErr = testserver.Build(dir, "github.com/wasmplane/wasmplane/cmd/wasmplane")
	})
	if wasmplaneErr != nil {
		t.Fatal(wasmplaneErr)
	}
	e := newBareEnv(t)
	fakeKubelet(t, e)
	procs := map[string]*exec.Cmd{}
	for _, id := range []string{"proc-a", "proc-b"} {
		cmd := exec.Command(wasmplaneBin, "controller-manager", "--kubeconfig", e.srv.KubeconfigPath(), "--identity", id, "--log-level", "error")
		must(t, cmd.Start())
		procs[id] = cmd
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	holder := func(ctx context.Context) string {
		l, err := e.client.CoordinationV1().Leases("kube-system").Get(ctx, "wasmplane-controller-manager", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var leader string
	waitfor.Condition(t, 30*time.Second, "a leader", func(ctx context.Context) (bool, error) {
		leader = holder(ctx)
		return leader != "", nil
	})
	w := watchPods(t, e, "app=kill", func(pods map[string]*corev1.Pod) error {
		if len(pods) > 12 {
			return fmt.Errorf("%d pods > 12", len(pods))
		}
		return nil
	})
	ctx := testCtx(t)
	_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, newDeployment("kill", 6, "img:1"), metav1.CreateOptions{})
	must(t, err)
	waitComplete(t, e, "kill", 60*time.Second)
	must(t, procs[leader].Process.Kill())
	killed := time.Now()
	_ = procs[leader].Wait()
	var next string
	// A killed leader does not release the Lease: the follower may take it once it has seen
	// no renewal for the 15 s lease duration, and it looks every 2 s with client-go's 1.2
	// jitter (up to 4.4 s), both when it last saw a renewal and when it finds expiry.
	const bound = 15*time.Second + 2*4400*time.Millisecond
	waitfor.Condition(t, bound, "takeover within the lease duration and two retry periods", func(ctx context.Context) (bool, error) {
		next = holder(ctx)
		return next != "" && next != leader, nil
	})
	took := time.Since(killed)
	t.Logf("leader %s killed; %s took over after %v", leader, next, took.Round(time.Millisecond))
	scaleDeployment(t, e, "kill", 12)
	waitComplete(t, e, "kill", 60*time.Second)
	if n, err := countPods(ctx, e, "app=kill"); err != nil || n != 12 {
		t.Fatalf("pods = %d (%v), want 12", n, err)
	}
	w.assertClean(t)
}
