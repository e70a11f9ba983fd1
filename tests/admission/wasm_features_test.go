package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// warningCollector is a client-go WarningHandler that keeps every Warning header text.
type warningCollector struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningCollector) HandleWarningHeader(code int, _ string, text string) {
	if code != 299 {
		return
	}
	w.mu.Lock()
	w.msgs = append(w.msgs, text)
	w.mu.Unlock()
}

// take returns the warnings collected so far and forgets them.
func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// warningClient is a clientset whose responses' warnings land in the returned collector.
func (e *env) warningClient(t testing.TB) (kubernetes.Interface, *warningCollector) {
	t.Helper()
	w := &warningCollector{}
	cfg := rest.CopyConfig(e.cfg)
	cfg.WarningHandler = w
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, w
}

// traceStep is one step of pods/trace.
type traceStep struct {
	Component, Step, Result, Detail string
}

// podTrace reads a pod's trace (the journey recorded at its creation).
func (e *env) podTrace(t testing.TB, ns, name string) []traceStep {
	t.Helper()
	resp, err := e.hc.Get(fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s/trace", e.url, ns, name))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pods/trace: %d %s", resp.StatusCode, body)
	}
	var tr struct{ Steps []traceStep }
	if err := json.Unmarshal(body, &tr); err != nil {
		t.Fatalf("pods/trace: %v", err)
	}
	return tr.Steps
}

func hasStep(steps []traceStep, step, result, detail string) bool {
	return slices.ContainsFunc(steps, func(s traceStep) bool {
		return s.Component == "admission" && s.Step == step && s.Result == result && (detail == "" || s.Detail == detail)
	})
}

const ownerConfig = `{"label":"team","annotation":"example.com/owner"}`

