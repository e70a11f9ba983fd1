package e2e

import (
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// TestLifecycle covers the semantics beyond plain CRUD: status and scale subresources,
// pods/binding, graceful pod deletion, finalizers and namespace termination.
func TestLifecycle(t *testing.T) {
	srv := testserver.StartAPI(t)
	tests := []struct {
		name string
		run  func(t *testing.T, cs kubernetes.Interface, ns string)
	}{
		{"pod status", testPodStatus},
		{"node status", testNodeStatus},
		{"deployment status and scale", testDeploymentStatusAndScale},
		{"replicaset status and scale", testReplicaSetStatusAndScale},
		{"pod binding", testPodBinding},
		{"graceful pod deletion", testGracefulPodDeletion},
		{"finalizers", testFinalizers},
		{"namespace termination", testNamespaceTermination},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			cs := srv.Clientset(t, m.json)
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, cs, newNamespace(t, cs, "life-"+m.name)) })
			}
		})
	}
}

func testPodStatus(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	pods := cs.CoreV1().Pods(ns)
	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: podSpec()}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) // a spec change through /status must be ignored
	out, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if out.Status.Phase != corev1.PodRunning || out.Spec.ActiveDeadlineSeconds != nil {
		t.Fatalf("status update: phase %q activeDeadlineSeconds %v; want Running and spec untouched", out.Status.Phase, out.Spec.ActiveDeadlineSeconds)
	}
	out.Status.Phase = corev1.PodFailed // a status change through the main resource must be ignored
	out.Labels = map[string]string{"x": "y"}
	out, err = pods.Update(ctx, out, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if out.Status.Phase != corev1.PodRunning || out.Labels["x"] != "y" {
		t.Fatalf("main update: phase %q labels %v; want Running kept and label set", out.Status.Phase, out.Labels)
	}
	out, err = pods.Patch(ctx, "p", types.MergePatchType, []byte(`{"status":{"message":"patched"}}`), metav1.PatchOptions{}, "status")
	if err != nil || out.Status.Message != "patched" {
		t.Fatalf("status patch: %v (message %q)", err, out.Status.Message)
	}
}

func testNodeStatus(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	nodes := cs.CoreV1().Nodes()
	name := "node-" + ns
	node, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = nodes.Delete(ctxFor(t), name, metav1.DeleteOptions{}) })
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	node.Spec.Unschedulable = true
	out, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if len(out.Status.Conditions) != 1 || out.Spec.Unschedulable {
		t.Fatalf("status update: conditions %v unschedulable %v; want 1 condition and spec untouched", out.Status.Conditions, out.Spec.Unschedulable)
	}
}

