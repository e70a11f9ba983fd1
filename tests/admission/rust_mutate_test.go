package admission_test

import (
	"context"
	"testing"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRustMutate runs the Rust label-injector (examples/plugins/rust, built from source
// with rustc) as a namespaced mutating WasmPlugin through a real server: a pod created in
// its namespace gets the label and toleration, a dry run shows them and stores nothing,
// and a pod in another namespace is left alone. A missing toolchain skips locally and
// fails under CI.
func TestRustMutate(t *testing.T) {
	mod := wasmtest.Rust(t, "label-injector")
	e := start(t)
	ctx := context.Background()
	const ns = "rust-mutate"
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.apply(t, ns, "inject", e.push(t, mod), []wasmv1.Hook{wasmv1.HookMutate},
		`{"labels":{"injected-by":"rust"},"toleration":{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}}`, wasmv1.Fail)
	want := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "wasm", Effect: corev1.TaintEffectNoSchedule}
	mutated := func(t *testing.T, p *corev1.Pod) {
		t.Helper()
		if p.Labels["injected-by"] != "rust" {
			t.Fatalf("labels %v, want injected-by=rust", p.Labels)
		}
		for _, tol := range p.Spec.Tolerations {
			if tol.MatchToleration(&want) {
				return
			}
		}
		t.Fatalf("tolerations %+v lack %+v", p.Spec.Tolerations, want)
	}

	t.Run("created pod is mutated", func(t *testing.T) {
		p, err := e.cs.CoreV1().Pods(ns).Create(ctx, pod("web", map[string]string{"app": "web"}, "hello:1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mutated(t, p)
		if p.Labels["app"] != "web" {
			t.Fatalf("labels %v: the pod's own label was lost", p.Labels)
		}
		stored, err := e.cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mutated(t, stored)
		steps := e.podTrace(t, ns, "web")
		if !hasStep(steps, ns+"/inject", "mutate: patched", "") {
			t.Fatalf("trace lacks the plugin's patch: %+v", steps)
		}
	})

	t.Run("dry run shows the mutation and stores nothing", func(t *testing.T) {
		p, err := e.cs.CoreV1().Pods(ns).Create(ctx, pod("dry", nil, "hello:1"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		mutated(t, p)
		if _, err := e.cs.CoreV1().Pods(ns).Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a dry-run pod was stored: %v", err)
		}
	})

	t.Run("other namespaces are left alone", func(t *testing.T) {
		p, err := e.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("plain", nil, "hello:1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.Labels["injected-by"]; ok {
			t.Fatalf("labels %v: a namespaced plugin mutated a pod of another namespace", p.Labels)
		}
	})
}
