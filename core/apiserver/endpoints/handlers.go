package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/apiserver/apply"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// DefaultMaxRequestBodyBytes is Kubernetes' limit on a request body (3 MiB).
const DefaultMaxRequestBodyBytes = 3 * 1024 * 1024

// Scope is everything a handler needs to serve one resource.
type Scope struct {
	// Store is the resource's REST behaviour.
	Store *registry.Store
	// Codecs encode and decode.
	Codecs *Codecs
	// MaxRequestBodyBytes bounds request bodies (413 beyond).
	MaxRequestBodyBytes int64
	// Admission is the chain writes pass through; nil = none.
	Admission registry.Admission
	// Now is the clock used for ages in tables; nil = time.Now.
	Now func() time.Time
	// Fields keeps managedFields and serves apply; nil = neither.
	Fields *apply.Managers
}

func (s *Scope) resource() *registry.Resource { return s.Store.Resource }

func (s *Scope) gv() schema.GroupVersion { return s.resource().GroupVersion }

// Request carries the parsed path of one call.
type Request struct {
	// Namespace and Name from the URL ("" where absent).
	Namespace, Name string
	// Subresource is the sub-path served ("status", "binding", …; "" for the object).
	Subresource string
}

// readBody reads at most the limit, answering 413 beyond it.
func (s *Scope) readBody(req *http.Request) ([]byte, error) {
	return s.readBodyLimit(req, s.MaxRequestBodyBytes)
}

// readBodyLimit reads at most limit bytes (0 = the default), answering 413 beyond it.
func (s *Scope) readBodyLimit(req *http.Request, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxRequestBodyBytes
	}
	if req.Body == nil {
		return nil, nil
	}
	defer req.Body.Close()
	data, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading request body: %v", err))
	}
	if int64(len(data)) > limit {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", limit))
	}
	return data, nil
}

// fieldValidation returns the directive of the request: Strict, Warn (default) or Ignore.
func fieldValidation(q url.Values) (string, error) {
	v := q.Get("fieldValidation")
	switch v {
	case "":
		return metav1.FieldValidationWarn, nil
	case metav1.FieldValidationStrict, metav1.FieldValidationWarn, metav1.FieldValidationIgnore:
		return v, nil
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("fieldValidation parameter unsupported: %s", v))
}

// decodeObject decodes a body into the resource's type under the field-validation directive.
func (s *Scope) decodeObject(w http.ResponseWriter, req *http.Request, body []byte, want schema.GroupVersionKind, into runtime.Object) (runtime.Object, error) {
	info, err := s.Codecs.NegotiateInput(req)
	if err != nil {
		return nil, err
	}
	directive, err := fieldValidation(req.URL.Query())
	if err != nil {
		return nil, err
	}
	dec := info.Serializer
	if directive != metav1.FieldValidationIgnore && info.StrictSerializer != nil {
		dec = info.StrictSerializer
	}
	if len(body) == 0 {
		return nil, apierrors.NewBadRequest("the request body is empty")
	}
	if into == nil {
		// Unstructured resources decode into their own type: the scheme does not know them.
		if u, ok := s.resource().NewFunc().(runtime.Unstructured); ok {
			into = u
		}
	}
	obj, gvk, decoded := decodeUnstructuredJSON(info, dec, body, into)
	if !decoded {
		obj, gvk, err = dec.Decode(body, &want, into)
	}
	if err != nil && runtime.IsStrictDecodingError(err) && obj != nil {
		var sde interface{ Errors() []error }
		msgs := []string{err.Error()}
		if errors.As(err, &sde) {
			msgs = msgs[:0]
			for _, e := range sde.Errors() {
				msgs = append(msgs, e.Error())
			}
		}
		if directive == metav1.FieldValidationStrict {
			return nil, apierrors.NewBadRequest("strict decoding error: " + strings.Join(msgs, ", "))
		}
		for _, m := range msgs {
			addWarning(w, m)
		}
		err = nil
	}
	if err != nil {
		if runtime.IsNotRegisteredError(err) {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized or malformed: %v", err))
	}
	if gvk.GroupVersion() != want.GroupVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion(), want.GroupVersion()))
	}
	if gvk.Kind != want.Kind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", gvk.Kind, want.Kind))
	}
	if prune := s.resource().Prune; prune != nil && want == s.resource().GroupVersionKind() {
		unknown, err := prune(obj)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized or malformed: %v", err))
		}
		if len(unknown) > 0 && directive != metav1.FieldValidationIgnore {
			msgs := make([]string, len(unknown))
			for i, p := range unknown {
				msgs[i] = fmt.Sprintf("unknown field %q", p)
			}
			if directive == metav1.FieldValidationStrict {
				return nil, apierrors.NewBadRequest("strict decoding error: " + strings.Join(msgs, ", "))
			}
			for _, m := range msgs {
				addWarning(w, m)
			}
		}
	}
	return obj, nil
}

