package controllers

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	e := newBareEnv(t)
	fakeKubelet(t, e)
	type cm struct {
		cancel  context.CancelFunc
		done    chan struct{}
		leading atomic.Bool
	}
	var leaders atomic.Int32
	var overlap atomic.Bool
	start := func(id string) *cm {
		c := &cm{done: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		go func() {
			defer close(c.done)
			_ = server.RunControllerManager(ctx, e.srv.RESTConfig(), server.ControllerManagerOptions{
				Identity: id, Logger: testserver.Logger(),
				OnLeading: func(l bool) {
					c.leading.Store(l)
					if l && leaders.Add(1) > 1 {
						overlap.Store(true)
					}
					if !l {
						leaders.Add(-1)
					}
				},
			})
		}()
		return c
	}
	a, b := start("cm-a"), start("cm-b")
	var once sync.Once
	stopAll := func() {
		once.Do(func() {
			a.cancel()
			b.cancel()
			<-a.done
			<-b.done
		})
	}
	t.Cleanup(stopAll)
	waitfor.Condition(t, 20*time.Second, "a leader", func(context.Context) (bool, error) { return a.leading.Load() || b.leading.Load(), nil })
	leader, follower := a, b
	if b.leading.Load() {
		leader, follower = b, a
	}
	ctx := testCtx(t)
	w := watchPods(t, e, "app=le", func(pods map[string]*corev1.Pod) error {
		if len(pods) > 30 {
			return fmt.Errorf("%d pods > 30", len(pods))
		}
		return nil
	})
	_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, newDeployment("le", 20, "img:1"), metav1.CreateOptions{})
	must(t, err)
	waitComplete(t, e, "le", 60*time.Second)
	if follower.leading.Load() {
		t.Fatal("both instances lead")
	}
	// Stop the leader: the follower must take over within the lease duration.
	stopped := time.Now()
	leader.cancel()
	<-leader.done
	waitfor.Condition(t, 15*time.Second, "follower takes over", func(context.Context) (bool, error) { return follower.leading.Load(), nil })
	t.Logf("takeover after %v", time.Since(stopped).Round(time.Millisecond))
	lease, err := e.client.CoordinationV1().Leases("kube-system").Get(ctx, "wasmplane-controller-manager", metav1.GetOptions{})
	must(t, err)
	if lease.Spec.HolderIdentity == nil || (*lease.Spec.HolderIdentity != "cm-a" && *lease.Spec.HolderIdentity != "cm-b") {
		t.Fatalf("lease holder = %v", lease.Spec.HolderIdentity)
	}
	scaleDeployment(t, e, "le", 30)
	waitComplete(t, e, "le", 60*time.Second)
	if n, err := countPods(ctx, e, "app=le"); err != nil || n != 30 {
		t.Fatalf("pods = %d (%v), want 30", n, err)
	}
	w.assertClean(t)
	if overlap.Load() {
		t.Fatal("two instances led at the same time")
	}
}
