package plugins

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// wasmPluginsResource is the namespaced plugin resource the tenancy plugins act on.
var wasmPluginsResource = schema.GroupResource{Group: wasmv1.GroupName, Resource: "wasmplugins"}

// PluginCeilings are the cluster's maxima for namespaced WasmPlugins — the plugins any
// tenant with edit rights may create. A zero field takes its default (DefaultPluginCeilings);
// a negative one means no ceiling. ClusterWasmPlugins, which only cluster admins create,
// are not capped.
type PluginCeilings struct {
	// Timeout bounds spec.limits.timeout.
	Timeout time.Duration
	// MemoryBytes bounds the memory of one instance (spec.limits.memoryPages × 64 KiB).
	MemoryBytes int64
	// MaxInstances bounds spec.limits.maxInstances.
	MaxInstances int32
	// MaxInputBytes and MaxOutputBytes bound spec.limits.maxInputBytes and maxOutputBytes.
	MaxInputBytes, MaxOutputBytes int64
	// PluginsPerNamespace bounds how many WasmPlugins one namespace holds.
	PluginsPerNamespace int
}

// The default ceilings. With them one namespace's plugins hold at most
// 4 plugins × 4 instances × 64 MiB = 1 GiB of guest memory (instances are created on
// demand, so idle plugins hold far less), where the server's own defaults would let one
// plugin alone reach 64 × 128 MiB = 8 GiB; and a call takes at most 10 s.
const (
	DefaultCeilingTimeout        = 10 * time.Second
	DefaultCeilingMemoryBytes    = 64 << 20
	DefaultCeilingMaxInstances   = 4
	DefaultCeilingMaxInputBytes  = wasmv1.DefaultMaxInputBytes
	DefaultCeilingMaxOutputBytes = wasmv1.DefaultMaxOutputBytes
	DefaultCeilingPlugins        = 4
)

// WithDefaults returns c with its zero fields set to the defaults.
func (c PluginCeilings) WithDefaults() PluginCeilings {
	if c.Timeout == 0 {
		c.Timeout = DefaultCeilingTimeout
	}
	if c.MemoryBytes == 0 {
		c.MemoryBytes = DefaultCeilingMemoryBytes
	}
	if c.MaxInstances == 0 {
		c.MaxInstances = DefaultCeilingMaxInstances
	}
	if c.MaxInputBytes == 0 {
		c.MaxInputBytes = DefaultCeilingMaxInputBytes
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = DefaultCeilingMaxOutputBytes
	}
	if c.PluginsPerNamespace == 0 {
		c.PluginsPerNamespace = DefaultCeilingPlugins
	}
	return c
}

// PluginCounter counts the WasmPlugins of a namespace.
type PluginCounter interface {
	// CountPlugins returns how many WasmPlugins namespace holds, read from etcd.
	CountPlugins(ctx context.Context, namespace string) (int, error)
}

// PluginLimits holds namespaced WasmPlugins under the cluster's ceilings. Its mutating
// half gives a limit left unset the server's default, lowered to the ceiling — as
// LimitRanger defaults a container's resources — so that the stored object says what the
// plugin may use and ResourceQuota can charge it; its validating half refuses, with 422,
// limits above a ceiling and a plugin past the namespace's allowance.
type PluginLimits struct {
	// Ceilings are the maxima (defaults applied by the caller or here).
	Ceilings PluginCeilings
	// Plugins counts a namespace's plugins; nil = the per-namespace ceiling is not checked.
	Plugins PluginCounter
}

// Name implements admission.Mutator and admission.Validator.
func (*PluginLimits) Name() string { return "WasmPluginLimits" }

func pluginOf(a *admission.Attributes) (*wasmv1.WasmPlugin, bool) {
	if a.Resource.GroupResource() != wasmPluginsResource || a.Subresource != "" ||
		(a.Operation != admission.Create && a.Operation != admission.Update) {
		return nil, false
	}
	p, ok := a.Object.(*wasmv1.WasmPlugin)
	return p, ok
}

