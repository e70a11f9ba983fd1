// Package admission is the admission chain a write passes through inside the API server
// (the seed's createHandler): mutating plugins, then object validation, then validating
// plugins. Built-in plugins and dynamic sources (WASM plugins) implement the small
// interfaces defined here; core never imports the WASM host.
package admission

import (
	"time"

	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/core/trace"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Operation is what a request does to an object.
type Operation string

// The admission operations, as Kubernetes names them.
const (
	Create  Operation = "CREATE"
	Update  Operation = "UPDATE"
	Delete  Operation = "DELETE"
	Connect Operation = "CONNECT"
)

// UserInfo is who made the request.
type UserInfo struct {
	// Name, UID and Groups as Kubernetes' user.Info.
	Name, UID string
	Groups    []string
	// Extra carries authenticator-specific attributes.
	Extra map[string][]string
}

// Attributes describe one admission request.
type Attributes struct {
	// Kind of the object, e.g. /v1, Kind=Pod.
	Kind schema.GroupVersionKind
	// Resource and Subresource addressed, e.g. pods and "status".
	Resource    schema.GroupVersionResource
	Subresource string
	// Namespace and Name of the object.
	Namespace, Name string
	// Operation is the verb.
	Operation Operation
	// User made the request.
	User UserInfo
	// Object is the new object (nil on delete); mutating plugins change it in place or
	// replace it with SetObject.
	Object runtime.Object
	// OldObject is the stored object (nil on create).
	OldObject runtime.Object
	// DryRun is true when nothing will be stored.
	DryRun bool

	// memo holds what the dynamic plugins of one phase derive from the request and share
	// (a WASM plugin's encoded request). The chain creates it for its dynamic plugins and
	// empties it whenever a plugin changed the object; it is nil outside a chain.
	memo *memo
	// values are what plugins keep for the rest of the request (SetValue).
	values map[any]any
	// admitted is set once a chain's mutating phase ran to its end, and dynamicChange
	// when one of its dynamic plugins changed the object meanwhile.
	admitted, dynamicChange bool
}

// MaybeChangedByDynamic reports whether a dynamic mutating plugin (webhook, admission
// policy, WASM plugin) may have changed the object: false only once a chain's mutating
// phase ran and compared the object before and after each of them. Built-in plugins
// are not counted: they change only objects of their own built-in kinds.
func (a *Attributes) MaybeChangedByDynamic() bool { return !a.admitted || a.dynamicChange }

// Value returns what a plugin kept under key for this request (SetValue), or nil.
func (a *Attributes) Value(key any) any { return a.values[key] }

// SetValue keeps v under key for the rest of the request, so that a mutating plugin run
// again (reinvocation) finds what its first run left. Mutating plugins run one at a
// time; validating plugins, which run at the same time, must not call it.
func (a *Attributes) SetValue(key, v any) {
	if a.values == nil {
		a.values = map[any]any{}
	}
	a.values[key] = v
}

// memo is safe for the validating plugins, which run at the same time.
type memo struct {
	mu sync.Mutex
	m  map[any]*memoEntry
}

type memoEntry struct {
	once sync.Once
	v    any
	err  error
}

// Shared returns what compute derives from the request as it is now, computed once for
// all the dynamic plugins of the current phase that ask for key — validating plugins ask
// at the same time, and the others wait for the first one's answer. The chain forgets it
// when a plugin changed the object and when the phase ends; outside a chain's dynamic
// plugins nothing would tell when the object changes, so compute runs every time.
func (a *Attributes) Shared(key any, compute func() (any, error)) (any, error) {
	m := a.memo
	if m == nil {
		return compute()
	}
	m.mu.Lock()
	e := m.m[key]
	if e == nil {
		e = &memoEntry{}
		m.m[key] = e
	}
	m.mu.Unlock()
	e.once.Do(func() { e.v, e.err = compute() })
	return e.v, e.err
}

// forget drops what the plugins derived from an object that has since changed.
func (m *memo) forget() {
	m.mu.Lock()
	clear(m.m)
	m.mu.Unlock()
}

// Memoizing tells whether Shared keeps what it computes for the other plugins of the
// phase; when it does not (a lone validating plugin, or outside a chain), a plugin may
// write what it derives straight where it needs it.
func (a *Attributes) Memoizing() bool { return a.memo != nil }

// startMemo lets the dynamic plugins of a phase share derived values; the returned func
// ends the phase.
func (a *Attributes) startMemo() func() {
	a.memo = &memo{m: map[any]*memoEntry{}}
	return func() { a.memo = nil }
}

// Mutator may change the object of a request it handles.
type Mutator interface {
	// Name identifies the plugin in errors and traces.
	Name() string
	// Admit mutates a.Object or refuses the request.
	Admit(ctx context.Context, a *Attributes) error
}

// Validator may refuse a request it handles.
type Validator interface {
	// Name identifies the plugin in errors and traces.
	Name() string
	// Validate refuses the request by returning an error.
	Validate(ctx context.Context, a *Attributes) error
}

// Selective is implemented by a dynamic mutator or validator that can tell before it
// runs, from the rules and selectors of what it enforces, that a request concerns none
// of it (the admission webhooks and policies, whose configurations name the requests
// they apply to). The chain leaves such a validator out of that request's validating
// phase — one cluster-wide webhook configuration or policy binding would otherwise put
// a second validator beside every namespace's WASM plugin, and a lone plugin would run
// on a goroutine of its own, with a fresh stack to grow, instead of on the request's —
// and skips such a mutator at its turn, which spares the encodings of the object that
// tell whether a mutator changed it.
type Selective interface {
	// Concerns reports whether the plugin may act on a; true when it cannot tell.
	Concerns(ctx context.Context, a *Attributes) bool
}

// ReinvocableMutator is a mutator that asks to run again when a later plugin changed the
// object (Kubernetes' reinvocationPolicy: IfNeeded).
type ReinvocableMutator interface {
	Mutator
	// Reinvoke reports whether the plugin wants to see later changes.
	Reinvoke() bool
}

// RequestReinvoker is a mutator that decides per request whether it runs once more
// after the other dynamic mutators: a set of mutating webhooks reinvokes its IfNeeded
// members when a later member, or a later plugin, changed the object.
type RequestReinvoker interface {
	Mutator
	// ReinvokeRequest reports whether the plugin runs again; changedAfter is whether a
	// later dynamic plugin changed the object.
	ReinvokeRequest(a *Attributes, changedAfter bool) bool
}

// Source supplies plugins that change at run time (WASM plugins). The chain acquires the
// current set once per phase of a request and releases it when the phase ends, so that a
// swap takes effect at once while requests in flight finish on the set they started with.
type Source interface {
	// Acquire returns the mutating and validating plugins that match a, in order, and a
	// release func the chain calls when it is done with them.
	Acquire(a *Attributes) (mutators []Mutator, validators []Validator, release func())
}

// Chain runs built-in plugins first, then dynamic ones.
type Chain struct {
	// Mutating and Validating are the built-in plugins.
	Mutating   []Mutator
	Validating []Validator
	// Sources are the dynamic plugin sources.
	Sources []Source
	// Final are built-in validating plugins that run after the dynamic ones, once every
	// other plugin has admitted the request (ResourceQuota, which charges the quota).
	Final []Validator
}

// Admit runs every mutating plugin. If a dynamic plugin changed the object after an
// earlier reinvocable one ran, the earlier ones run once more (IfNeeded).
func (c *Chain) Admit(ctx context.Context, a *Attributes) error {
	if c == nil {
		return nil
	}
	t := trace.From(ctx)
	a.admitted, a.dynamicChange = false, false
	for _, m := range c.Mutating {
		start := time.Now()
		err := m.Admit(ctx, a)
		t.Add(start, "admission", m.Name(), outcome("mutate", err, false), errText(err))
		if err != nil {
			return err
		}
	}
	var dynamic []Mutator
	for _, s := range c.Sources {
		ms, _, release := s.Acquire(a)
		defer release()
		dynamic = append(dynamic, ms...)
	}
	if len(dynamic) == 0 {
		a.admitted = true
		return nil
	}
	defer a.startMemo()()
	changedAfter, skipped := make([]bool, len(dynamic)), make([]bool, len(dynamic))
	// Only the dynamic mutators run from here on, so the snapshot after one is the
	// snapshot before the next: one encoding of the object per plugin, not two. The
	// first is taken before the first mutator that runs: with none concerned, none.
	var cur string
	taken := false
	admit := func(m Mutator, phase string) (bool, error) {
		if !taken {
			cur, taken = snapshot(a.Object), true
		}
		start := time.Now()
		err := m.Admit(ctx, a)
		changed := false
		if err == nil {
			next := snapshot(a.Object)
			changed = !equalSnapshots(cur, next)
			cur = next
		}
		if changed {
			a.memo.forget()
			a.dynamicChange = true
		}
		t.Add(start, "admission", m.Name(), outcome(phase, err, changed), errText(err))
		return changed, err
	}
	for i, m := range dynamic {
		// Asked at its turn, with the object as the mutators before it left it, as
		// k8s.io/apiserver's plugins match their webhooks and policies at theirs. One
		// left out never saw the request, so it is not reinvoked either.
		if sel, ok := m.(Selective); ok && !sel.Concerns(ctx, a) {
			skipped[i] = true
			continue
		}
		changed, err := admit(m, "mutate")
		if err != nil {
			return err
		}
		if changed {
			for j := 0; j < i; j++ {
				changedAfter[j] = true
			}
		}
	}
	for i, m := range dynamic {
		if skipped[i] {
			continue
		}
		again := false
		switch r := m.(type) {
		case RequestReinvoker:
			again = r.ReinvokeRequest(a, changedAfter[i])
		case ReinvocableMutator:
			again = changedAfter[i] && r.Reinvoke()
		}
		if again {
			if _, err := admit(m, "reinvoked mutate"); err != nil {
				return err
			}
		}
	}
	a.admitted = true
	return nil
}

// Validate runs every validating plugin; the first refusal in the chain's order wins.
func (c *Chain) Validate(ctx context.Context, a *Attributes) error {
	return c.StartValidate(ctx, a).Finish()
}

// StartValidate begins the validating phase of a request whose object will not change
// any more. The dynamic validators after the first start at once, each on its own
// goroutine — as Kubernetes calls validating webhooks in parallel — so that they run
// beside the object's own validation, which the caller does before Finish; the first runs
// in Finish. The caller must call Finish or Abandon, and must not change a.Object until
// then.
func (c *Chain) StartValidate(ctx context.Context, a *Attributes) *Validation {
	v := &Validation{chain: c, ctx: ctx, a: a}
	if c == nil {
		return v
	}
	for _, s := range c.Sources {
		_, vs, release := s.Acquire(a)
		v.release = append(v.release, release)
		for _, p := range vs {
			if sel, ok := p.(Selective); ok && !sel.Concerns(ctx, a) {
				continue
			}
			v.runs = append(v.runs, &validatorRun{plugin: p})
		}
	}
	if len(v.runs) <= 1 {
		// A lone validator runs in Finish on the request's goroutine, with nothing to
		// share its derived values with and nothing to cancel: no memo, no cancellable
		// context (whose registration with the request's context allocates), so that
		// what runs before its call is only what the call needs.
		return v
	}
	// Validating plugins do not change the object: what one derives from the request
	// (its encoding) serves every other.
	v.endMemo = a.startMemo()
	rctx, cancel := context.WithCancel(ctx)
	v.rctx, v.cancel = rctx, cancel
	// The first validator runs in Finish on the request's own goroutine: a lone plugin
	// then costs no goroutine start (a fresh stack that wazero's call path grows again
	// each time) and no wake-up of an idle core, which on a VM cost as much as the call.
	v.wg.Add(len(v.runs) - 1)
	for _, r := range v.runs[1:] {
		go func() {
			defer v.wg.Done()
			r.run(rctx, a)
		}()
	}
	return v
}

// Validation is a validating phase under way (StartValidate).
type Validation struct {
	chain   *Chain
	ctx     context.Context
	a       *Attributes
	runs    []*validatorRun
	wg      sync.WaitGroup
	rctx    context.Context // the dynamic validators' context, cancelled by end
	cancel  context.CancelFunc
	release []func()
	endMemo func()
}

// validatorRun is one dynamic validator's call. What it reports — warnings, trace steps —
// is kept aside and passed on in the chain's order once the earlier plugins admitted the
// request, so the client sees what a plugin-by-plugin run would have shown.
type validatorRun struct {
	plugin   Validator
	err      error
	trace    trace.Trace
	warnings func() []string
}

func (r *validatorRun) run(ctx context.Context, a *Attributes) {
	ctx, r.warnings = WithWarnings(trace.With(ctx, &r.trace))
	start := time.Now()
	r.err = r.plugin.Validate(ctx, a)
	r.trace.Add(start, "admission", r.plugin.Name(), outcome("validate", r.err, false), errText(r.err))
}

// Finish runs the built-in validating plugins, then the first dynamic one, waits for the
// others and runs the final ones; the first refusal in the chain's order wins. A nil
// Validation (no chain) admits.
func (v *Validation) Finish() error {
	if v == nil {
		return nil
	}
	defer v.end()
	c := v.chain
	if c == nil {
		return nil
	}
	t := trace.From(v.ctx)
	validate := func(p Validator) error {
		start := time.Now()
		err := p.Validate(v.ctx, v.a)
		t.Add(start, "admission", p.Name(), outcome("validate", err, false), errText(err))
		return err
	}
	for _, p := range c.Validating {
		if err := validate(p); err != nil {
			return err
		}
	}
	// The first dynamic validator reports straight into the request's trace and warnings:
	// it runs here, after the built-in ones and before the others' reports are passed on,
	// which is where its reports go in the chain's order anyway.
	if len(v.runs) > 0 {
		if err := validate(v.runs[0].plugin); err != nil {
			v.runs[0].err = err
		}
	}
	v.wg.Wait()
	for i, r := range v.runs {
		if i > 0 {
			t.Append(r.trace.Steps()...)
			for _, w := range r.warnings() {
				AddWarning(v.ctx, w)
			}
		}
		if r.err != nil {
			return r.err
		}
	}
	for _, p := range c.Final {
		if err := validate(p); err != nil {
			return err
		}
	}
	return nil
}

// Abandon ends a validating phase whose request failed before Finish: the dynamic
// validators are cancelled and waited for, and nothing they reported is kept.
func (v *Validation) Abandon() {
	if v != nil {
		v.end()
	}
}

// end cancels what still runs, waits for it and releases the plugins.
func (v *Validation) end() {
	if v.cancel != nil {
		v.cancel()
	}
	v.wg.Wait()
	for _, release := range v.release {
		release()
	}
	if v.endMemo != nil {
		v.endMemo()
	}
}

// outcome words an admission plugin's result for a trace.
func outcome(phase string, err error, changed bool) string {
	switch {
	case err != nil:
		return phase + ": denied"
	case changed:
		return phase + ": patched"
	}
	return phase + ": allowed"
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// snapshot is a cheap fingerprint of an object for change detection: its JSON.
func snapshot(obj runtime.Object) string {
	if obj == nil {
		return ""
	}
	data, err := jsonMarshal(obj)
	if err != nil {
		return fmt.Sprintf("%p", obj)
	}
	return string(data)
}

func equalSnapshots(a, b string) bool { return a == b }

// Denied is the error of a plugin that refused a request: Kubernetes' shape for a
// webhook denial ("admission webhook %q denied the request: …"), code 403 unless the
// plugin chose another.
func Denied(plugin string, code int32, reason metav1.StatusReason, message string) error {
	if code == 0 {
		code = http.StatusForbidden
	}
	if reason == "" {
		reason = reasonForCode[code]
	}
	msg := fmt.Sprintf("admission plugin %q denied the request", plugin)
	if message != "" {
		msg += ": " + message
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}

var reasonForCode = map[int32]metav1.StatusReason{
	http.StatusBadRequest: metav1.StatusReasonBadRequest, http.StatusUnauthorized: metav1.StatusReasonUnauthorized,
	http.StatusForbidden: metav1.StatusReasonForbidden, http.StatusNotFound: metav1.StatusReasonNotFound,
	http.StatusConflict: metav1.StatusReasonConflict, http.StatusUnprocessableEntity: metav1.StatusReasonInvalid,
	http.StatusTooManyRequests: metav1.StatusReasonTooManyRequests,
}

type warningsKey struct{}

type warnings struct {
	mu   sync.Mutex
	msgs []string
}

// WithWarnings returns a context that collects warnings for the response, and a function
// that returns what was collected.
func WithWarnings(ctx context.Context) (context.Context, func() []string) {
	w := &warnings{}
	return context.WithValue(ctx, warningsKey{}, w), func() []string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return append([]string(nil), w.msgs...)
	}
}

// AddWarning records a warning for the client (a `Warning:` header), if ctx collects them.
func AddWarning(ctx context.Context, msg string) {
	if w, ok := ctx.Value(warningsKey{}).(*warnings); ok && msg != "" {
		w.mu.Lock()
		w.msgs = append(w.msgs, msg)
		w.mu.Unlock()
	}
}
