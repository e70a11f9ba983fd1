package plugins

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type pluginCount int

func (n pluginCount) CountPlugins(context.Context, string) (int, error) { return int(n), nil }

func pluginAttrs(op admission.Operation, l, old *wasmv1.Limits) *admission.Attributes {
	a := &admission.Attributes{Resource: wasmv1.SchemeGroupVersion.WithResource("wasmplugins"), Namespace: "t", Name: "p", Operation: op,
		Object: &wasmv1.WasmPlugin{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "t"}, Spec: wasmv1.WasmPluginSpec{Limits: l}}}
	if op == admission.Update {
		a.OldObject = &wasmv1.WasmPlugin{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "t"}, Spec: wasmv1.WasmPluginSpec{Limits: old}}
	}
	return a
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// TestPluginLimitsValidate covers the ceilings' refusals (422, naming field and ceiling).
func TestPluginLimitsValidate(t *testing.T) {
	tests := []struct {
		name     string
		ceilings PluginCeilings
		a        *admission.Attributes
		count    int
		want     string // "" = admitted
	}{
		{name: "within the defaults", a: pluginAttrs(admission.Create, &wasmv1.Limits{Timeout: dur(time.Second), MemoryPages: 1024, MaxInstances: 4}, nil)},
		{name: "timeout", a: pluginAttrs(admission.Create, &wasmv1.Limits{Timeout: dur(time.Hour)}, nil),
			want: `spec.limits.timeout: Invalid value: "1h0m0s": must be at most 10s (the cluster's ceiling for namespaced plugins)`},
		{name: "memory", a: pluginAttrs(admission.Create, &wasmv1.Limits{MemoryPages: 1025}, nil),
			want: `spec.limits.memoryPages: Invalid value: 1025: must be at most 1024 (64Mi per instance)`},
		{name: "instances", a: pluginAttrs(admission.Create, &wasmv1.Limits{MaxInstances: 5}, nil), want: `spec.limits.maxInstances: Invalid value: 5: must be at most 4`},
		{name: "input", a: pluginAttrs(admission.Create, &wasmv1.Limits{MaxInputBytes: 32 << 20}, nil), want: `spec.limits.maxInputBytes: Invalid value: 33554432: must be at most 16777216 (16Mi)`},
		{name: "output", a: pluginAttrs(admission.Create, &wasmv1.Limits{MaxOutputBytes: 8 << 20}, nil), want: `spec.limits.maxOutputBytes: Invalid value: 8388608: must be at most 4194304 (4Mi)`},
		{name: "admin's ceilings", ceilings: PluginCeilings{Timeout: 2 * time.Second}, a: pluginAttrs(admission.Create, &wasmv1.Limits{Timeout: dur(3 * time.Second)}, nil),
			want: `must be at most 2s`},
		{name: "ceiling lifted", ceilings: PluginCeilings{MaxInstances: -1}, a: pluginAttrs(admission.Create, &wasmv1.Limits{MaxInstances: 64}, nil)},
		{name: "update keeping a limit above a lowered ceiling", a: pluginAttrs(admission.Update, &wasmv1.Limits{MaxInstances: 64}, &wasmv1.Limits{MaxInstances: 64})},
		{name: "update raising a limit", a: pluginAttrs(admission.Update, &wasmv1.Limits{MaxInstances: 65}, &wasmv1.Limits{MaxInstances: 64}), want: "must be at most 4"},
		{name: "namespace full", count: 4, a: pluginAttrs(admission.Create, nil, nil),
			want: "metadata.namespace: Forbidden: namespace t already holds 4 WasmPlugins: at most 4 per namespace"},
		{name: "namespace full, update", count: 4, a: pluginAttrs(admission.Update, nil, nil)},
		{name: "namespace with room", count: 3, a: pluginAttrs(admission.Create, nil, nil)},
		{name: "status is not checked", a: func() *admission.Attributes {
			a := pluginAttrs(admission.Update, &wasmv1.Limits{MaxInstances: 64}, nil)
			a.Subresource = "status"
			return a
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &PluginLimits{Ceilings: tt.ceilings, Plugins: pluginCount(tt.count)}
			err := l.Validate(context.Background(), tt.a)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want 422 containing %q", err, tt.want)
			}
		})
	}
}