func addWarning(w http.ResponseWriter, msg string) {
	w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
}

// isDryRun validates and reads the dryRun parameter.
func isDryRun(q url.Values) (bool, error) {
	vals := q["dryRun"]
	for _, v := range vals {
		if v != metav1.DryRunAll {
			return false, apierrors.NewBadRequest(fmt.Sprintf("dryRun: Unsupported value: %q: supported values: \"All\"", v))
		}
	}
	return len(vals) > 0, nil
}

func (s *Scope) writeOptions(q url.Values) (registry.WriteOptions, error) {
	dry, err := isDryRun(q)
	if err != nil {
		return registry.WriteOptions{}, err
	}
	return registry.WriteOptions{DryRun: dry, Admission: s.Admission}, nil
}

func (s *Scope) writeOptionsFor(req *http.Request, r Request) (registry.WriteOptions, error) {
	o, err := s.writeOptions(req.URL.Query())
	o.Subresource = r.Subresource
	return o, err
}

// Create serves POST on a collection.
func (s *Scope) Create(w http.ResponseWriter, req *http.Request, r Request) {
	s.serve(w, req, http.StatusCreated, func(ctx context.Context) (runtime.Object, error) {
		body, err := s.readBody(req)
		if err != nil {
			return nil, err
		}
		obj, err := s.decodeObject(w, req, body, s.resource().GroupVersionKind(), nil)
		if err != nil {
			return nil, err
		}
		opts, err := s.writeOptions(req.URL.Query())
		if err != nil {
			return nil, err
		}
		manager, err := managerFor(req, "CreateOptions")
		if err != nil {
			return nil, err
		}
		obj = s.trackUpdate(r, nil, nil, obj, manager, true)
		// trackUpdate defaults the object whenever it records managed fields.
		opts.Defaulted = s.Fields.For(r.Subresource) != nil
		return s.Store.Create(ctx, r.Namespace, obj, opts)
	})
}

// Get serves GET on one object.
func (s *Scope) Get(w http.ResponseWriter, req *http.Request, r Request) {
	s.serve(w, req, http.StatusOK, func(ctx context.Context) (runtime.Object, error) {
		opts := &metav1.GetOptions{ResourceVersion: req.URL.Query().Get("resourceVersion")}
		return s.Store.Get(ctx, r.Namespace, r.Name, opts)
	})
}

// ListOrWatch serves GET on a collection.
func (s *Scope) ListOrWatch(w http.ResponseWriter, req *http.Request, r Request) {
	req = withInitializationScope(req)
	opts := &metav1.ListOptions{}
	if err := s.Codecs.DecodeParams(req.URL.Query(), opts); err != nil {
		s.Codecs.WriteError(w, req, apierrors.NewBadRequest(err.Error()))
		return
	}
	if opts.Watch {
		s.Watch(w, req, r, opts)
		return
	}
	if err := validateListOptions(opts); err != nil {
		s.Codecs.WriteError(w, req, err)
		return
	}
	if out, err := s.Codecs.NegotiateOutput(req); err == nil && s.wantsCachedList(out) {
		s.listCached(w, req, r, opts, out)
		return
	}
	s.serve(w, req, http.StatusOK, func(ctx context.Context) (runtime.Object, error) {
		return s.Store.List(ctx, r.Namespace, opts)
	})
}

func validateListOptions(opts *metav1.ListOptions) error {
	var errs field.ErrorList
	if opts.Limit < 0 {
		errs = append(errs, field.Invalid(field.NewPath("limit"), opts.Limit, "must be greater than or equal to 0"))
	}
	if m := opts.ResourceVersionMatch; m != "" {
		switch m {
		case metav1.ResourceVersionMatchExact, metav1.ResourceVersionMatchNotOlderThan:
			if opts.ResourceVersion == "" {
				errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch is forbidden unless resourceVersion is provided"))
			}
			if m == metav1.ResourceVersionMatchExact && opts.ResourceVersion == "0" {
				errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""))
			}
		default:
			errs = append(errs, field.NotSupported(field.NewPath("resourceVersionMatch"), m, []string{string(metav1.ResourceVersionMatchExact), string(metav1.ResourceVersionMatchNotOlderThan)}))
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	return nil
}

// Update serves PUT on one object (or its status with strategy set).
func (s *Scope) Update(w http.ResponseWriter, req *http.Request, r Request, strategy registry.Strategy) {
	var created bool
	s.serveCode(w, req, func(ctx context.Context) (runtime.Object, int, error) {
		body, err := s.readBody(req)
		if err != nil {
			return nil, 0, err
		}
		obj, err := s.decodeObject(w, req, body, s.resource().GroupVersionKind(), nil)
		if err != nil {
			return nil, 0, err
		}
		wopts, err := s.writeOptionsFor(req, r)
		if err != nil {
			return nil, 0, err
		}
		manager, err := managerFor(req, "UpdateOptions")
		if err != nil {
			return nil, 0, err
		}
		uopts := s.Store.UpdateOptionsFor(wopts, strategy)
		uopts.BeforeWrite = s.keepTimestamps(r)
		var out runtime.Object
		out, created, err = s.Store.Update(ctx, r.Namespace, r.Name, func(_ context.Context, existing runtime.Object) (runtime.Object, error) {
			return s.trackUpdate(r, strategy, existing, obj.DeepCopyObject(), manager, true), nil
		}, uopts)
		code := http.StatusOK
		if created {
			code = http.StatusCreated
		}
		return out, code, err
	})
}

// Delete serves DELETE on one object.
func (s *Scope) Delete(w http.ResponseWriter, req *http.Request, r Request) {
	s.serveCode(w, req, func(ctx context.Context) (runtime.Object, int, error) {
		opts, err := s.deleteOptions(req)
		if err != nil {
			return nil, 0, err
		}
		wopts, err := s.writeOptions(dryRunValues(req.URL.Query(), opts))
		if err != nil {
			return nil, 0, err
		}
		obj, _, err := s.Store.Delete(ctx, r.Namespace, r.Name, opts, wopts)
		return obj, http.StatusOK, err
	})
}

func dryRunValues(q url.Values, opts *metav1.DeleteOptions) url.Values {
	if len(opts.DryRun) == 0 {
		return q
	}
	out := url.Values{}
	for k, v := range q {
		out[k] = v
	}
	out["dryRun"] = append(out["dryRun"], opts.DryRun...)
	return out
}

// decodeForeignDeleteOptions reads a JSON or YAML DeleteOptions stamped with the group
// version of the resource it deletes (controller-runtime sends custom resources'
// deletes so): Kubernetes registers DeleteOptions in every served group version, the
// schemes here only in meta.k8s.io/v1 and v1.
func decodeForeignDeleteOptions(body []byte, opts *metav1.DeleteOptions) error {
	data, err := yaml.YAMLToJSON(body)
	if err != nil {
		return fmt.Errorf("reading DeleteOptions: %w", err)
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return fmt.Errorf("reading DeleteOptions: %w", err)
	}
	if tm.Kind != "DeleteOptions" {
		return fmt.Errorf("the body is a %q, not DeleteOptions", tm.Kind)
	}
	if err := json.Unmarshal(data, opts); err != nil {
		return fmt.Errorf("reading DeleteOptions: %w", err)
	}
	opts.TypeMeta = metav1.TypeMeta{}
	return nil
}

// deleteOptions reads DeleteOptions from the body or the query.
func (s *Scope) deleteOptions(req *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := s.readBody(req)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		info, err := s.Codecs.NegotiateInput(req)
		if err != nil {
			return nil, err
		}
		gvk := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
		if _, _, err := s.Codecs.Factory.UniversalDecoder().Decode(body, &gvk, opts); err != nil {
			if _, _, err2 := info.Serializer.Decode(body, &gvk, opts); err2 != nil {
				if err3 := decodeForeignDeleteOptions(body, opts); err3 != nil {
					return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding DeleteOptions: %v", err))
				}
			}
		}
	} else if err := s.Codecs.DecodeParams(req.URL.Query(), opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
		default:
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "",
				field.ErrorList{field.NotSupported(field.NewPath("propagationPolicy"), *p, []string{"Foreground", "Background", "Orphan", "nil"})})
		}
	}
	return opts, nil
}

// DeleteCollection serves DELETE on a collection.
func (s *Scope) DeleteCollection(w http.ResponseWriter, req *http.Request, r Request) {
	req = withInitializationScope(req)
	s.serve(w, req, http.StatusOK, func(ctx context.Context) (runtime.Object, error) {
		listOpts := &metav1.ListOptions{}
		if err := s.Codecs.DecodeParams(req.URL.Query(), listOpts); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		opts, err := s.deleteOptions(req)
		if err != nil {
			return nil, err
		}
		wopts, err := s.writeOptions(dryRunValues(req.URL.Query(), opts))
		if err != nil {
			return nil, err
		}
		return s.Store.DeleteCollection(ctx, r.Namespace, opts, listOpts, wopts)
	})
}

// serve runs fn and writes its object with code, or its error as a Status.
func (s *Scope) serve(w http.ResponseWriter, req *http.Request, code int, fn func(ctx context.Context) (runtime.Object, error)) {
	s.serveCode(w, req, func(ctx context.Context) (runtime.Object, int, error) {
		obj, err := fn(ctx)
		return obj, code, err
	})
}

func (s *Scope) serveCode(w http.ResponseWriter, req *http.Request, fn func(ctx context.Context) (runtime.Object, int, error)) {
	out, err := s.Codecs.NegotiateOutput(req)
	if err != nil {
		s.Codecs.WriteError(w, req, err)
		return
	}
	ctx, warnings := admission.WithWarnings(req.Context())
	var written *storage.Written
	if req.Method == http.MethodPost {
		// A created custom object is answered from the bytes stored for it.
		ctx, written = storage.WithWritten(ctx)
	}
	obj, code, err := fn(ctx)
	for _, msg := range warnings() {
		addWarning(w, msg)
	}
	if err != nil {
		s.Codecs.WriteError(w, req, err)
		return
	}
	if out.As == "" && out.Info.MediaType == runtime.ContentTypeJSON {
		if body, ok := written.JSON(obj); ok {
			s.Codecs.writeBody(w, out.Info, code, body)
			return
		}
	}
	s.writeResult(w, req, out, code, obj)
}

