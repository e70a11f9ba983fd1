package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	wasmadmission "github.com/wasmplane/wasmplane/plugins/wasm/admission"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestRegoRecordedInput runs Rego policies built with and without the record of what they
// read on requests as the server sends them, pods and other kinds: a policy that reads
// only objects' kinds, names, labels and annotations gets object metadata documents
// without asking (they hold those members as the whole objects do), one that reads more
// does not, and each gives the same answer with its record as without.
func TestRegoRecordedInput(t *testing.T) {
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
		{"generated name, annotated", func(a *admission.Attributes) {
			p := a.Object.(*corev1.Pod)
			p.GenerateName, p.Annotations = "web-", map[string]string{"owner": "o"}
		}},
		{"a labelled config map", func(a *admission.Attributes) {
			a.Kind, a.Resource = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			a.Object = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "ns", Labels: map[string]string{"team": "t", "owner": "o"}}}
		}},
		{"a dry run by alice, of a config map", func(a *admission.Attributes) {
			a.DryRun, a.User = true, admission.UserInfo{Name: "alice", Groups: []string{"dev"}}
			a.Kind, a.Resource = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			a.Name, a.Object = "cm", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns", Labels: map[string]string{"owner": "o"}}}
		}},
		{"a custom object", func(a *admission.Attributes) {
			a.Kind, a.Resource = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
			a.Object = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
				"metadata": map[string]any{"name": "w", "namespace": "kube-system", "labels": map[string]any{}, "annotations": map[string]any{"owner": "o"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x:latest"}}}}}
		}},
	}
	for _, tc := range []struct {
		name, src, config string
		form              wasm.ObjectForm // what the recorded module gets
	}{
		{"k8srequiredlabels", string(labels), `{"labels":["team","owner"]}`, wasm.ObjectMetadata},
		{"labels, name and namespace", `package names
import rego.v1
deny contains "bad name" if input.review.object.metadata.name == "bad"
deny contains "system namespace" if input.review.object.metadata.namespace == "kube-system"
deny contains sprintf("label %s dropped", [k]) if {
	some k, _ in input.review.oldObject.metadata.labels
	not input.review.object.metadata.labels[k]
}`, ``, wasm.ObjectMetadata},
		{"annotations, generated names and kinds", `package annotations
import rego.v1
deny contains "no owner annotation" if not input.review.object.metadata.annotations.owner
deny contains sprintf("generated %s %s", [input.review.object.apiVersion, input.review.object.kind]) if input.review.object.metadata.generateName
deny contains "empty labels" if count(input.review.object.metadata.labels) == 0`, ``, wasm.ObjectMetadata},
		{"the request's own members", `package request
import rego.v1
deny contains sprintf("%s by %s", [input.review.operation, input.review.userInfo.username]) if input.review.object.metadata.labels.owner
deny contains "a dry run" if input.review.dryRun
deny contains sprintf("%s %s/%s", [input.review.kind.kind, input.review.namespace, input.review.name]) if input.review.resource.resource == "configmaps"
deny contains "no uid" if count(input.review.uid) != 36`, ``, wasm.ObjectMetadata},
		{"images", `package images
import rego.v1
deny contains sprintf("%s uses latest", [c.name]) if {
	some c in input.review.object.spec.containers
	endswith(c.image, ":latest")
}`, ``, wasm.WholeObjects},
		{"metadata beyond the metadata document", `package meta
import rego.v1
deny contains "created" if input.review.object.metadata.creationTimestamp
deny contains "unlabelled" if not input.review.object.metadata.labels`, ``, wasm.WholeObjects},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recorded := load(t, tc.name+"/recorded", wasmtest.RegoSource(t, tc.src, ""), tc.config)
			whole := load(t, tc.name+"/whole", wasmtest.RegoSourceUnrecorded(t, tc.src, ""), tc.config)
			if got := recorded.Caller.(*wasm.Plugin).ObjectForm(); got != tc.form {
				t.Errorf("recorded module: object form %v, want %v", got, tc.form)
			}
			if whole.Caller.(*wasm.Plugin).ObjectForm() != wasm.WholeObjects {
				t.Error("a module without the record gets a smaller form of objects")
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
			// Calls at once, on the pool's instances, each get their own request's answer:
			// an instance's request buffer serves one call at a time.
			want := make([]string, len(requests))
			for i, rq := range requests {
				a := serverPodAttrs()
				rq.change(a)
				want[i] = fmt.Sprint(recorded.Validate(ctx, a))
			}
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for k := range 3 * len(requests) {
						i := (g + k) % len(requests)
						a := serverPodAttrs()
						requests[i].change(a)
						if got := fmt.Sprint(recorded.Validate(ctx, a)); got != want[i] {
							t.Errorf("%s, called at once with others: %q, alone %q", requests[i].name, got, want[i])
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