func testDeploymentStatusAndScale(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	deps := cs.AppsV1().Deployments(ns)
	d, err := deps.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}}, Template: podTemplate("d")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if d.Generation != 1 {
		t.Fatalf("generation = %d, want 1", d.Generation)
	}
	// A deployment controller may write status too: retry on conflict, check our answer.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := deps.Get(ctx, "d", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.ObservedGeneration, cur.Status.Replicas = 1, 1
		d, err = deps.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil || d.Status.ObservedGeneration != 1 || d.Status.Replicas != 1 || d.Generation != 1 {
		t.Fatalf("update status: %v (status %+v generation %d)", err, d.Status, d.Generation)
	}
	scale, err := deps.GetScale(ctx, "d", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if scale.Spec.Replicas != 1 || scale.Status.Selector != "app=d" {
		t.Fatalf("scale = %+v", scale)
	}
	scale.Spec.Replicas = 3
	if _, err := deps.UpdateScale(ctx, "d", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	d, err = deps.Get(ctx, "d", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 3 || d.Generation != 2 {
		t.Fatalf("after scale: %v replicas %v generation %d; want 3 and 2", err, d.Spec.Replicas, d.Generation)
	}
	// The scale's resourceVersion is a precondition like any other.
	scale.Spec.Replicas = 5
	if _, err := deps.UpdateScale(ctx, "d", scale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update scale: got %v, want Conflict", err)
	}
	// kubectl scale patches the subresource.
	for _, pt := range []types.PatchType{types.MergePatchType, types.StrategicMergePatchType} {
		if _, err := deps.Patch(ctx, "d", pt, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{}, "scale"); err != nil {
			t.Fatalf("%s patch of scale: %v", pt, err)
		}
	}
	if _, err := deps.Patch(ctx, "d", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/replicas","value":6}]`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("json patch of scale: %v", err)
	}
	if d, err = deps.Get(ctx, "d", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 6 {
		t.Fatalf("after patching scale: %v replicas %v, want 6", err, d.Spec.Replicas)
	}
}

func testReplicaSetStatusAndScale(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	rss := cs.AppsV1().ReplicaSets(ns)
	rs, err := rss.Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs"}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rs"}}, Template: podTemplate("rs")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := rss.Get(ctx, "rs", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Replicas, cur.Status.ReadyReplicas = 2, 1
		cur.Spec.Replicas = ptr.To[int32](7) // a spec change through /status must be ignored
		rs, err = rss.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil || rs.Status.ReadyReplicas != 1 || *rs.Spec.Replicas != 2 {
		t.Fatalf("update status: %v (status %+v replicas %d)", err, rs.Status, *rs.Spec.Replicas)
	}
	out, err := rss.UpdateScale(ctx, "rs", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}, metav1.UpdateOptions{})
	if err != nil || out.Spec.Replicas != 0 {
		t.Fatalf("update scale: %v (%+v)", err, out)
	}
	rs, err = rss.Get(ctx, "rs", metav1.GetOptions{})
	if err != nil || *rs.Spec.Replicas != 0 {
		t.Fatalf("after scale: %v replicas %v", err, rs.Spec.Replicas)
	}
}

func testPodBinding(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	pods := cs.CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: podSpec()}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	bind := func(node string) error {
		return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	}
	if err := bind("node-a"); err != nil {
		t.Fatalf("bind: %v", err)
	}
	pod, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName != "node-a" {
		t.Fatalf("after bind: %v nodeName %q", err, pod.Spec.NodeName)
	}
	if err := bind("node-b"); !apierrors.IsConflict(err) {
		t.Fatalf("second bind: got %v, want Conflict", err)
	}
}

func testGracefulPodDeletion(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	pods := cs.CoreV1().Pods(ns)
	spec := podSpec()
	spec.NodeName = "node-a"
	if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	pod, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("a bound pod must outlive a graceful delete: %v", err)
	}
	if pod.DeletionTimestamp == nil || pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds != corev1.DefaultTerminationGracePeriodSeconds {
		t.Fatalf("after graceful delete: deletionTimestamp %v grace %v", pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds)
	}
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatalf("delete with grace 0: %v", err)
	}
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete with grace 0: get = %v, want NotFound", err)
	}
}

func testFinalizers(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	cms := cs.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "f", Finalizers: []string{"example.com/keep"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := cms.Delete(ctx, "f", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	cm, err := cms.Get(ctx, "f", metav1.GetOptions{})
	if err != nil || cm.DeletionTimestamp == nil {
		t.Fatalf("object with a finalizer after delete: %v deletionTimestamp %v; want kept and marked", err, cm)
	}
	cm.Finalizers = append(cm.Finalizers, "example.com/new")
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("adding a finalizer while deleting: got %v, want Invalid", err)
	}
	if _, err := cms.Patch(ctx, "f", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("removing the finalizer: %v", err)
	}
	if _, err := cms.Get(ctx, "f", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the last finalizer went: get = %v, want NotFound", err)
	}
}

func testNamespaceTermination(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	nss := cs.CoreV1().Namespaces()
	// A finalizer of our own holds the namespace in Terminating whatever the namespace
	// controller does with its content.
	if _, err := nss.Patch(ctx, ns, types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("adding a finalizer: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create in active namespace: %v", err)
	}
	if err := nss.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	got, err := nss.Get(ctx, ns, metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.NamespaceTerminating || got.DeletionTimestamp == nil {
		t.Fatalf("deleted namespace: %v phase %q; want Terminating with deletionTimestamp", err, got.Status.Phase)
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("create in terminating namespace: got %v, want 403 Forbidden", err)
	}
	// Emptying spec.finalizers through /finalize (ours, or the namespace controller's)
	// and dropping our finalizer lets the namespace go.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nss.Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Finalizers = nil
		_, err = nss.Finalize(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("finalize: %v", err)
	}
	if _, err := nss.Patch(ctx, ns, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("removing the finalizer: %v", err)
	}
	if _, err := nss.Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("finalized namespace without finalizers: get = %v, want NotFound", err)
	}
}
