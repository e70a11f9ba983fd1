package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	wasmadmission "github.com/wasmplane/wasmplane/plugins/wasm/admission"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	corev1 "k8s.io/api/core/v1"
)

// TestRegoRecordedInputOnPods runs Rego policies built with and without the record of what
// they read on pod requests as the server sends them: a policy that reads only a pod's
// labels, name and namespace gets compact pods without asking (the compact document holds
// those members as the whole Pod does), one that reads more does not, and each gives the
// same answer with its record as without.
func TestRegoRecordedInputOnPods(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	labels, err := os.ReadFile(filepath.Join(wasmtest.ModuleRoot(t), "examples/plugins/rego/require-labels/require-labels.rego"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := wasm.NewRuntime(ctx, wasm.RuntimeConfig{CacheDir: wasmtest.CacheDir(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(ctx) })
	load := func(t *testing.T, name string, mod []byte, config string) *wasmadmission.Plugin {
		t.Helper()
		cm, err := r.Compile(ctx, mod, wasm.Digest(mod))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cm.Close(ctx) })
		wp, err := r.Load(ctx, cm, wasm.PluginConfig{Name: name, Config: json.RawMessage(config)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = wp.Close(ctx) })
		return &wasmadmission.Plugin{PluginName: "ns/policy", Caller: wp}
	}
	requests := []struct {
		name   string
		change func(a *admission.Attributes)
	}{
		{"labelled", func(*admission.Attributes) {}},
		{"no labels", func(a *admission.Attributes) { a.Object.(*corev1.Pod).Labels = nil }},
		{"both labels, named bad", func(a *admission.Attributes) {
			p := a.Object.(*corev1.Pod)
			p.Labels["owner"], p.Name = "o", "bad"
		}},
		{"in kube-system, latest image", func(a *admission.Attributes) {
			p := a.Object.(*corev1.Pod)
			p.Namespace, p.Spec.Containers[0].Image = "kube-system", "nginx:latest"
		}},
		{"an update that drops a label", func(a *admission.Attributes) {
			old := a.Object.(*corev1.Pod).DeepCopy()
			old.Labels["owner"] = "o"
			a.Operation, a.OldObject = admission.Update, old
		}},
	}
	for _, tc := range []struct {
		name, src, config string
		compact           bool
	}{
		{"k8srequiredlabels", string(labels), `{"labels":["team","owner"]}`, true},
		{"labels, name and namespace", `package names
import rego.v1
deny contains "bad name" if input.review.object.metadata.name == "bad"
deny contains "system namespace" if input.review.object.metadata.namespace == "kube-system"
deny contains sprintf("label %s dropped", [k]) if {
	some k, _ in input.review.oldObject.metadata.labels
	not input.review.object.metadata.labels[k]
}`, ``, true},
		{"images", `package images
import rego.v1
deny contains sprintf("%s uses latest", [c.name]) if {
	some c in input.review.object.spec.containers
	endswith(c.image, ":latest")
}`, ``, false},
		{"metadata beyond the compact document", `package meta
import rego.v1
deny contains "created" if input.review.object.metadata.creationTimestamp
deny contains "unlabelled" if not input.review.object.metadata.labels`, ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recorded := load(t, tc.name+"/recorded", wasmtest.RegoSource(t, tc.src, ""), tc.config)
			whole := load(t, tc.name+"/whole", wasmtest.RegoSourceUnrecorded(t, tc.src, ""), tc.config)
			if got := recorded.Caller.(*wasm.Plugin).WantsCompactPods(); got != tc.compact {
				t.Errorf("recorded module: compact pods %v, want %v", got, tc.compact)
			}
			if whole.Caller.(*wasm.Plugin).WantsCompactPods() {
				t.Error("a module without the record gets compact pods")
			}
			distinct := map[string]bool{}
			for _, rq := range requests {
				answer := func(p *wasmadmission.Plugin) string {
					a := serverPodAttrs()
					rq.change(a)
					return fmt.Sprint(p.Validate(ctx, a))
				}
				got, want := answer(recorded), answer(whole)
				if got != want {
					t.Errorf("%s: with the record %q, without %q", rq.name, got, want)
				}
				distinct[got] = true
			}
			if len(distinct) < 2 {
				t.Errorf("one answer to every request, %v: the table does not exercise the policy", distinct)
			}
		})
	}
}
