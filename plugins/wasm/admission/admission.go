// Package admission makes a loaded WASM plugin an admission plugin of the API server:
// it implements core/admission's Mutator and Validator with the mutate and validate hooks.
package admission

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/trace"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Caller is the part of *wasm.Plugin the adapter needs.
type Caller interface {
	Mutate(ctx context.Context, req *abi.AdmissionRequest) (*abi.MutateResponse, error)
	Validate(ctx context.Context, req *abi.AdmissionRequest) (*abi.ValidateResponse, error)
}

// EncodedCaller is a Caller that also takes requests already encoded as JSON, which lets
// the adapter encode a request once for all the plugins that see it (*wasm.Plugin is one).
type EncodedCaller interface {
	Caller
	MutateJSON(ctx context.Context, req []byte) (*abi.MutateResponse, error)
	// ValidateJSON calls validate with the request build appends to dst for the module
	// that answers, its objects in the form the module asked for (ABI §7.1). dst may be
	// the module's own input buffer, so that the request is written once.
	ValidateJSON(ctx context.Context, build func(dst []byte, form wasm.RequestForm) ([]byte, error)) (*abi.ValidateResponse, error)
}

// Plugin adapts one WASM plugin to the admission chain.
type Plugin struct {
	// PluginName is shown in denials and logs ("namespace/name" for tenant plugins).
	PluginName string
	// Caller runs the hooks.
	Caller Caller
	// Ignore is failurePolicy Ignore: a failing plugin is skipped, not fatal.
	Ignore bool
	// NoReinvocation is reinvocationPolicy Never; by default (IfNeeded) the mutate hook
	// runs once more when a later plugin changed the object.
	NoReinvocation bool
	// Log receives skipped failures.
	Log *slog.Logger

	// uids gives each call a uid of its own.
	uids uidSource
}

// Name implements admission.Mutator and admission.Validator.
func (p *Plugin) Name() string { return p.PluginName }

// Reinvoke implements admission.ReinvocableMutator: unless the plugin opted out, a WASM
// mutator sees the changes of the plugins after it.
func (p *Plugin) Reinvoke() bool { return !p.NoReinvocation }

// Admit runs the mutate hook and applies its JSON patch to a.Object.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	var resp *abi.MutateResponse
	if c, ok := p.Caller.(EncodedCaller); ok {
		req, err := p.requestJSON(a, wasm.RequestForm{})
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if resp, err = c.MutateJSON(ctx, req); err != nil {
			return p.failed(ctx, err)
		}
	} else {
		req, err := request(a)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if resp, err = p.Caller.Mutate(ctx, req); err != nil {
			return p.failed(ctx, err)
		}
	}
	p.report(ctx, a, resp.Warnings, resp.AuditAnnotations)
	if !resp.Allowed {
		return admission.Denied(p.PluginName, resp.Code, metav1.StatusReason(resp.Reason), resp.Message)
	}
	if len(resp.Patch) == 0 || a.Object == nil {
		return nil
	}
	patched, err := applyPatch(a.Object, resp.Patch)
	if err != nil {
		return p.failed(ctx, fmt.Errorf("applying the plugin's patch: %w", err))
	}
	if err := checkImmutable(a.Object, patched); err != nil {
		return p.failed(ctx, err)
	}
	a.Object = patched
	return nil
}

// Validate runs the validate hook.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	var resp *abi.ValidateResponse
	if c, ok := p.Caller.(EncodedCaller); ok {
		var encErr, err error
		if wp, ok := c.(*wasm.Plugin); ok {
			resp, encErr, err = p.validateWasm(ctx, wp, a)
		} else {
			resp, encErr, err = p.validateEncoded(ctx, c, a)
		}
		if encErr != nil {
			return apierrors.NewInternalError(encErr)
		}
		if err != nil {
			return p.failed(ctx, err)
		}
	} else {
		req, err := request(a)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if resp, err = p.Caller.Validate(ctx, req); err != nil {
			return p.failed(ctx, err)
		}
	}
	p.report(ctx, a, resp.Warnings, resp.AuditAnnotations)
	if !resp.Allowed {
		return admission.Denied(p.PluginName, resp.Code, metav1.StatusReason(resp.Reason), resp.Message)
	}
	return nil
}

// validateEncoded calls c.ValidateJSON with a's request; encErr is the request's encoding
// error, err the call's.
func (p *Plugin) validateEncoded(ctx context.Context, c EncodedCaller, a *admission.Attributes) (resp *abi.ValidateResponse, encErr, err error) {
	resp, err = c.ValidateJSON(ctx, func(dst []byte, form wasm.RequestForm) ([]byte, error) {
		req, err := p.appendRequest(dst, a, form)
		encErr = err
		return req, err
	})
	return resp, encErr, err
}

