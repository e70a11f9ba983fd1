package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// applyManifest applies examples/scheduling/manifests/<file> with ${DIGEST} set, as
// `envsubst < file | kubectl apply -f -` would, and waits until the scheduler loaded it.
func (e *wasmEnv) applyManifest(t *testing.T, file, digest string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(wasmtest.ModuleRoot(t), "examples", "scheduling", "manifests", file))
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.ReplaceAll(string(raw), "${DIGEST}", strings.TrimPrefix(digest, "sha256:")))
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	ri := e.resource(obj.GetNamespace())
	ctx := context.Background()
	out, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if gerr != nil {
			t.Fatal(gerr)
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		out, err = ri.Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("applying %s: %v", file, err)
	}
	e.waitLoaded(t, obj.GetNamespace(), obj.GetName(), out.GetGeneration())
}

// TestSchedulingStrategyExample runs examples/scheduling: with spread.yaml applied pods
// spread evenly over three equal nodes; applying binpack.yaml (the same object) switches
// the running scheduler so the next pods fill a single node.
func TestSchedulingStrategyExample(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	mods := wasmtest.GoAll(t, strategyScorePkg)
	e := startWasmEnv(t)
	const ns = "strategy"
	e.createNamespace(t, ns)
	// The pods are kept to the three demo nodes: the server may register nodes of its own.
	for i := 0; i < 3; i++ {
		e.createNode(t, nodeSpec{name: nodeName(i), cpu: "4", mem: "16Gi", labels: map[string]string{"strategy-demo": "yes"}})
	}
	digest := e.push(t, mods[strategyScorePkg])
	e.applyManifest(t, "spread.yaml", digest)
	wave := func(prefix string) map[string]int {
		on := map[string]int{}
		for i := 0; i < 6; i++ {
			p := basePod(ns, fmt.Sprintf("%s-%d", prefix, i))
			p.Spec.Containers[0].Resources = requests("500m", "256Mi")
			p.Spec.NodeSelector = map[string]string{"strategy-demo": "yes"}
			e.createPod(t, p)
		}
		for i := 0; i < 6; i++ {
			on[e.waitBound(t, ns, fmt.Sprintf("%s-%d", prefix, i), 30*time.Second).Spec.NodeName]++
		}
		return on
	}
	spread := wave("spread")
	for i := 0; i < 3; i++ {
		if spread[nodeName(i)] != 2 {
			t.Fatalf("spread placed %v; want 2 pods on each node", spread)
		}
	}
	e.applyManifest(t, "binpack.yaml", digest)
	binpack := wave("binpack")
	if len(binpack) != 1 {
		t.Fatalf("binpack placed %v; want all 6 pods on one node", binpack)
	}
	if n := schedulerCounter(t, e.client, "scheduler_schedule_attempts_total", map[string]string{"result": "error"}); n != 0 {
		t.Errorf("%v scheduling attempts failed with an error", n)
	}
}