// TestPluginLimitsAdmit covers the defaults given to unset limits.
func TestPluginLimitsAdmit(t *testing.T) {
	tests := []struct {
		name     string
		ceilings PluginCeilings
		in       *wasmv1.Limits
		want     wasmv1.Limits
	}{
		{name: "all unset", want: wasmv1.Limits{MemoryPages: 1024, Timeout: dur(time.Second), MaxInstances: 4, MaxInputBytes: 16 << 20, MaxOutputBytes: 4 << 20}},
		{name: "set values kept", in: &wasmv1.Limits{MemoryPages: 16, Timeout: dur(50 * time.Millisecond), MaxInstances: 1},
			want: wasmv1.Limits{MemoryPages: 16, Timeout: dur(50 * time.Millisecond), MaxInstances: 1, MaxInputBytes: 16 << 20, MaxOutputBytes: 4 << 20}},
		{name: "lifted ceilings give the server's defaults", ceilings: PluginCeilings{MemoryBytes: -1, MaxInstances: -1},
			want: wasmv1.Limits{MemoryPages: 2048, Timeout: dur(time.Second), MaxInstances: 64, MaxInputBytes: 16 << 20, MaxOutputBytes: 4 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := pluginAttrs(admission.Create, tt.in, nil)
			if err := (&PluginLimits{Ceilings: tt.ceilings}).Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			got := a.Object.(*wasmv1.WasmPlugin).Spec.Limits
			if got == nil || got.MemoryPages != tt.want.MemoryPages || got.Timeout.Duration != tt.want.Timeout.Duration || got.MaxInstances != tt.want.MaxInstances ||
				got.MaxInputBytes != tt.want.MaxInputBytes || got.MaxOutputBytes != tt.want.MaxOutputBytes {
				t.Fatalf("limits %+v, want %+v", got, tt.want)
			}
		})
	}
	// Other objects are left alone.
	cp := &admission.Attributes{Resource: wasmv1.SchemeGroupVersion.WithResource("clusterwasmplugins"), Operation: admission.Create, Object: &wasmv1.ClusterWasmPlugin{}}
	if err := (&PluginLimits{}).Admit(context.Background(), cp); err != nil || cp.Object.(*wasmv1.ClusterWasmPlugin).Spec.Limits != nil {
		t.Fatalf("a ClusterWasmPlugin was defaulted: %v", err)
	}
}

type moduleMap map[string]*wasmv1.WasmModule

func (m moduleMap) GetModule(_ context.Context, name string) (*wasmv1.WasmModule, error) {
	if mod, ok := m[name]; ok {
		return mod, nil
	}
	return nil, apierrors.NewNotFound(wasmv1.SchemeGroupVersion.WithResource("wasmmodules").GroupResource(), name)
}

// TestModuleAccess covers which modules a namespaced plugin may pin.
func TestModuleAccess(t *testing.T) {
	hexA, hexB, hexAll := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	mod := func(hex, namespaces string) *wasmv1.WasmModule {
		return &wasmv1.WasmModule{ObjectMeta: metav1.ObjectMeta{Name: "sha256-" + hex, Annotations: map[string]string{wasmv1.ModuleNamespacesAnnotation: namespaces}}}
	}
	mods := moduleMap{"sha256-" + hexA: mod(hexA, "t,other"), "sha256-" + hexB: mod(hexB, "other"), "sha256-" + hexAll: mod(hexAll, "*")}
	admins := func(_ context.Context, u admission.UserInfo, verb, group, resource, _ string) (bool, error) {
		return u.Name == "root" && verb == "update" && group == "wasmplane.io" && resource == "wasmmodules", nil
	}
	attrs := func(op admission.Operation, user, digest, oldDigest string) *admission.Attributes {
		a := &admission.Attributes{Resource: wasmv1.SchemeGroupVersion.WithResource("wasmplugins"), Namespace: "t", Name: "p", Operation: op,
			User: admission.UserInfo{Name: user}, Object: &wasmv1.WasmPlugin{Spec: wasmv1.WasmPluginSpec{Module: wasmv1.ModuleSource{Digest: digest}}}}
		if op == admission.Update {
			a.OldObject = &wasmv1.WasmPlugin{Spec: wasmv1.WasmPluginSpec{Module: wasmv1.ModuleSource{Digest: oldDigest}}}
		}
		return a
	}
	tests := []struct {
		name string
		a    *admission.Attributes
		ok   bool
	}{
		{"uploaded in the namespace", attrs(admission.Create, "alice", "sha256:"+hexA, ""), true},
		{"shared with every namespace", attrs(admission.Create, "alice", "sha256:"+hexAll, ""), true},
		{"another namespace's module", attrs(admission.Create, "alice", "sha256:"+hexB, ""), false},
		{"a missing module", attrs(admission.Create, "alice", "sha256:"+strings.Repeat("d", 64), ""), false},
		{"an admin pins any module", attrs(admission.Create, "root", "sha256:"+hexB, ""), true},
		{"update keeping the module", attrs(admission.Update, "alice", "sha256:"+hexB, "sha256:"+hexB), true},
		{"update switching to another's module", attrs(admission.Update, "alice", "sha256:"+hexB, "sha256:"+hexA), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (&ModuleAccess{Modules: mods, Authorize: admins}).Validate(context.Background(), tt.a)
			if tt.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tt.ok && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is not shared with namespace t")) {
				t.Fatalf("got %v, want 403 not shared", err)
			}
		})
	}
}
