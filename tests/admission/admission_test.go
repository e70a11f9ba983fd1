// Package admission_test drives WASM admission end to end: modules pushed to a real
// server, plugin objects created through the API, and pods admitted, mutated or refused.
package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestMain(m *testing.M) { wasmtest.Main(m) }

type env struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
	url string
	hc  *http.Client
	// cfg is the admin config, for clients with their own settings.
	cfg *rest.Config
}

func start(t testing.TB) *env {
	t.Helper()
	inst, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Close)
	return envFor(t, inst)
}

// envFor builds the clients of a started server and its two tenant namespaces.
func envFor(t testing.TB, inst *server.Instance) *env {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(inst.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(inst.RESTConfig())
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hc, err := rest.HTTPClientFor(inst.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &env{cs: cs, dyn: dyn, url: inst.URL(), hc: hc, cfg: inst.RESTConfig()}
}

// push uploads a module and returns its hex digest.
func (e *env) push(t testing.TB, wasm []byte) string {
	t.Helper()
	resp, err := e.hc.Post(e.url+"/apis/wasmplane.io/v1alpha1/wasmmodules", "application/wasm", bytes.NewReader(wasm))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m wasmv1.WasmModule
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode >= 300 {
		t.Fatalf("push: %d %v", resp.StatusCode, err)
	}
	return strings.TrimPrefix(m.Spec.Digest, "sha256:")
}

// apply creates or updates a namespaced WasmPlugin and waits until this server reports
// it loaded at the new generation.
func (e *env) apply(t testing.TB, ns, name, digest string, hooks []wasmv1.Hook, config string, failurePolicy wasmv1.FailurePolicy) {
	t.Helper()
	e.applySpec(t, ns, name, podPluginSpec(digest, hooks, config, failurePolicy))
}

// podPluginSpec is the spec of a plugin on pod creates.
func podPluginSpec(digest string, hooks []wasmv1.Hook, config string, failurePolicy wasmv1.FailurePolicy) wasmv1.WasmPluginSpec {
	return wasmv1.WasmPluginSpec{Module: wasmv1.ModuleSource{Digest: "sha256:" + digest}, SHA256: digest, Hooks: hooks,
		Rules:         []wasmv1.Rule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Operations: []wasmv1.Operation{"CREATE"}}},
		Config:        &runtime.RawExtension{Raw: []byte(config)},
		FailurePolicy: &failurePolicy}
}

// applySpec is apply with a whole spec.
func (e *env) applySpec(t testing.TB, ns, name string, spec wasmv1.WasmPluginSpec) {
	t.Helper()
	ctx := context.Background()
	ri := e.dyn.Resource(wasmv1.SchemeGroupVersion.WithResource("wasmplugins")).Namespace(ns)
	u := pluginObject(t, ns, name, spec)
	var gen int64
	if cur, err := ri.Get(ctx, name, metav1.GetOptions{}); err == nil {
		u.SetResourceVersion(cur.GetResourceVersion())
		out, err := ri.Update(ctx, u, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gen = out.GetGeneration()
	} else {
		out, err := ri.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gen = out.GetGeneration()
	}
	waitLoaded(t, ri, name, gen)
}

// pluginObject is a WasmPlugin as the dynamic client sends it.
func pluginObject(t testing.TB, ns, name string, spec wasmv1.WasmPluginSpec) *unstructured.Unstructured {
	t.Helper()
	p := &wasmv1.WasmPlugin{
		TypeMeta:   metav1.TypeMeta{APIVersion: wasmv1.SchemeGroupVersion.String(), Kind: "WasmPlugin"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       spec,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func toUnstructured(obj map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: obj}
}

// waitLoaded waits until this server reports the plugin loaded at generation gen.
func waitLoaded(t testing.TB, ri dynamic.ResourceInterface, name string, gen int64) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(cur.Object, "status", "phase")
		observed, _, _ := unstructured.NestedInt64(cur.Object, "status", "observedGeneration")
		if phase == "Failed" {
			msg, _, _ := unstructured.NestedString(cur.Object, "status", "message")
			return false, fmt.Errorf("plugin failed to load: %s", msg)
		}
		return phase == "Loaded" && observed >= gen, nil
	})
	if err != nil {
		t.Fatalf("waiting for plugin %s: %v", name, err)
	}
}

