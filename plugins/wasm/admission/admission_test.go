package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/trace"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	wasmadmission "github.com/wasmplane/wasmplane/plugins/wasm/admission"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMain(m *testing.M) { wasmtest.Main(m) }

// caller answers the hooks with fixed responses.
type caller struct {
	mutate   abi.MutateResponse
	validate abi.ValidateResponse
	err      error
	// last is the request of the last call.
	last *abi.AdmissionRequest
}

func (c *caller) Mutate(_ context.Context, req *abi.AdmissionRequest) (*abi.MutateResponse, error) {
	c.last = req
	return &c.mutate, c.err
}

func (c *caller) Validate(_ context.Context, req *abi.AdmissionRequest) (*abi.ValidateResponse, error) {
	c.last = req
	return &c.validate, c.err
}

func TestRequest(t *testing.T) {
	c := &caller{validate: abi.ValidateResponse{Allowed: true}}
	p := &wasmadmission.Plugin{PluginName: "p", Caller: c}
	a := attrs()
	a.OldObject = &corev1.Pod{}
	a.User = admission.UserInfo{Name: "alice", Groups: []string{"dev"}}
	a.DryRun = true
	if err := p.Validate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	r := c.last
	if r.Operation != "CREATE" || r.Namespace != "ns" || r.Name != "web" || r.Kind.Kind != "Pod" || r.Resource.Resource != "pods" ||
		r.UserInfo.Username != "alice" || !r.DryRun || r.UID == "" {
		t.Fatalf("request %+v", r)
	}
	// Objects without TypeMeta (as stored) get apiVersion and kind, as a webhook sees them.
	for name, raw := range map[string]json.RawMessage{"object": r.Object, "oldObject": r.OldObject} {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: %v", name, raw, err)
		}
		if m["apiVersion"] != "v1" || m["kind"] != "Pod" || m["metadata"] == nil {
			t.Fatalf("%s = %s, want apiVersion v1, kind Pod and the object's members", name, raw)
		}
	}
	if md := mapOf(t, r.Object)["metadata"].(map[string]any); md["name"] != "web" {
		t.Fatalf("object metadata %v", md)
	}
}

func mapOf(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func attrs() *admission.Attributes {
	return &admission.Attributes{Kind: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: "ns", Name: "web", Operation: admission.Create,
		Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}}}}
}

