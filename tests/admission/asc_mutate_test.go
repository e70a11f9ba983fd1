package admission_test

import (
	"context"
	"slices"
	"testing"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestASCMutate runs the AssemblyScript and the C label-injector examples as mutating
// WasmPlugins on pod creates through a real server (WASM mutation in each SDK
// language): a created pod carries the injected label and toleration, and a dry run
// shows them without storing the pod. A missing toolchain skips locally and fails under CI.
func TestASCMutate(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	const config = `{"labels":{"injected-by":"wasm","example.com/lang":"asc"},"toleration":{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}}`
	want := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "wasm", Effect: corev1.TaintEffectNoSchedule}
	check := func(t *testing.T, p *corev1.Pod) {
		t.Helper()
		if p.Labels["injected-by"] != "wasm" || p.Labels["example.com/lang"] != "asc" || p.Labels["app"] != "web" {
			t.Fatalf("labels %v, want app=web plus the injected ones", p.Labels)
		}
		if !slices.Contains(p.Spec.Tolerations, want) {
			t.Fatalf("tolerations %+v, want %+v among them", p.Spec.Tolerations, want)
		}
	}
	for _, lang := range []wasmtest.Language{{Name: "c", Build: wasmtest.C}, {Name: "assemblyscript", Build: wasmtest.AssemblyScript}} {
		t.Run(lang.Name, func(t *testing.T) {
			mod := lang.Build(t, "label-injector")
			ns := "asc-" + lang.Name
			if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.apply(t, ns, "inject", e.push(t, mod), []wasmv1.Hook{wasmv1.HookMutate}, config, wasmv1.Fail)

			p, err := e.cs.CoreV1().Pods(ns).Create(ctx, pod("web", map[string]string{"app": "web"}, "hello:1"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			check(t, p)
			stored, err := e.cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			check(t, stored)

			dry, err := e.cs.CoreV1().Pods(ns).Create(ctx, pod("dry", map[string]string{"app": "web"}, "hello:1"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Fatal(err)
			}
			check(t, dry)
			if _, err := e.cs.CoreV1().Pods(ns).Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("a dry-run pod was stored: %v", err)
			}
		})
	}
}
