package robustness

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/scrape"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// faultyPlugin is one WASM validating plugin of the wasm-plugins fault (a module of
// examples/plugins/wat) and the error kind each of its calls must end in.
type faultyPlugin struct{ name, kind string }

// faultyPlugins loop until their call deadline and grow their memory until refused: both
// validate every write of the traffic's ConfigMaps (create, update, patch, delete) in the
// run's namespace, with failurePolicy Ignore, so that the writes go on, each one waiting
// for both plugins to fail, inside the storage update's retry loop for updates and patches.
var faultyPlugins = []faultyPlugin{{"loop", "timeout"}, {"membomb", "out-of-memory"}}

// pluginTimeout is the call deadline of the faulty plugins: short enough that the traffic
// keeps a useful rate, long enough to hold every write well past a concurrent one's.
const pluginTimeout = 200 * time.Millisecond

// installFaultyPlugins pushes and applies faultyPlugins in ns and waits until up has
// loaded them.
func installFaultyPlugins(ctx context.Context, t *testing.T, up *proc, ns string) string {
	cfg := up.config(t, 30*time.Second)
	tc, err := toolkit.NewClientForConfig(cfg)
	if err != nil {
		t.Fatalf("plugin client: %v", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	plugins := dyn.Resource(wasmv1.SchemeGroupVersion.WithResource("wasmplugins")).Namespace(ns)
	var names []string
	for _, p := range faultyPlugins {
		m, _, err := tc.PushIn(ctx, wasmtest.WAT(t, p.name), ns)
		if err != nil {
			t.Fatalf("pushing %s: %v", p.name, err)
		}
		spec, err := toolkit.BuildSpec(toolkit.SpecOptions{Digest: m.Spec.Digest, Hooks: []string{"validate"},
			Rules: []string{"configmaps:CREATE,UPDATE,DELETE"}, FailurePolicy: string(wasmv1.Ignore)})
		if err != nil {
			t.Fatalf("plugin %s: %v", p.name, err)
		}
		spec.Limits = &wasmv1.Limits{Timeout: &metav1.Duration{Duration: pluginTimeout}}
		if _, _, err := tc.Apply(ctx, toolkit.ApplyOptions{Name: p.name, Namespace: ns, Spec: spec}); err != nil {
			t.Fatalf("applying plugin %s: %v", p.name, err)
		}
		waitfor.Condition(t, 60*time.Second, "plugin "+p.name+" to load", func(ctx context.Context) (bool, error) {
			cur, err := plugins.Get(ctx, p.name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			phase, _, _ := unstructured.NestedString(cur.Object, "status", "phase")
			if phase == "Failed" {
				msg, _, _ := unstructured.NestedString(cur.Object, "status", "message")
				return false, fmt.Errorf("plugin %s failed to load: %s", p.name, msg)
			}
			return phase == "Loaded", nil
		})
		names = append(names, p.name)
	}
	return fmt.Sprintf("WASM validating plugins %s (deadline %v, failurePolicy Ignore) on every ConfigMap write", strings.Join(names, " and "), pluginTimeout)
}

// checkPluginFaults reads how the faulty plugins' calls ended from the server's metrics:
// each plugin must have failed with its error kind (other kinds, e.g. a call that waited
// for an instance past its deadline, are reported beside it).
func checkPluginFaults(ctx context.Context, r *report, cs kubernetes.Interface, ns string) string {
	samples, err := scrape.Metric(ctx, cs, "wasmplane_wasm_call_errors_total")
	if err != nil {
		r.fail("plugin failures: %v", err)
		return ""
	}
	var parts []string
	for _, p := range faultyPlugins {
		byKind := map[string]int{}
		for _, s := range samples {
			if s.Labels["plugin"] == ns+"/"+p.name && s.Value > 0 {
				byKind[s.Labels["kind"]] += int(s.Value)
			}
		}
		if byKind[p.kind] == 0 {
			r.fail("plugin %s never failed with %s (its failures: %v)", p.name, p.kind, byKind)
		}
		var counts []string
		for _, k := range slices.Sorted(maps.Keys(byKind)) {
			counts = append(counts, fmt.Sprintf("%s %d", k, byKind[k]))
		}
		parts = append(parts, fmt.Sprintf("%s: %s", p.name, strings.Join(counts, ", ")))
	}
	return "; plugin calls failed: " + strings.Join(parts, "; ")
}