func TestWarningsAndAuditAnnotations(t *testing.T) {
	for _, hook := range []string{"mutate", "validate"} {
		for _, allowed := range []bool{true, false} {
			t.Run(hook+map[bool]string{true: " allowed", false: " denied"}[allowed], func(t *testing.T) {
				c := &caller{
					mutate:   abi.MutateResponse{Allowed: allowed, Code: 422, Message: "no", Warnings: []string{"w1", "w2"}, AuditAnnotations: map[string]string{"b": "2", "a": "1"}},
					validate: abi.ValidateResponse{Allowed: allowed, Code: 422, Message: "no", Warnings: []string{"w1", "w2"}, AuditAnnotations: map[string]string{"b": "2", "a": "1"}},
				}
				p := &wasmadmission.Plugin{PluginName: "ns/p", Caller: c, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
				tr := &trace.Trace{}
				ctx, warnings := admission.WithWarnings(trace.With(context.Background(), tr))
				var err error
				if hook == "mutate" {
					err = p.Admit(ctx, attrs())
				} else {
					err = p.Validate(ctx, attrs())
				}
				if allowed && err != nil {
					t.Fatal(err)
				}
				if !allowed && (!apierrors.IsInvalid(err) || err.Error() != `admission plugin "ns/p" denied the request: no`) {
					t.Fatalf("got %v, want 422 with the plugin's message", err)
				}
				if w := warnings(); !slices.Equal(w, []string{"w1", "w2"}) {
					t.Fatalf("warnings %q", w)
				}
				var audit []string
				for _, s := range tr.Steps() {
					if s.Result == "audit annotation" && s.Step == "ns/p" && s.Component == "admission" {
						audit = append(audit, s.Detail)
					}
				}
				if !slices.Equal(audit, []string{"ns/p/a=1", "ns/p/b=2"}) {
					t.Fatalf("audit annotations in the trace: %q", audit)
				}
			})
		}
	}
}

func TestReinvocationPolicy(t *testing.T) {
	if !(&wasmadmission.Plugin{}).Reinvoke() {
		t.Fatal("IfNeeded is the default")
	}
	if (&wasmadmission.Plugin{NoReinvocation: true}).Reinvoke() {
		t.Fatal("Never must not reinvoke")
	}
}

func TestPatchChecks(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	tests := []struct {
		name    string
		patch   []abi.PatchOperation
		ignore  bool
		wantErr string
		label   string
	}{
		{name: "label added", patch: []abi.PatchOperation{{Op: "add", Path: "/metadata/labels", Value: raw(`{"x":"y"}`)}}, label: "y"},
		{name: "name is immutable", patch: []abi.PatchOperation{{Op: "replace", Path: "/metadata/name", Value: raw(`"other"`)}},
			wantErr: "may not change metadata.name"},
		{name: "namespace is immutable", patch: []abi.PatchOperation{{Op: "replace", Path: "/metadata/namespace", Value: raw(`"other"`)}},
			wantErr: "may not change metadata.namespace"},
		{name: "unknown field", patch: []abi.PatchOperation{{Op: "add", Path: "/spec/bogus", Value: raw(`1`)}},
			wantErr: "does not decode"},
		{name: "failurePolicy Ignore skips a bad patch", patch: []abi.PatchOperation{{Op: "remove", Path: "/nothing"}}, ignore: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &wasmadmission.Plugin{PluginName: "p", Ignore: tt.ignore, Caller: &caller{mutate: abi.MutateResponse{Allowed: true, Patch: tt.patch}}}
			a := attrs()
			err := p.Admit(context.Background(), a)
			if tt.wantErr != "" {
				if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want 500 containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Object.(*corev1.Pod).Labels["x"]; got != tt.label {
				t.Fatalf("label x = %q, want %q", got, tt.label)
			}
		})
	}
}

func TestFailurePolicy(t *testing.T) {
	boom := errors.New("trap")
	if err := (&wasmadmission.Plugin{PluginName: "p", Caller: &caller{err: boom}}).Validate(context.Background(), attrs()); !apierrors.IsInternalError(err) {
		t.Fatalf("Fail: got %v, want 500", err)
	}
	if err := (&wasmadmission.Plugin{PluginName: "p", Ignore: true, Caller: &caller{err: boom}}).Validate(context.Background(), attrs()); err != nil {
		t.Fatalf("Ignore: got %v", err)
	}
}

// BenchmarkValidate measures one validating plugin as the API server calls it for a pod
// create (encoding the admission request, the guest call, decoding its answer), with the
// require-labels example in Rust and Go: the in-process share of a plugin's cost in
// tests/admission's BenchmarkPodCreateWasmValidate.
func BenchmarkValidate(b *testing.B) {
	for _, m := range []struct {
		lang  string
		build func(tb testing.TB) []byte
	}{
		{"rust", func(tb testing.TB) []byte { return wasmtest.Rust(tb, "require-labels") }},
		{"go", func(tb testing.TB) []byte { return wasmtest.Go(tb, "examples/plugins/go/require-labels") }},
	} {
		b.Run(m.lang, func(b *testing.B) {
			mod := m.build(b)
			ctx := context.Background()
			r, err := wasm.NewRuntime(ctx, wasm.RuntimeConfig{CacheDir: wasmtest.CacheDir(b), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close(ctx)
			cm, err := r.Compile(ctx, mod, wasm.Digest(mod))
			if err != nil {
				b.Fatal(err)
			}
			defer cm.Close(ctx)
			wp, err := r.Load(ctx, cm, wasm.PluginConfig{Name: "bench", Config: json.RawMessage(`{"labels":["team"]}`), Limits: wasm.Limits{Instances: 1, MaxInstances: 2}})
			if err != nil {
				b.Fatal(err)
			}
			defer wp.Close(ctx)
			p := &wasmadmission.Plugin{PluginName: "ns/bench", Caller: wp}
			a := attrs()
			pod := a.Object.(*corev1.Pod)
			pod.Labels = map[string]string{"team": "bench"}
			// The shape of a pod after the built-in admission plugins and defaulting.
			pod.UID, pod.CreationTimestamp = "0f6c1e34-9b5b-4c2e-8d7e-5d7f3e2a1b00", metav1.Now()
			pod.Spec.ServiceAccountName, pod.Spec.RestartPolicy, pod.Spec.DNSPolicy = "default", corev1.RestartPolicyAlways, corev1.DNSClusterFirst
			pod.Spec.Containers[0].ImagePullPolicy, pod.Spec.Containers[0].TerminationMessagePath = corev1.PullIfNotPresent, "/dev/termination-log"
			pod.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
			b.ResetTimer()
			for range b.N {
				if err := p.Validate(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
