// Package adapter presents wasmplane's admission requests to k8s.io/apiserver's admission
// plugins (webhooks, CEL admission policies): its Attributes are k8s.io/apiserver's
// admission.Attributes over wasmplane's, its ObjectInterfaces give the plugins
// wasmplane's scheme, and warnings reach the response's Warning headers.
package adapter

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/warning"
)

// Attributes are wasmplane's admission attributes as k8s.io/apiserver's. The object is
// read from the request each time, so that a plugin that replaced it is seen.
type Attributes struct {
	a            *admission.Attributes
	user         *user.DefaultInfo
	options      runtime.Object
	reinvocation *reinvocation

	mu          sync.Mutex
	annotations [][2]string
}

var _ apiadmission.Attributes = (*Attributes)(nil)

// NewAttributes adapts one request's attributes.
func NewAttributes(a *admission.Attributes) *Attributes {
	return &Attributes{
		a:            a,
		user:         &user.DefaultInfo{Name: a.User.Name, UID: a.User.UID, Groups: a.User.Groups, Extra: a.User.Extra},
		options:      operationOptions(a.Operation, a.DryRun),
		reinvocation: &reinvocation{values: map[string]any{}},
	}
}

// operationOptions are the options kube-apiserver sends in AdmissionReview's
// request.options.
func operationOptions(op admission.Operation, dryRun bool) runtime.Object {
	var dry []string
	if dryRun {
		dry = []string{metav1.DryRunAll}
	}
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: kind}
	}
	switch op {
	case admission.Create:
		return &metav1.CreateOptions{TypeMeta: tm("CreateOptions"), DryRun: dry}
	case admission.Update:
		return &metav1.UpdateOptions{TypeMeta: tm("UpdateOptions"), DryRun: dry}
	case admission.Delete:
		return &metav1.DeleteOptions{TypeMeta: tm("DeleteOptions"), DryRun: dry}
	}
	return nil
}

func (r *Attributes) GetName() string                          { return r.a.Name }
func (r *Attributes) GetNamespace() string                     { return r.a.Namespace }
func (r *Attributes) GetResource() schema.GroupVersionResource { return r.a.Resource }
func (r *Attributes) GetSubresource() string                   { return r.a.Subresource }
func (r *Attributes) GetOperation() apiadmission.Operation {
	return apiadmission.Operation(r.a.Operation)
}
func (r *Attributes) GetOperationOptions() runtime.Object { return r.options }
func (r *Attributes) IsDryRun() bool                      { return r.a.DryRun }
func (r *Attributes) GetObject() runtime.Object           { return r.a.Object }
func (r *Attributes) GetOldObject() runtime.Object        { return r.a.OldObject }
func (r *Attributes) GetKind() schema.GroupVersionKind    { return r.a.Kind }
func (r *Attributes) GetUserInfo() user.Info              { return r.user }

func (r *Attributes) GetReinvocationContext() apiadmission.ReinvocationContext {
	return r.reinvocation
}

// AddAnnotation keeps a plugin's audit annotation ("WEBHOOK/KEY", "POLICY/KEY").
func (r *Attributes) AddAnnotation(key, value string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.annotations = append(r.annotations, [2]string{key, value})
	return nil
}

// AddAnnotationWithLevel implements admission.Attributes; with no audit log the level
// does not matter.
func (r *Attributes) AddAnnotationWithLevel(key, value string, _ audit.Level) error {
	return r.AddAnnotation(key, value)
}

// FlushAnnotations puts the audit annotations the plugins added in the request's trace
// (`wasmplane trace`) and the debug log: wasmplane has no audit log to keep them in.
func (r *Attributes) FlushAnnotations(ctx context.Context, log *slog.Logger) {
	r.mu.Lock()
	anns := r.annotations
	r.annotations = nil
	r.mu.Unlock()
	t := trace.From(ctx)
	for _, kv := range anns {
		t.Add(time.Now(), "admission", "audit annotation", kv[0], kv[1])
		log.DebugContext(ctx, "admission audit annotation", "resource", r.a.Resource.String(),
			"namespace", r.a.Namespace, "name", r.a.Name, "key", kv[0], "value", kv[1])
	}
}

// reinvocation is one request's ReinvocationContext.
type reinvocation struct {
	isReinvoke, shouldReinvoke bool
	values                     map[string]any
}

func (c *reinvocation) IsReinvoke() bool              { return c.isReinvoke }
func (c *reinvocation) SetIsReinvoke()                { c.isReinvoke = true }
func (c *reinvocation) ShouldReinvoke() bool          { return c.shouldReinvoke }
func (c *reinvocation) SetShouldReinvoke()            { c.shouldReinvoke = true }
func (c *reinvocation) SetValue(plugin string, v any) { c.values[plugin] = v }
func (c *reinvocation) Value(plugin string) any       { return c.values[plugin] }

// WithWarnings returns ctx with k8s.io/apiserver's warning recorder passing the plugins'
// warnings on to the response's Warning headers.
func WithWarnings(ctx context.Context) context.Context {
	return warning.WithWarningRecorder(ctx, recorder{ctx})
}

// recorder passes plugins' warnings on to the response's Warning headers.
type recorder struct{ ctx context.Context }

// AddWarning implements warning.Recorder.
func (r recorder) AddWarning(_, text string) { admission.AddWarning(r.ctx, text) }

// Reinvoke decides whether a mutating plugin runs once more for a request (its
// ReinvokeRequest): a reinvocation round runs when a later plugin changed the object
// after an IfNeeded hook saw it, or a hook asked for it; the plugin then calls only
// those hooks, once.
func Reinvoke(attrs *Attributes, changedAfter bool) bool {
	c := attrs.reinvocation
	if c.IsReinvoke() || !(changedAfter || c.ShouldReinvoke()) {
		return false
	}
	c.SetIsReinvoke()
	return true
}