// TestWasmWarningsAndReinvocation drives the owner-annotator example (a mutating plugin
// that warns when a pod has no team label, and copies the label into an annotation with an
// audit annotation) through the server: its warnings reach the client as Warning headers,
// its audit annotations are recorded in the pod's trace, and with reinvocationPolicy
// IfNeeded it runs again after label-injector, ordered after it, added the label.
func TestWasmWarningsAndReinvocation(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	e := start(t)
	ctx := context.Background()
	mods := wasmtest.GoAll(t, "examples/plugins/go/owner-annotator", "examples/plugins/go/label-injector")
	owner := e.push(t, mods["examples/plugins/go/owner-annotator"])
	inject := e.push(t, mods["examples/plugins/go/label-injector"])
	cs, warnings := e.warningClient(t)

	t.Run("warnings reach the client", func(t *testing.T) {
		e.apply(t, "tenant-a", "owner", owner, []wasmv1.Hook{wasmv1.HookMutate}, ownerConfig, wasmv1.Fail)
		warnings.take()
		p, err := cs.CoreV1().Pods("tenant-a").Create(ctx, pod("no-team", nil, "hello:1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{`pod "no-team" has no "team" label: annotation example.com/owner not set`}
		if got := warnings.take(); !slices.Equal(got, want) {
			t.Fatalf("warnings %q, want %q", got, want)
		}
		if _, ok := p.Annotations["example.com/owner"]; ok {
			t.Fatalf("annotations %v: nothing should be set without a team label", p.Annotations)
		}
		// A dry run runs the plugin too, and warns the same.
		if _, err := cs.CoreV1().Pods("tenant-a").Create(ctx, pod("dry", nil, "hello:1"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		if got := warnings.take(); len(got) != 1 || !strings.Contains(got[0], `pod "dry" has no "team" label`) {
			t.Fatalf("dry-run warnings %q", got)
		}
		if _, err := e.cs.CoreV1().Pods("tenant-a").Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a dry-run pod was stored: %v", err)
		}
	})

	t.Run("audit annotations are recorded", func(t *testing.T) {
		p, err := cs.CoreV1().Pods("tenant-a").Create(ctx, pod("blue", map[string]string{"team": "blue"}, "hello:1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := warnings.take(); len(got) != 0 {
			t.Fatalf("unexpected warnings %q", got)
		}
		if p.Annotations["example.com/owner"] != "blue" {
			t.Fatalf("annotations %v, want example.com/owner=blue", p.Annotations)
		}
		steps := e.podTrace(t, "tenant-a", "blue")
		if !hasStep(steps, "tenant-a/owner", "audit annotation", "tenant-a/owner/owner=blue") || !hasStep(steps, "tenant-a/owner", "mutate: patched", "") {
			t.Fatalf("trace lacks the plugin's audit annotation or patch: %+v", steps)
		}
	})

	t.Run("reinvoked when a later plugin changes the object", func(t *testing.T) {
		// owner runs first (order 0), inject after it (order 10) adds team=platform; owner
		// is reinvoked and copies the label it could not see the first time.
		spec := podPluginSpec(inject, []wasmv1.Hook{wasmv1.HookMutate}, `{"labels":{"team":"platform"}}`, wasmv1.Fail)
		spec.Order = 10
		e.applySpec(t, "tenant-b", "inject", spec)
		e.apply(t, "tenant-b", "owner", owner, []wasmv1.Hook{wasmv1.HookMutate}, ownerConfig, wasmv1.Fail)
		warnings.take()
		p, err := cs.CoreV1().Pods("tenant-b").Create(ctx, pod("reinvoked", nil, "hello:1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Labels["team"] != "platform" || p.Annotations["example.com/owner"] != "platform" {
			t.Fatalf("labels %v annotations %v, want team and example.com/owner = platform", p.Labels, p.Annotations)
		}
		// The first invocation's warning is kept, as Kubernetes keeps every invocation's.
		if got := warnings.take(); len(got) != 1 || !strings.Contains(got[0], `has no "team" label`) {
			t.Fatalf("warnings %q, want the first invocation's", got)
		}
		steps := e.podTrace(t, "tenant-b", "reinvoked")
		if !hasStep(steps, "tenant-b/owner", "mutate: allowed", "") || !hasStep(steps, "tenant-b/inject", "mutate: patched", "") ||
			!hasStep(steps, "tenant-b/owner", "reinvoked mutate: patched", "") || !hasStep(steps, "tenant-b/owner", "audit annotation", "tenant-b/owner/owner=platform") {
			t.Fatalf("trace does not show the reinvocation: %+v", steps)
		}
		if hasStep(steps, "tenant-b/inject", "reinvoked mutate: allowed", "") || hasStep(steps, "tenant-b/inject", "reinvoked mutate: patched", "") {
			t.Fatalf("the last plugin to change the object was reinvoked: %+v", steps)
		}
	})

	t.Run("not reinvoked with reinvocationPolicy Never", func(t *testing.T) {
		spec := podPluginSpec(owner, []wasmv1.Hook{wasmv1.HookMutate}, ownerConfig, wasmv1.Fail)
		spec.ReinvocationPolicy = wasmv1.Never
		e.applySpec(t, "tenant-b", "owner", spec)
		p, err := cs.CoreV1().Pods("tenant-b").Create(ctx, pod("once", nil, "hello:1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Labels["team"] != "platform" {
			t.Fatalf("labels %v, want team=platform", p.Labels)
		}
		if _, ok := p.Annotations["example.com/owner"]; ok {
			t.Fatalf("annotations %v: owner was reinvoked despite Never", p.Annotations)
		}
	})

	t.Run("an unknown reinvocationPolicy is refused", func(t *testing.T) {
		spec := podPluginSpec(owner, []wasmv1.Hook{wasmv1.HookMutate}, ownerConfig, wasmv1.Fail)
		spec.ReinvocationPolicy = "Sometimes"
		u := pluginObject(t, "tenant-b", "bad-policy", spec)
		_, err := e.dyn.Resource(wasmv1.SchemeGroupVersion.WithResource("wasmplugins")).Namespace("tenant-b").Create(ctx, u, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "reinvocationPolicy") {
			t.Fatalf("got %v, want 422 about reinvocationPolicy", err)
		}
	})
}

// TestWasmAdmissionLanguages runs the require-labels example of every non-Go SDK language
// (C, AssemblyScript, Rust, WAT; the Go one is TestWasmAdmission's) as a validating
// plugin through the server: a pod without the label is refused with the plugin's
// message, one with it is admitted. A missing toolchain skips locally and fails under CI.
func TestWasmAdmissionLanguages(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	for _, lang := range wasmtest.Languages() {
		t.Run(lang.Name, func(t *testing.T) {
			mod := lang.Build(t, "require-labels")
			ns := "lang-" + lang.Name
			if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.apply(t, ns, "require-team", e.push(t, mod), []wasmv1.Hook{wasmv1.HookValidate}, `{"labels":["team"]}`, wasmv1.Fail)
			_, err := e.cs.CoreV1().Pods(ns).Create(ctx, pod("no-team", nil, "hello:1"), metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `label "team" is required`) || !strings.Contains(err.Error(), ns+"/require-team") {
				t.Fatalf("got %v, want 403 from %s/require-team about the team label", err, ns)
			}
			_, err = e.cs.CoreV1().Pods(ns).Create(ctx, pod("latest", map[string]string{"team": "a"}, "hello:latest"), metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "must be pinned") {
				t.Fatalf("got %v, want 403 about the latest image", err)
			}
			if _, err := e.cs.CoreV1().Pods(ns).Create(ctx, pod("ok", map[string]string{"team": "a"}, "hello:1"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
