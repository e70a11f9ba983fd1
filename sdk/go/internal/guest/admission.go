package guest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/jsonview"
)

// Admission requests and answers are decoded and encoded by hand, for the reason node
// documents are (nodedec.go): in a Go guest, encoding/json cost about 260 µs of CPU per
// pod-create request, against about 0.2 µs for the call itself, and a validating plugin
// runs on every matching write. The decoders read what encoding/json would and fall back
// to it for anything they are not sure of, so a handler sees the same values either way.

// admStrs interns what repeats from request to request (kinds, resources, operations,
// namespaces, user names and groups, label keys); it is emptied when it grows past
// maxAdmInterned so that unique values (names, uids) cannot make it large.
var admStrs = interner{m: map[string]string{}}

const maxAdmInterned = 1024

// objStrs interns the strings of the objects DecodeMeta and DecodePod read.
var objStrs = interner{m: map[string]string{}}

// DecodeAdmission decodes a mutate/validate request (ABI §7.3) into req as encoding/json
// would; object, oldObject and options are copied, as encoding/json copies a RawMessage,
// so nothing in req aliases in.
func DecodeAdmission(in []byte, req *abi.AdmissionRequest) error {
	if len(admStrs.m) >= maxAdmInterned {
		clear(admStrs.m)
	}
	r := reader{b: in, in: &admStrs}
	err := r.admission(req)
	if err == nil {
		r.space()
		if r.i != len(in) {
			err = errFallback
		}
	}
	if err != nil {
		*req = abi.AdmissionRequest{}
		if err := json.Unmarshal(in, req); err != nil {
			return fmt.Errorf("decode request: %w", err)
		}
	}
	return nil
}

var admissionNames = []string{"uid", "kind", "resource", "subResource", "name", "namespace", "operation", "userInfo", "object", "oldObject", "dryRun", "options"}

func (r *reader) admission(req *abi.AdmissionRequest) error {
	return r.object(func(key []byte) (err error) {
		switch string(key) {
		case "uid":
			req.UID, err = r.unique()
		case "kind":
			err = r.gvk(&req.Kind)
		case "resource":
			err = r.gvr(&req.Resource)
		case "subResource":
			req.SubResource, err = r.str()
		case "name":
			req.Name, err = r.unique()
		case "namespace":
			req.Namespace, err = r.str()
		case "operation":
			req.Operation, err = r.str()
		case "userInfo":
			err = r.userInfo(&req.UserInfo)
		case "object":
			req.Object, err = r.raw()
		case "oldObject":
			req.OldObject, err = r.raw()
		case "options":
			req.Options, err = r.raw()
		case "dryRun":
			req.DryRun, err = r.boolean()
		default:
			err = r.unknown(key, admissionNames...)
		}
		return err
	})
}

// unique reads a string that seldom repeats (a uid, a name), without interning it.
func (r *reader) unique() (string, error) {
	if r.isNull() {
		return "", nil
	}
	b, err := r.rawString()
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// raw copies the next value, as encoding/json fills a RawMessage (null included).
func (r *reader) raw() (json.RawMessage, error) {
	r.space()
	start := r.i
	if err := r.skip(); err != nil {
		return nil, err
	}
	return append(json.RawMessage(nil), r.b[start:r.i]...), nil
}

func (r *reader) gvk(k *abi.GroupVersionKind) error {
	return r.object(func(key []byte) (err error) {
		switch string(key) {
		case "group":
			k.Group, err = r.str()
		case "version":
			k.Version, err = r.str()
		case "kind":
			k.Kind, err = r.str()
		default:
			err = r.unknown(key, "group", "version", "kind")
		}
		return err
	})
}

func (r *reader) gvr(k *abi.GroupVersionResource) error {
	return r.object(func(key []byte) (err error) {
		switch string(key) {
		case "group":
			k.Group, err = r.str()
		case "version":
			k.Version, err = r.str()
		case "resource":
			k.Resource, err = r.str()
		default:
			err = r.unknown(key, "group", "version", "resource")
		}
		return err
	})
}

// strings reads an array of strings as encoding/json fills a []string: null leaves nil,
// [] gives an empty slice.
func (r *reader) strings(dst *[]string) error {
	if r.isNull() {
		*dst = nil
		return nil
	}
	if r.next() != '[' {
		return errFallback
	}
	s := (*dst)[:0]
	if s == nil {
		s = []string{}
	}
	err := r.array(func() error {
		v, err := r.str()
		s = append(s, v)
		return err
	})
	*dst = s
	return err
}

func (r *reader) userInfo(u *abi.UserInfo) error {
	return r.object(func(key []byte) (err error) {
		switch string(key) {
		case "username":
			u.Username, err = r.str()
		case "uid":
			u.UID, err = r.unique()
		case "groups":
			err = r.strings(&u.Groups)
		case "extra":
			if r.isNull() {
				u.Extra = nil
				return nil
			}
			if r.next() != '{' {
				return errFallback
			}
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			err = r.object(func(key []byte) error {
				var v []string
				if err := r.strings(&v); err != nil {
					return err
				}
				u.Extra[r.in.str(key)] = v
				return nil
			})
		default:
			err = r.unknown(key, "username", "uid", "groups", "extra")
		}
		return err
	})
}

// onlyAllows tells whether r allows and says nothing more: its JSON is allowed.
func onlyAllows(r *abi.ValidateResponse) bool {
	return r.Allowed && r.Error == "" && r.Code == 0 && r.Reason == "" && r.Message == "" && len(r.Warnings) == 0 && len(r.AuditAnnotations) == 0
}

// EncodeValidate appends r as JSON: the members encoding/json writes, in its order, with
// map keys sorted as it sorts them. (It escapes <, > and & in strings and this does not;
// the values are the same.)
func EncodeValidate(dst []byte, r *abi.ValidateResponse) ([]byte, error) {
	if onlyAllows(r) {
		// The usual answer, without the encoder's code.
		return append(dst, allowed...), nil
	}
	dst = appendAnswerHead(dst, r.Error, r.Allowed)
	return appendAnswerTail(dst, r.Code, r.Reason, r.Message, r.Warnings, r.AuditAnnotations), nil
}

// EncodeMutate appends r as JSON, as EncodeValidate does; a patch value that is not
// valid JSON fails as encoding/json fails on it.
func EncodeMutate(dst []byte, r *abi.MutateResponse) ([]byte, error) {
	dst = appendAnswerHead(dst, r.Error, r.Allowed)
	if len(r.Patch) > 0 {
		dst = append(dst, `,"patch":[`...)
		for i, op := range r.Patch {
			if len(op.Value) > 0 && !json.Valid(op.Value) {
				// Let encoding/json word the error, as it did before this encoder.
				if _, err := json.Marshal(r); err != nil {
					return nil, err
				}
				return nil, fmt.Errorf("patch[%d]: value is not valid JSON", i)
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"op":`...)
			dst = AppendString(dst, op.Op)
			dst = append(dst, `,"path":`...)
			dst = AppendString(dst, op.Path)
			if op.From != "" {
				dst = append(dst, `,"from":`...)
				dst = AppendString(dst, op.From)
			}
			if len(op.Value) > 0 {
				dst = append(dst, `,"value":`...)
				dst = append(dst, op.Value...)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return appendAnswerTail(dst, r.Code, r.Reason, r.Message, r.Warnings, r.AuditAnnotations), nil
}

func appendAnswerHead(dst []byte, errMsg string, allowed bool) []byte {
	dst = append(dst, '{')
	if errMsg != "" {
		dst = append(dst, `"error":`...)
		dst = AppendString(dst, errMsg)
		dst = append(dst, ',')
	}
	return strconv.AppendBool(append(dst, `"allowed":`...), allowed)
}

func appendAnswerTail(dst []byte, code int32, reason, message string, warnings []string, audit map[string]string) []byte {
	if code != 0 {
		dst = AppendInt(append(dst, `,"code":`...), int64(code))
	}
	if reason != "" {
		dst = AppendString(append(dst, `,"reason":`...), reason)
	}
	if message != "" {
		dst = AppendString(append(dst, `,"message":`...), message)
	}
	if len(warnings) > 0 {
		dst = append(dst, `,"warnings":[`...)
		for i, w := range warnings {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, w)
		}
		dst = append(dst, ']')
	}
	if len(audit) > 0 {
		dst = append(dst, `,"auditAnnotations":{`...)
		for i, k := range slices.Sorted(maps.Keys(audit)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(AppendString(dst, k), ':')
			dst = AppendString(dst, audit[k])
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// Admission makes the handler of a mutate or validate hook: the request is decoded by
// DecodeAdmission and the answer encoded by enc, both without encoding/json.
func Admission[Resp any](fn func(*abi.AdmissionRequest) (Resp, error), enc func([]byte, *Resp) ([]byte, error)) func(in, dst []byte) ([]byte, error) {
	return func(in, dst []byte) ([]byte, error) {
		var req abi.AdmissionRequest
		if err := DecodeAdmission(in, &req); err != nil {
			return nil, err
		}
		resp, err := fn(&req)
		return encodeAnswer(dst, &resp, err, enc)
	}
}

// encodeAnswer encodes a handler's answer, or passes on its error.
func encodeAnswer[Resp any](dst []byte, resp *Resp, err error, enc func([]byte, *Resp) ([]byte, error)) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	b, err := enc(dst, resp)
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	return b, nil
}

// allowed is the answer of a validating call that allows and says nothing more: it is
// handed to the host from the module's data, not written on each call.
var allowed = []byte(`{"allowed":true}`)

// ServeValidateView runs a validate handler that reads the request in place
// (sdk/go/jsonview) on in, as Serve runs the other handlers: its answer, error or panic
// becomes the response. It is one function, rather than Serve calling a handler made by
// a closure calling fn, and an allowing answer is not written: in a call that comes after
// the API server's other work, every function and buffer it touches is cold.
func ServeValidateView(in []byte, fn func(jsonview.Value) (abi.ValidateResponse, error)) (resp []byte) {
	returned := false
	defer answerPanic(&resp, &returned)
	if in == nil {
		return ErrorResponse(errNotAllocated)
	}
	r, err := fn(jsonview.Parse(in))
	returned = true
	if err != nil {
		return ErrorResponse(err)
	}
	if onlyAllows(&r) {
		return allowed
	}
	b, _ := EncodeValidate(out[:0], &r) // never fails
	out = b
	return b
}

// MutateView is ValidateView for a mutate hook.
func MutateView(fn func(jsonview.Value) (abi.MutateResponse, error)) func(in, dst []byte) ([]byte, error) {
	return func(in, dst []byte) ([]byte, error) {
		resp, err := fn(jsonview.Parse(in))
		if err != nil {
			return nil, err
		}
		b, err := EncodeMutate(dst, &resp)
		if err != nil {
			return nil, fmt.Errorf("encode response: %w", err)
		}
		return b, nil
	}
}
