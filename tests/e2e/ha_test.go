package e2e

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestHAFailover: with 3 etcd members, 2 API servers, 2 controller-managers and 2
// schedulers, kill -9 the etcd raft leader, then the scheduler leader, then the
// controller-manager leader; after each, a scale-up is reconciled (pods created) and
// scheduled (pods bound) within 30 s, no component has exited (a leader that could not
// renew while etcd changed leader stands again instead), and a killed leader's standby
// takes its Lease within 15 s.
func TestHAFailover(t *testing.T) {
	began := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	root := t.TempDir()
	h := startHAPlane(t, root)
	// One agent: a Ready node to schedule on. Its pods need not run (no image is imported):
	// the test asks for pods created and bound.
	agentRoot := filepath.Join(root, "agent-node-a")
	startDaemon(t, root, "agent-node-a", "agent", "--kubeconfig", h.kubeconfig(t, h.dirB, "system:node:node-a", "system:nodes"),
		"--node-name", "node-a", "--root-dir", agentRoot, "--kubelet-port", "-1", "--client-ca-file", filepath.Join(h.dirA, "pki", "ca.crt"), "--log-level", "warn")
	cs := h.c.admin
	waitfor.Condition(t, 60*time.Second, "node-a Ready", func(ctx context.Context) (bool, error) { return nodeReady(ctx, cs, "node-a"), nil })
	var cmLeader, schedLeader component
	waitfor.Condition(t, 60*time.Second, "a controller-manager and a scheduler leader", func(ctx context.Context) (bool, error) {
		var ok1, ok2 bool
		cmLeader, ok1 = leader(ctx, cs, "wasmplane-controller-manager", h.cms)
		schedLeader, ok2 = leader(ctx, cs, "kube-scheduler", h.scheds)
		return ok1 && ok2, nil
	})
	phase(fmt.Sprintf("control plane up; leaders %s and %s", cmLeader.d.name, schedLeader.d.name))

	const ns = "default"
	replicas := int32(1)
	if _, err := h.csB.AppsV1().Deployments(ns).Create(testCtx(t, 10*time.Second), haDeployment(replicas), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Deployment: %v", err)
	}
	waitScheduled(t, cs, ns, replicas)
	killed := map[*daemon]bool{}
	alive := func(what string) {
		t.Helper()
		for _, c := range append(append([]component{}, h.cms...), h.scheds...) {
			if c.d.exited() && !killed[c.d] {
				t.Fatalf("%s exited after %s: %s", c.d.name, what, tail(c.d.log, 10))
			}
		}
	}
	// Each fault is followed by a scale-up through the other API server: the
	// controller-manager leader must create the pod and the scheduler leader bind it.
	scale := func(what string) {
		t.Helper()
		replicas++
		start := time.Now()
		waitfor.Condition(t, 10*time.Second, "scaling the Deployment", func(ctx context.Context) (bool, error) {
			_, err := h.csB.AppsV1().Deployments(ns).Patch(ctx, "ha", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas), metav1.PatchOptions{})
			return err == nil, nil
		})
		waitScheduled(t, cs, ns, replicas)
		alive(what)
		phase(fmt.Sprintf("after %s: scaled to %d, reconciled and scheduled in %.1fs", what, replicas, time.Since(start).Seconds()))
	}

	// 1. The etcd raft leader.
	victim := etcdLeader(t, h.etcdClientURLs)
	h.etcd[victim].kill9(t)
	phase("killed the etcd leader " + h.etcdNames[victim])
	scale("the etcd leader's kill")
	h.etcd[victim] = startDaemon(t, root, h.etcdNames[victim]+"-restarted", h.etcdArgs[victim]...)

	// 2. The scheduler leader, 3. the controller-manager leader: the standby takes the Lease.
	for _, step := range []struct {
		lease string
		cands []component
	}{{"kube-scheduler", h.scheds}, {"wasmplane-controller-manager", h.cms}} {
		var current component
		waitfor.Condition(t, 30*time.Second, "a "+step.lease+" leader", func(ctx context.Context) (bool, error) {
			var ok bool
			current, ok = leader(ctx, cs, step.lease, step.cands)
			return ok, nil
		})
		standby := otherOf(step.cands, current)
		current.d.kill9(t)
		killed[current.d] = true
		killedAt := time.Now()
		waitfor.Condition(t, 15*time.Second, standby.d.name+" to take "+step.lease+" within 15 s", func(ctx context.Context) (bool, error) {
			l, ok := leader(ctx, cs, step.lease, step.cands)
			return ok && l.identity == standby.identity, nil
		})
		took := time.Since(killedAt)
		phase(fmt.Sprintf("killed %s; %s took the Lease after %.1fs", current.d.name, standby.d.name, took.Seconds()))
		scale("the kill of " + current.d.name)
	}
}

// haDeployment is n pods of an image no node has: they are created and scheduled, which
// is what the test checks, whether or not they start.
func haDeployment(n int32) *appsv1.Deployment {
	labels := map[string]string{"app": "ha"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "ha"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{{Name: "c", Image: "absent:1"}},
				},
			},
		},
	}
}

// waitScheduled waits up to 30 s for the Deployment "ha" to be reconciled (status of the
// current generation showing n replicas) with n live pods, all bound to a node.
func waitScheduled(t *testing.T, cs kubernetes.Interface, ns string, n int32) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "ha", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.Replicas != n || d.Status.UpdatedReplicas != n {
			last = fmt.Sprintf("status %+v", d.Status)
			return false, nil
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=ha"})
		if err != nil {
			return false, nil
		}
		bound := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
				bound++
			}
		}
		last = fmt.Sprintf("%d of %d pods bound", bound, len(pods.Items))
		return bound == int(n) && len(pods.Items) == int(n), nil
	})
	if err != nil {
		t.Fatalf("waiting 30s for %d pods of Deployment ha created and scheduled (last seen: %s): %v", n, last, err)
	}
}

// etcdLeader is the index of the member of urls that leads now.
func etcdLeader(t *testing.T, urls []string) int {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	found := -1
	waitfor.Condition(t, 30*time.Second, "the etcd leader", func(ctx context.Context) (bool, error) {
		for i, u := range urls {
			st, err := c.Status(ctx, u)
			if err == nil && st.Header.MemberId == st.Leader {
				found = i
				return true, nil
			}
		}
		return false, nil
	})
	return found
}
