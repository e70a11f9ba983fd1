package nodelifecycle

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/disruptiontarget"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func TestEvictionTime(t *testing.T) {
	added := time.Unix(1000, 0)
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: added}}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: added}}
	secs := func(s int64) *int64 { return &s }
	tol := func(key string, s *int64) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s}
	}
	tests := []struct {
		name   string
		tols   []corev1.Toleration
		taints []corev1.Taint
		evict  bool
		at     time.Time
	}{
		{name: "no toleration: now", taints: []corev1.Taint{unreachable}, evict: true},
		{name: "tolerated 300s", tols: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(300))}, taints: []corev1.Taint{unreachable}, evict: true, at: added.Add(300 * time.Second)},
		{name: "tolerated forever", tols: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, nil)}, taints: []corev1.Taint{unreachable}},
		{name: "one of two taints untolerated", tols: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, nil)}, taints: []corev1.Taint{unreachable, notReady}, evict: true},
		{name: "shortest wins", tols: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(60)), tol("", secs(30))}, taints: []corev1.Taint{unreachable}, evict: true, at: added.Add(30 * time.Second)},
		{name: "NoSchedule taints do not evict", taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoSchedule}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			at, evict := EvictionTime(&corev1.Pod{Spec: corev1.PodSpec{Tolerations: tc.tols}}, tc.taints)
			if evict != tc.evict || !at.Equal(tc.at) {
				t.Errorf("got %v %v, want %v %v", evict, at, tc.evict, tc.at)
			}
		})
	}
}

func TestUnrenewedLeaseMarksNodeAndEvicts(t *testing.T) {
	start := time.Now()
	renew := metav1.NewMicroTime(start)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(start)}}}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: corev1.NamespaceNodeLease}, Spec: coordinationv1.LeaseSpec{RenewTime: &renew}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}, Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	client := fake.NewSimpleClientset(node, lease, pod) //nolint:staticcheck // NewClientset needs apply configurations for informers to sync
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, Options{GracePeriod: 40 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	// The grace period counts from when the controller first saw the renewal.
	c.Sync(ctx, start)
	c.Sync(ctx, start.Add(30*time.Second))
	if n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); len(n.Spec.Taints) != 0 {
		t.Fatalf("healthy node tainted: %v", n.Spec.Taints)
	}
	c.Sync(ctx, start.Add(41*time.Second))
	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if rc := readyCondition(n); rc == nil || rc.Status != corev1.ConditionUnknown || rc.Reason != "NodeStatusUnknown" {
		t.Fatalf("Ready = %+v", rc)
	}
	effects := map[corev1.TaintEffect]bool{}
	for _, tt := range n.Spec.Taints {
		if tt.Key == corev1.TaintNodeUnreachable {
			effects[tt.Effect] = true
		}
	}
	if !effects[corev1.TaintEffectNoExecute] || !effects[corev1.TaintEffectNoSchedule] {
		t.Fatalf("taints = %v", n.Spec.Taints)
	}
	// The informer must see the taint before the taint manager acts on it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cached, _ := c.nodes.Get("n1")
		if len(cached.Spec.Taints) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("informer never saw the taints")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Sync(ctx, start.Add(42*time.Second))
	var deleted, patched, disrupted bool
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			deleted = true
		}
		if pa, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "status" {
			if strings.Contains(string(pa.GetPatch()), disruptiontarget.ReasonTaint) {
				// As Kubernetes' taint manager: the condition first, so the pod's owner
				// sees why it went.
				disrupted = !deleted
			} else {
				patched = true
			}
		}
	}
	if !deleted || !patched || !disrupted {
		t.Errorf("pod evicted=%v marked not ready=%v marked a disruption target before its deletion=%v", deleted, patched, disrupted)
	}
}