// Admit sets the unset limits of a namespaced plugin.
func (l *PluginLimits) Admit(_ context.Context, a *admission.Attributes) error {
	p, ok := pluginOf(a)
	if !ok {
		return nil
	}
	c := l.Ceilings.WithDefaults()
	if p.Spec.Limits == nil {
		p.Spec.Limits = &wasmv1.Limits{}
	}
	lim := p.Spec.Limits
	if lim.MemoryPages == 0 {
		lim.MemoryPages = wasmv1.DefaultMemoryPages
		if c.MemoryBytes > 0 {
			lim.MemoryPages = uint32(min(int64(lim.MemoryPages), c.MemoryBytes/wasmv1.PageBytes))
		}
	}
	if lim.Timeout == nil || lim.Timeout.Duration == 0 {
		d := wasmv1.DefaultTimeout
		if c.Timeout > 0 {
			d = min(d, c.Timeout)
		}
		lim.Timeout = &metav1.Duration{Duration: d}
	}
	if lim.MaxInstances == 0 {
		lim.MaxInstances = wasmv1.DefaultMaxInstances
		if c.MaxInstances > 0 {
			lim.MaxInstances = min(lim.MaxInstances, c.MaxInstances)
		}
	}
	if lim.MaxInputBytes == 0 {
		lim.MaxInputBytes = wasmv1.DefaultMaxInputBytes
		if c.MaxInputBytes > 0 {
			lim.MaxInputBytes = min(lim.MaxInputBytes, c.MaxInputBytes)
		}
	}
	if lim.MaxOutputBytes == 0 {
		lim.MaxOutputBytes = wasmv1.DefaultMaxOutputBytes
		if c.MaxOutputBytes > 0 {
			lim.MaxOutputBytes = min(lim.MaxOutputBytes, c.MaxOutputBytes)
		}
	}
	return nil
}

// ceilingNote ends every refusal, so that a tenant knows whom to ask.
const ceilingNote = "(the cluster's ceiling for namespaced plugins)"

// Validate refuses limits above the ceilings. An update is refused only for a limit it
// changes, so that lowering a ceiling does not freeze the plugins already above it.
func (l *PluginLimits) Validate(ctx context.Context, a *admission.Attributes) error {
	p, ok := pluginOf(a)
	if !ok {
		return nil
	}
	c := l.Ceilings.WithDefaults()
	var oldLim wasmv1.Limits
	if old, ok := a.OldObject.(*wasmv1.WasmPlugin); ok && old.Spec.Limits != nil {
		oldLim = *old.Spec.Limits
	}
	var lim wasmv1.Limits
	if p.Spec.Limits != nil {
		lim = *p.Spec.Limits
	}
	path := field.NewPath("spec", "limits")
	var errs field.ErrorList
	if c.Timeout > 0 && lim.Timeout != nil && lim.Timeout.Duration > c.Timeout && (oldLim.Timeout == nil || *oldLim.Timeout != *lim.Timeout) {
		errs = append(errs, field.Invalid(path.Child("timeout"), lim.Timeout.Duration.String(),
			fmt.Sprintf("must be at most %s %s", c.Timeout, ceilingNote)))
	}
	if c.MemoryBytes > 0 && int64(lim.MemoryPages)*wasmv1.PageBytes > c.MemoryBytes && lim.MemoryPages != oldLim.MemoryPages {
		errs = append(errs, field.Invalid(path.Child("memoryPages"), lim.MemoryPages,
			fmt.Sprintf("must be at most %d (%s per instance) %s", c.MemoryBytes/wasmv1.PageBytes, bytesText(c.MemoryBytes), ceilingNote)))
	}
	if c.MaxInstances > 0 && lim.MaxInstances > c.MaxInstances && lim.MaxInstances != oldLim.MaxInstances {
		errs = append(errs, field.Invalid(path.Child("maxInstances"), lim.MaxInstances,
			fmt.Sprintf("must be at most %d %s", c.MaxInstances, ceilingNote)))
	}
	if c.MaxInputBytes > 0 && lim.MaxInputBytes > c.MaxInputBytes && lim.MaxInputBytes != oldLim.MaxInputBytes {
		errs = append(errs, field.Invalid(path.Child("maxInputBytes"), lim.MaxInputBytes,
			fmt.Sprintf("must be at most %d (%s) %s", c.MaxInputBytes, bytesText(c.MaxInputBytes), ceilingNote)))
	}
	if c.MaxOutputBytes > 0 && lim.MaxOutputBytes > c.MaxOutputBytes && lim.MaxOutputBytes != oldLim.MaxOutputBytes {
		errs = append(errs, field.Invalid(path.Child("maxOutputBytes"), lim.MaxOutputBytes,
			fmt.Sprintf("must be at most %d (%s) %s", c.MaxOutputBytes, bytesText(c.MaxOutputBytes), ceilingNote)))
	}
	if a.Operation == admission.Create && c.PluginsPerNamespace > 0 && l.Plugins != nil {
		n, err := l.Plugins.CountPlugins(ctx, a.Namespace)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("counting the WasmPlugins of %s: %w", a.Namespace, err))
		}
		if n >= c.PluginsPerNamespace {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "namespace"),
				fmt.Sprintf("namespace %s already holds %d WasmPlugins: at most %d per namespace %s", a.Namespace, n, c.PluginsPerNamespace, ceilingNote)))
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(wasmv1.SchemeGroupVersion.WithKind("WasmPlugin").GroupKind(), a.Name, errs)
	}
	return nil
}

// bytesText prints a byte count as a binary quantity ("32Mi").
func bytesText(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }
