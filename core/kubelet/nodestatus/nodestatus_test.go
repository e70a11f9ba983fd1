package nodestatus

import (
	"context"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func TestRegisterAndReport(t *testing.T) {
	client := fake.NewSimpleClientset() //nolint:staticcheck // merge patches on the fake need the object tracker
	rt := critest.NewFakeRuntimeService()
	r := New(Config{Client: client, Runtime: rt, NodeName: "n1", NodeIP: "10.1.2.3", Port: 12345, RootDir: t.TempDir(), MaxPods: 7,
		Taints: []corev1.Taint{{Key: "dedicated", Value: "wasm", Effect: corev1.TaintEffectNoSchedule}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	if err := r.Register(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[corev1.LabelHostname] != "n1" || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("node = %+v", n.ObjectMeta)
	}
	if n.Status.Capacity.Pods().Value() != 7 || n.Status.Allocatable.Pods().Value() != 7 || n.Status.Capacity.Memory().IsZero() {
		t.Errorf("capacity = %v", n.Status.Capacity)
	}
	if got := n.Status.NodeInfo.ContainerRuntimeVersion; got != "fakeRuntime://0.1.0" {
		t.Errorf("runtime version = %q", got)
	}
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port != 12345 || n.Status.Addresses[0].Address != "10.1.2.3" {
		t.Errorf("endpoint/addresses = %v %v", n.Status.DaemonEndpoints, n.Status.Addresses)
	}
	if _, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Errorf("lease: %v", err)
	}
	// An unchanged status is not written again before the report period.
	before := len(client.Actions())
	if err := r.updateStatus(ctx, n, false); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions()[before:] {
		if a.GetVerb() == "patch" {
			t.Errorf("unchanged status patched")
		}
	}
	// A Ready condition set to Unknown by the node lifecycle controller is reported again.
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].Status = corev1.ConditionUnknown
		}
	}
	before = len(client.Actions())
	if err := r.updateStatus(ctx, n, false); err != nil {
		t.Fatal(err)
	}
	patched := false
	for _, a := range client.Actions()[before:] {
		patched = patched || a.GetVerb() == "patch"
	}
	if !patched {
		t.Error("changed condition not reported")
	}
	// Registering again (a kubelet restart) keeps the node.
	if err := r.Register(ctx); err != nil {
		t.Fatalf("re-register: %v", err)
	}
}