// validateWasm is validateEncoded on the concrete *wasm.Plugin, so that the request's
// builder and what it captures stay on the stack: through the interface they are
// allocated on every call.
func (p *Plugin) validateWasm(ctx context.Context, wp *wasm.Plugin, a *admission.Attributes) (resp *abi.ValidateResponse, encErr, err error) {
	resp, err = wp.ValidateJSON(ctx, func(dst []byte, form wasm.RequestForm) ([]byte, error) {
		req, err := p.appendRequest(dst, a, form)
		encErr = err
		return req, err
	})
	return resp, encErr, err
}

// report passes a hook's warnings to the client (Warning headers) and records its audit
// annotations, keyed "<plugin>/<key>" as Kubernetes keys a webhook's, in the request's
// trace (shown by pods/trace for creates) and the server log: wasmplane has no audit log.
func (p *Plugin) report(ctx context.Context, a *admission.Attributes, warnings []string, audit map[string]string) {
	for _, w := range warnings {
		admission.AddWarning(ctx, w)
	}
	if len(audit) == 0 {
		return
	}
	t := trace.From(ctx)
	now := time.Now()
	for _, k := range slices.Sorted(maps.Keys(audit)) {
		key := p.PluginName + "/" + k
		t.Add(now, "admission", p.PluginName, "audit annotation", key+"="+audit[k])
		if p.Log != nil {
			p.Log.Info("admission audit annotation", "plugin", p.PluginName, "key", key, "value", audit[k],
				"operation", a.Operation, "resource", a.Resource.Resource, "namespace", a.Namespace, "name", a.Name, "user", a.User.Name)
		}
	}
}

// failed applies the failure policy to a plugin error, as Kubernetes does for webhooks.
func (p *Plugin) failed(ctx context.Context, err error) error {
	if p.Ignore {
		wasm.BudgetOf(p.Caller).Log(ctx, p.Log, p.PluginName, slog.LevelWarn, "admission plugin failed; ignored by its failurePolicy",
			"plugin", p.PluginName, "kind", wasm.KindOf(err), "err", err)
		return nil
	}
	return apierrors.NewInternalError(fmt.Errorf("failed calling admission plugin %q: %w", p.PluginName, err))
}

// memoKey is the key of a request's shared encoding in admission.Attributes' memo: one
// per form of the objects.
type memoKey struct{ form wasm.ObjectForm }

const uidPrefix = `{"uid":"`

// requestJSON returns the JSON of request(a), as encoding/json writes it (appendRequest).
func (p *Plugin) requestJSON(a *admission.Attributes, form wasm.RequestForm) ([]byte, error) {
	return p.appendRequest(nil, a, form)
}

// appendRequest appends the JSON of request(a) to dst. Everything after the uid is encoded
// once per admission phase and shared by the plugins that see the request (the chain drops
// it when a plugin changes the object); each call still gets a uid of its own, as each
// webhook call does in Kubernetes. A request for a module that reads only some of its
// members (form.Members) is written with those alone, for that module.
func (p *Plugin) appendRequest(dst []byte, a *admission.Attributes, form wasm.RequestForm) ([]byte, error) {
	if form.Members != nil {
		return p.appendMembers(dst, a, form)
	}
	if !a.Memoizing() {
		// Nothing to share it with (a lone validating plugin): the body is written once,
		// where the plugin reads it, rather than on the heap and then copied.
		if dst == nil {
			dst = make([]byte, 0, 1024)
		}
		return appendBody(p.appendUID(dst), a, form.Objects, nil)
	}
	shared, err := a.Shared(memoKey{form.Objects}, func() (any, error) {
		return appendBody(make([]byte, 0, 1024), a, form.Objects, nil)
	})
	if err != nil {
		return nil, err
	}
	body := shared.([]byte)
	if dst == nil {
		dst = make([]byte, 0, len(uidPrefix)+uuidLen+1+len(body))
	}
	return append(p.appendUID(dst), body...), nil
}

// appendMembers appends the JSON of request(a) with only the members form.Members keeps,
// as RequestForm describes it: the request's first member, after the brace, has no comma
// before it, and which one it is depends on what is kept.
func (p *Plugin) appendMembers(dst []byte, a *admission.Attributes, form wasm.RequestForm) ([]byte, error) {
	if dst == nil {
		dst = make([]byte, 0, 256)
	}
	open := len(dst)
	dst = append(dst, '{')
	if form.Members.Keeps("uid") {
		dst = append(p.uids.append(append(dst, `,"uid":"`...)), '"')
	}
	dst, err := appendBody(dst, a, form.Objects, form.Members)
	if err != nil {
		return nil, err
	}
	if dst[open+1] == ',' {
		dst = append(dst[:open+1], dst[open+2:]...)
	}
	return dst, nil
}

