package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// TestDrainHonoursDisruptionBudget drains a node whose three ready pods are covered by a
// PodDisruptionBudget needing two of them: kubectl drain evicts one and is refused the
// others until the budget is relaxed, then drains the node. The node has no kubelet: the
// test writes the pods' ready status itself.
func TestDrainHonoursDisruptionBudget(t *testing.T) {
	srv := testserver.Start(t)
	cs := srv.Clientset(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns, node = "drain", "drain-node"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		readyPod(ctx, t, cs, ns, fmt.Sprintf("web-%d", i), node)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptrTo(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBudget(ctx, t, cs, ns, "web", 1)

	// The API first, as client-go sees it.
	err := cs.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "missing", Namespace: ns}})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("evicting a missing pod: %v, want NotFound", err)
	}
	dry := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns}, DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
	if err := cs.CoreV1().Pods(ns).EvictV1(ctx, dry); err != nil {
		t.Fatalf("dry-run eviction: %v", err)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{}); err != nil {
		t.Fatalf("a dry-run eviction removed the pod: %v", err)
	}

	k := &kubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: ns}
	out, err := k.run(t, "", "drain", node, "--force", "--grace-period=0", "--timeout=12s")
	if err == nil {
		t.Fatalf("drain succeeded although the budget allows one eviction:\n%s", out)
	}
	if !strings.Contains(err.Error(), "Cannot evict pod as it would violate the pod's disruption budget") {
		t.Fatalf("drain failed without the budget's message: %v", err)
	}
	left, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 2 {
		t.Fatalf("%d pods left after the blocked drain, want 2 (one evicted)", len(left.Items))
	}
	if got, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil || !got.Spec.Unschedulable {
		t.Fatalf("node not cordoned by drain (%v)", err)
	}
	// The refusal as client-go sees it: 429 with the budget's cause.
	err = cs.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: left.Items[0].Name, Namespace: ns}})
	var se *apierrors.StatusError
	if !apierrors.IsTooManyRequests(err) || !asStatus(err, &se) || se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) == 0 ||
		se.ErrStatus.Details.Causes[0].Type != policyv1.DisruptionBudgetCause {
		t.Fatalf("eviction over the budget: %v, want 429 with a DisruptionBudget cause", err)
	}
	t.Logf("refused: %s (%s)", se.ErrStatus.Message, se.ErrStatus.Details.Causes[0].Message)

	// Relaxed, the budget lets the drain finish.
	patch := []byte(`{"spec":{"minAvailable":0}}`)
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBudget(ctx, t, cs, ns, "web", 2)
	out, err = k.run(t, "", "drain", node, "--force", "--grace-period=0", "--timeout=30s")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "node/"+node+" drained") {
		t.Errorf("drain output %q does not say the node is drained", out)
	}
	left, err = cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(left.Items) != 0 {
		t.Fatalf("pods left after the drain: %v (%v)", left, err)
	}
}

// readyPod creates a pod bound to node and marks it Running and Ready, as a kubelet would.
func readyPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name, node string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example.com/web:1"}}}}
	p, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitBudget waits for the disruption controller to allow want disruptions.
func waitBudget(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, want int32) {
	t.Helper()
	var last policyv1.PodDisruptionBudgetStatus
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		b, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = b.Status
		return b.Status.ObservedGeneration == b.Generation && b.Status.DisruptionsAllowed == want, nil
	})
	if err != nil {
		t.Fatalf("budget %s never allowed %d disruptions: %+v", name, want, last)
	}
}

func asStatus(err error, into **apierrors.StatusError) bool {
	se, ok := err.(*apierrors.StatusError)
	*into = se
	return ok
}

func ptrTo[T any](v T) *T { return &v }
