package v1alpha1

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The limits a plugin gets for the fields of Limits it leaves zero: the WASM host's
// defaults (plugins/wasm keeps the same values and a test holds them equal). They are
// here so that core — admission, quota — can reason about a plugin's cost without the
// WASM host.
const (
	DefaultMemoryPages    uint32 = 2048 // 128 MiB per instance
	DefaultTimeout               = time.Second
	DefaultMaxInputBytes  int64  = 16 << 20
	DefaultMaxOutputBytes int64  = 4 << 20
	DefaultMaxInstances   int32  = 64
)

// PageBytes is the size of a WebAssembly memory page.
const PageBytes = 64 << 10

// EffectiveLimits returns l with its zero fields set to the defaults.
func EffectiveLimits(l *Limits) Limits {
	var out Limits
	if l != nil {
		out = *l
		if l.Timeout != nil {
			t := *l.Timeout
			out.Timeout = &t
		}
	}
	if out.MemoryPages == 0 {
		out.MemoryPages = DefaultMemoryPages
	}
	if out.Timeout == nil || out.Timeout.Duration <= 0 {
		out.Timeout = durationOf(DefaultTimeout)
	}
	if out.MaxInputBytes <= 0 {
		out.MaxInputBytes = DefaultMaxInputBytes
	}
	if out.MaxOutputBytes <= 0 {
		out.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if out.MaxInstances <= 0 {
		out.MaxInstances = DefaultMaxInstances
	}
	return out
}

// MemoryBytes is the most linear memory a plugin's instances may hold together:
// memory per instance times instances.
func MemoryBytes(l *Limits) int64 {
	e := EffectiveLimits(l)
	return int64(e.MemoryPages) * PageBytes * int64(e.MaxInstances)
}

func durationOf(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// ModuleNamespacesAnnotation lists, comma-separated, the namespaces whose WasmPlugins may
// run a WasmModule: the namespaces it was uploaded in (`wasmplane plugin push -n NS`), and
// any a cluster admin adds; "*" shares it with every namespace. ClusterWasmPlugins may
// run any module.
const ModuleNamespacesAnnotation = "wasmplane.io/namespaces"

// AllNamespaces in ModuleNamespacesAnnotation shares a module with every namespace.
const AllNamespaces = "*"

// ModuleNamespaces returns the namespaces a module is shared with.
func ModuleNamespaces(m *WasmModule) []string {
	v := m.Annotations[ModuleNamespacesAnnotation]
	if v == "" {
		return nil
	}
	var out []string
	for _, ns := range strings.Split(v, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// ModuleSharedWith reports whether the WasmPlugins of namespace ns may run module m.
func ModuleSharedWith(m *WasmModule, ns string) bool {
	for _, n := range ModuleNamespaces(m) {
		if n == ns || n == AllNamespaces {
			return true
		}
	}
	return false
}

// ShareModule records that namespace ns may run m; it reports whether that changed m.
func ShareModule(m *WasmModule, ns string) bool {
	if ModuleSharedWith(m, ns) {
		return false
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[ModuleNamespacesAnnotation] = strings.Join(append(ModuleNamespaces(m), ns), ",")
	return true
}