// appendUID appends the request's first member, the call's own uid, without the comma
// after it.
func (p *Plugin) appendUID(dst []byte) []byte {
	return append(p.uids.append(append(dst, uidPrefix...)), '"') // hex digits and dashes: nothing to escape
}

// uuidLen is the length of a UUID's text.
const uuidLen = 36

// uidSource makes the uids of a plugin's calls: random UUIDs (version 4) of which the
// random bits are drawn once and the last 64 count calls, so that each call's uid is its
// own, as unlikely to collide with another plugin's as independent random UUIDs are,
// without reading the system's random source on every call (a lone plugin's call on a
// create runs with the CPU's caches cold, where that read is a few microseconds).
type uidSource struct {
	once   sync.Once
	hi, lo uint64
	n      atomic.Uint64
}

// append appends the next uid's text.
func (u *uidSource) append(dst []byte) []byte {
	u.once.Do(func() {
		var b [16]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		u.hi, u.lo = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	})
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.hi)
	binary.BigEndian.PutUint64(b[8:], u.lo+u.n.Add(1))
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10 (RFC 9562)
	dst = hex.AppendEncode(dst, b[:4])
	for _, part := range [][]byte{b[4:6], b[6:8], b[8:10], b[10:]} {
		dst = hex.AppendEncode(append(dst, '-'), part)
	}
	return dst
}

// appendBody appends the members of request(a) after the uid that keep keeps (all for a
// nil keep), from the comma before "kind" to the closing brace: the objects are spliced
// in rather than copied by a second pass of encoding/json over a RawMessage, and compact
// pods are written in place.
func appendBody(dst []byte, a *admission.Attributes, form wasm.ObjectForm, keep *wasm.Members) ([]byte, error) {
	body := appendHead(dst, a, keep)
	for _, o := range [...]struct {
		name   string
		member string
		obj    runtime.Object
	}{{"object", `,"object":`, a.Object}, {"oldObject", `,"oldObject":`, a.OldObject}} {
		kid, ok := keep.Member(o.name)
		if !ok {
			continue
		}
		var err error
		if body, err = appendObject(body, o.member, o.obj, a, form, kid); err != nil {
			return nil, err
		}
	}
	if a.DryRun && keep.Keeps("dryRun") {
		body = append(body, `,"dryRun":true`...)
	}
	return append(body, '}'), nil
}

// appendObject appends member and obj as encode renders it, or in the smaller form a
// plugin asked for (a fraction of the bytes to write and to read): any object as its
// object metadata document (ABI §7.3), a Pod as its compact pod document (§7.5), either
// with the members keep keeps; nothing if obj is nil.
func appendObject(dst []byte, member string, obj runtime.Object, a *admission.Attributes, form wasm.ObjectForm, keep *wasm.Members) ([]byte, error) {
	if form == wasm.ObjectMetadata && obj != nil && !reflect.ValueOf(obj).IsNil() {
		if out, ok := wasm.AppendObjectMetadata(append(dst, member...), obj, a.Kind, keep); ok {
			return out, nil
		}
	}
	if pod, isPod := obj.(*corev1.Pod); form == wasm.CompactPods && isPod && pod != nil {
		out, err := wasm.AppendCompactPod(append(dst, member...), pod, keep)
		if err != nil {
			return nil, fmt.Errorf("encoding the compact pod: %w", err)
		}
		return out, nil
	}
	data, err := encode(obj, a)
	if err != nil || len(data) == 0 {
		return dst, err
	}
	return append(append(dst, member...), data...), nil
}

