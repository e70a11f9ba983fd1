package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit"
	"github.com/wasmplane/wasmplane/tests/internal/scrape"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// The example plugins the WASM scheduling tests run.
const (
	nodeLabelFilterPkg = "examples/plugins/go/node-label-filter"
	labelScorePkg      = "examples/plugins/go/label-score"
	strategyScorePkg   = "examples/scheduling/strategy-score"
)

// wasmEnv is a whole control plane (its scheduler runs the WASM plugin manager) with the
// clients a test needs.
type wasmEnv struct {
	*env
	srv *testserver.Server
	dyn dynamic.Interface
	tk  *toolkit.Client
}

func startWasmEnv(t *testing.T) *wasmEnv {
	t.Helper()
	s := testserver.Start(t)
	dyn, err := dynamic.NewForConfig(s.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := toolkit.NewClientForConfig(s.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	return &wasmEnv{env: &env{client: s.Clientset(t, false)}, srv: s, dyn: dyn, tk: tk}
}

// push stores a module and returns its "sha256:<hex>" digest.
func (e *wasmEnv) push(t testing.TB, module []byte) string {
	t.Helper()
	m, _, err := e.tk.Push(context.Background(), module)
	if err != nil {
		t.Fatal(err)
	}
	return m.Spec.Digest
}

// pluginSpec is a scheduling plugin spec pinning digest.
func pluginSpec(digest string, hooks []wasmv1.Hook, config string, weight int32) wasmv1.WasmPluginSpec {
	return wasmv1.WasmPluginSpec{
		Module: wasmv1.ModuleSource{Digest: digest}, SHA256: strings.TrimPrefix(digest, "sha256:"), Hooks: hooks,
		Config: &runtime.RawExtension{Raw: []byte(config)}, Scheduler: &wasmv1.SchedulerBinding{Weight: weight},
	}
}

// apply creates or replaces a plugin object (namespace "" = cluster plugin) and waits
// until the scheduler reports it loaded at the new generation.
func (e *wasmEnv) apply(t testing.TB, ns, name string, spec wasmv1.WasmPluginSpec) {
	t.Helper()
	_, obj, err := e.tk.Apply(context.Background(), toolkit.ApplyOptions{Name: name, Namespace: ns, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	e.waitLoaded(t, ns, name, obj.(metav1.Object).GetGeneration())
}

func (e *wasmEnv) resource(ns string) dynamic.ResourceInterface {
	if ns == "" {
		return e.dyn.Resource(wasmv1.SchemeGroupVersion.WithResource("clusterwasmplugins"))
	}
	return e.dyn.Resource(wasmv1.SchemeGroupVersion.WithResource("wasmplugins")).Namespace(ns)
}

// waitLoaded waits until the plugin's status says Loaded at generation gen or later.
func (e *wasmEnv) waitLoaded(t testing.TB, ns, name string, gen int64) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := e.resource(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(cur.Object, "status", "phase")
		observed, _, _ := unstructured.NestedInt64(cur.Object, "status", "observedGeneration")
		msg, _, _ := unstructured.NestedString(cur.Object, "status", "message")
		last = fmt.Sprintf("phase %q generation %d message %q", phase, observed, msg)
		if phase == "Failed" && observed >= gen {
			return false, fmt.Errorf("plugin failed to load: %s", msg)
		}
		return phase == "Loaded" && observed >= gen, nil
	})
	if err != nil {
		t.Fatalf("waiting for plugin %s/%s generation %d (last: %s): %v", ns, name, gen, last, err)
	}
}

func (e *wasmEnv) deletePlugin(t testing.TB, ns, name string) {
	t.Helper()
	if err := e.resource(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// schedulerCounter sums a counter of the in-process scheduler from the API server's
// /metrics over the series whose labels include want.
func schedulerCounter(t testing.TB, cs kubernetes.Interface, name string, want map[string]string) float64 {
	t.Helper()
	sum, err := scrape.MetricSum(context.Background(), cs, name, want)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// onNode lists the pods of ns by node.
func podsByNode(t testing.TB, cs kubernetes.Interface, ns string) map[string]int {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range list.Items {
		out[p.Spec.NodeName]++
	}
	return out
}

// tinyPod is a pod small enough that hundreds fit on one node.
func tinyPod(ns, name string) *v1.Pod {
	p := basePod(ns, name)
	p.Spec.Containers[0].Resources = requests("10m", "10Mi")
	return p
}