func pod(name string, labels map[string]string, image string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}
}

func TestWasmAdmission(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	e := start(t)
	ctx := context.Background()
	mods := wasmtest.GoAll(t, "examples/plugins/go/require-labels", "examples/plugins/go/label-injector")
	validate := e.push(t, mods["examples/plugins/go/require-labels"])
	mutate := e.push(t, mods["examples/plugins/go/label-injector"])
	e.apply(t, "tenant-a", "require-team", validate, []wasmv1.Hook{wasmv1.HookValidate}, `{"labels":["team"]}`, wasmv1.Fail)

	t.Run("denied with the plugin's message", func(t *testing.T) {
		_, err := e.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("no-team", nil, "hello:1"), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "team") || !strings.Contains(err.Error(), "tenant-a/require-team") {
			t.Fatalf("got %v, want 403 naming the plugin and the missing label", err)
		}
		if _, err := e.cs.CoreV1().Pods("tenant-a").Get(ctx, "no-team", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a refused pod was stored: %v", err)
		}
	})
	t.Run("latest image denied", func(t *testing.T) {
		_, err := e.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("latest", map[string]string{"team": "x"}, "hello:latest"), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("got %v, want 403", err)
		}
	})
	t.Run("allowed", func(t *testing.T) {
		if _, err := e.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("ok", map[string]string{"team": "x"}, "hello:1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("calls are counted on /metrics", func(t *testing.T) {
		raw, err := e.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const series = `wasmplane_wasm_calls_total{component="apiserver",hook="validate",plugin="tenant-a/require-team"} `
		i := strings.Index(string(raw), series)
		if i < 0 {
			t.Fatalf("no %s series on /metrics", series)
		}
		if v, _, _ := strings.Cut(string(raw[i+len(series):]), "\n"); v == "0" {
			t.Errorf("%s is 0 after three validated creates", series)
		}
	})
	t.Run("tenant plugin does not act in another namespace", func(t *testing.T) {
		if _, err := e.cs.CoreV1().Pods("tenant-b").Create(ctx, pod("no-team", nil, "hello:latest"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("tenant-a's plugin ran in tenant-b: %v", err)
		}
	})
	t.Run("dry run runs admission and stores nothing", func(t *testing.T) {
		_, err := e.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("dry", nil, "hello:1"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("dry run: got %v, want 403", err)
		}
		if _, err := e.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("dry", map[string]string{"team": "x"}, "hello:1"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.cs.CoreV1().Pods("tenant-a").Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a dry-run pod was stored: %v", err)
		}
	})
	t.Run("config change is live without restart", func(t *testing.T) {
		e.apply(t, "tenant-a", "require-team", validate, []wasmv1.Hook{wasmv1.HookValidate}, `{"labels":["team","tier"]}`, wasmv1.Fail)
		_, err := e.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("no-tier", map[string]string{"team": "x"}, "hello:1"), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "tier") {
			t.Fatalf("got %v, want 403 about tier", err)
		}
	})
	t.Run("mutating plugin patches before validation", func(t *testing.T) {
		e.apply(t, "tenant-b", "inject", mutate, []wasmv1.Hook{wasmv1.HookMutate}, `{"labels":{"injected-by":"wasm"}}`, wasmv1.Fail)
		p, err := e.cs.CoreV1().Pods("tenant-b").Create(ctx, pod("mutated", nil, "hello:1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Labels["injected-by"] != "wasm" {
			t.Fatalf("labels %v, want injected-by=wasm", p.Labels)
		}
	})
}

func TestFailurePolicy(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	trap := e.push(t, wasmtest.WAT(t, "trap"))
	e.apply(t, "tenant-a", "trap-fail", trap, []wasmv1.Hook{wasmv1.HookValidate}, `{}`, wasmv1.Fail)
	e.apply(t, "tenant-b", "trap-ignore", trap, []wasmv1.Hook{wasmv1.HookValidate}, `{}`, wasmv1.Ignore)
	_, err := e.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("p", nil, "hello:1"), metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "trap") {
		t.Fatalf("Fail: got %v, want 500 naming the trap", err)
	}
	if _, err := e.cs.CoreV1().Pods("tenant-b").Create(ctx, pod("p", nil, "hello:1"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Ignore: %v", err)
	}
	// The server keeps serving after the faults.
	if _, err := e.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
}