// appendHead writes abi.AdmissionRequest's members from "kind" to "userInfo", after a
// comma, as encoding/json writes them (TestRequestJSON compares the two): written by hand
// because encoding/json's reflection is cold when a request comes.
func appendHead(dst []byte, a *admission.Attributes, keep *wasm.Members) []byte {
	str := wasm.AppendJSONString
	if keep.Keeps("kind") {
		dst = str(append(dst, `,"kind":{"group":`...), a.Kind.Group)
		dst = str(append(dst, `,"version":`...), a.Kind.Version)
		dst = append(str(append(dst, `,"kind":`...), a.Kind.Kind), '}')
	}
	if keep.Keeps("resource") {
		dst = str(append(dst, `,"resource":{"group":`...), a.Resource.Group)
		dst = str(append(dst, `,"version":`...), a.Resource.Version)
		dst = append(str(append(dst, `,"resource":`...), a.Resource.Resource), '}')
	}
	for _, m := range []struct{ name, v string }{{"subResource", a.Subresource}, {"name", a.Name}, {"namespace", a.Namespace}} {
		if m.v != "" && keep.Keeps(m.name) {
			dst = str(append(append(append(dst, `,"`...), m.name...), `":`...), m.v)
		}
	}
	if keep.Keeps("operation") {
		dst = str(append(dst, `,"operation":`...), string(a.Operation))
	}
	if !keep.Keeps("userInfo") {
		return dst
	}
	u := &a.User
	dst = str(append(dst, `,"userInfo":{"username":`...), u.Name)
	if u.UID != "" {
		dst = str(append(dst, `,"uid":`...), u.UID)
	}
	if len(u.Groups) > 0 {
		dst = appendStrings(append(dst, `,"groups":`...), u.Groups)
	}
	if len(u.Extra) > 0 {
		dst = append(dst, `,"extra":{`...)
		for i, k := range slices.Sorted(maps.Keys(u.Extra)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendStrings(append(str(dst, k), ':'), u.Extra[k])
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendStrings writes a []string as encoding/json does (nil is null).
func appendStrings(dst []byte, list []string) []byte {
	if list == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = wasm.AppendJSONString(dst, s)
	}
	return append(dst, ']')
}

// request builds the ABI's AdmissionRequest.
func request(a *admission.Attributes) (*abi.AdmissionRequest, error) {
	req := &abi.AdmissionRequest{
		UID:         string(uuid.NewUUID()),
		Kind:        abi.GroupVersionKind{Group: a.Kind.Group, Version: a.Kind.Version, Kind: a.Kind.Kind},
		Resource:    abi.GroupVersionResource{Group: a.Resource.Group, Version: a.Resource.Version, Resource: a.Resource.Resource},
		SubResource: a.Subresource, Name: a.Name, Namespace: a.Namespace, Operation: string(a.Operation),
		UserInfo: abi.UserInfo{Username: a.User.Name, UID: a.User.UID, Groups: a.User.Groups, Extra: a.User.Extra},
		DryRun:   a.DryRun,
	}
	var err error
	if req.Object, err = encode(a.Object, a); err != nil {
		return nil, err
	}
	if req.OldObject, err = encode(a.OldObject, a); err != nil {
		return nil, err
	}
	return req, nil
}

// encode renders obj as JSON with its apiVersion and kind, as a webhook would see it.
func encode(obj runtime.Object, a *admission.Attributes) (json.RawMessage, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", a.Kind.Kind, err)
	}
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		// Stored objects carry no TypeMeta; plugins expect it. Both members are omitempty,
		// so they are absent from data and can be spliced in front of the others, which
		// costs far less than a round trip through a map.
		if len(data) < 2 || data[0] != '{' {
			return nil, fmt.Errorf("encoding %s: not a JSON object", a.Kind.Kind)
		}
		av, _ := json.Marshal(a.Kind.GroupVersion().String())
		k, _ := json.Marshal(a.Kind.Kind)
		out := make([]byte, 0, len(data)+len(av)+len(k)+24)
		out = append(out, `{"apiVersion":`...)
		out = append(out, av...)
		out = append(out, `,"kind":`...)
		out = append(out, k...)
		if len(data) > 2 {
			out = append(out, ',')
		}
		data = append(out, data[1:]...)
	}
	return data, nil
}

// applyPatch applies RFC 6902 operations to obj and decodes the result into a new
// object of the same type.
func applyPatch(obj runtime.Object, ops []abi.PatchOperation) (runtime.Object, error) {
	patchJSON, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encoding patch: %w", err)
	}
	patch, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		return nil, fmt.Errorf("decoding patch: %w", err)
	}
	orig, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding object: %w", err)
	}
	out, err := patch.Apply(orig)
	if err != nil {
		return nil, fmt.Errorf("patch does not apply: %w", err)
	}
	fresh := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(fresh); err != nil {
		return nil, fmt.Errorf("patched object does not decode: %w", err)
	}
	return fresh, nil
}

// checkImmutable refuses patches that touch what identifies the object.
func checkImmutable(before, after runtime.Object) error {
	b, err := meta.Accessor(before)
	if err != nil {
		return fmt.Errorf("reading metadata: %w", err)
	}
	a, err := meta.Accessor(after)
	if err != nil {
		return fmt.Errorf("reading patched metadata: %w", err)
	}
	switch {
	case a.GetName() != b.GetName():
		return fmt.Errorf("the plugin may not change metadata.name")
	case a.GetNamespace() != b.GetNamespace():
		return fmt.Errorf("the plugin may not change metadata.namespace")
	case a.GetUID() != b.GetUID():
		return fmt.Errorf("the plugin may not change metadata.uid")
	case a.GetResourceVersion() != b.GetResourceVersion():
		return fmt.Errorf("the plugin may not change metadata.resourceVersion")
	}
	return nil
}