// writeResult encodes obj as asked: plain, Table or PartialObjectMetadata.
func (s *Scope) writeResult(w http.ResponseWriter, req *http.Request, out Output, code int, obj runtime.Object) {
	switch out.As {
	case "Table":
		opts := &metav1.TableOptions{}
		if err := s.Codecs.DecodeParams(req.URL.Query(), opts); err != nil {
			s.Codecs.WriteError(w, req, apierrors.NewBadRequest(err.Error()))
			return
		}
		table, err := s.Table(obj, opts, true)
		if err != nil {
			s.Codecs.WriteError(w, req, err)
			return
		}
		s.Codecs.writeObject(w, out.Info, metav1.SchemeGroupVersion, code, table)
		return
	case "PartialObjectMetadata", "PartialObjectMetadataList":
		pom, err := partialMetadata(obj, s.resource().GroupVersionKind())
		if err != nil {
			s.Codecs.WriteError(w, req, err)
			return
		}
		s.Codecs.writeObject(w, out.Info, metav1.SchemeGroupVersion, code, pom)
		return
	}
	s.Codecs.writeObject(w, out.Info, s.gv(), code, obj)
}

// WriteOptionsFor returns the dry-run and admission options of a request (a bad dryRun
// value is treated as not dry, and is refused by the verbs that read it).
func (s *Scope) WriteOptionsFor(req *http.Request, r Request) registry.WriteOptions {
	opts, _ := s.writeOptionsFor(req, r)
	return opts
}

// Custom serves a subresource whose handler decodes its own body type.
func (s *Scope) Custom(w http.ResponseWriter, req *http.Request, code int, fn func(ctx context.Context, body func(into runtime.Object) error) (runtime.Object, error)) {
	s.CustomCode(w, req, func(ctx context.Context, body func(runtime.Object) error, _ func(int64) ([]byte, error)) (runtime.Object, int, error) {
		obj, err := fn(ctx, body)
		return obj, code, err
	})
}

// CustomCode is Custom for handlers that choose the status code or read the raw body
// (raw's limit overrides the request body limit when larger than 0).
func (s *Scope) CustomCode(w http.ResponseWriter, req *http.Request, fn func(ctx context.Context, body func(into runtime.Object) error, raw func(limit int64) ([]byte, error)) (runtime.Object, int, error)) {
	out, err := s.Codecs.NegotiateOutput(req)
	if err != nil {
		s.Codecs.WriteError(w, req, err)
		return
	}
	if _, err := isDryRun(req.URL.Query()); err != nil {
		s.Codecs.WriteError(w, req, err)
		return
	}
	raw := func(limit int64) ([]byte, error) {
		if limit <= 0 {
			limit = s.MaxRequestBodyBytes
		}
		return s.readBodyLimit(req, limit)
	}
	body := func(into runtime.Object) error {
		data, err := raw(0)
		if err != nil {
			return err
		}
		gvks, _, err := s.Codecs.Scheme.ObjectKinds(into)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		_, err = s.decodeObject(w, req, data, gvks[0], into)
		return err
	}
	ctx, warnings := admission.WithWarnings(req.Context())
	obj, code, err := fn(ctx, body, raw)
	for _, msg := range warnings() {
		addWarning(w, msg)
	}
	if err != nil {
		s.Codecs.WriteError(w, req, err)
		return
	}
	if out.As != "" {
		s.writeResult(w, req, out, code, obj)
		return
	}
	gvks, _, err := s.Codecs.Scheme.ObjectKinds(obj)
	if err != nil {
		s.Codecs.WriteError(w, req, apierrors.NewInternalError(err))
		return
	}
	s.Codecs.writeObject(w, out.Info, gvks[0].GroupVersion(), code, obj)
}

// withInitializationScope honours ?includeUninitialized=true, which also returns objects
// whose initializers are pending.
func withInitializationScope(req *http.Request) *http.Request {
	if v := req.URL.Query().Get("includeUninitialized"); v == "true" || v == "1" {
		return req.WithContext(registry.WithIncludeUninitialized(req.Context()))
	}
	return req
}
