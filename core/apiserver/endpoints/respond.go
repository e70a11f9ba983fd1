package endpoints

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"

	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/unstructuredjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func schemaGR() schema.GroupResource { return schema.GroupResource{} }

// ErrorToStatus converts any error to the Status Kubernetes would send.
func ErrorToStatus(err error) *metav1.Status {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		if s.Status == "" {
			s.Status = metav1.StatusFailure
		}
		if s.Code == 0 {
			s.Code = http.StatusInternalServerError
		}
		return &s
	}
	s := apierrors.NewInternalError(err).ErrStatus
	return &s
}

// WriteError sends err as a Status in the negotiated (or JSON) encoding.
func (c *Codecs) WriteError(w http.ResponseWriter, req *http.Request, err error) {
	status := ErrorToStatus(err)
	if status.Code >= 500 {
		slog.Error("request failed", "method", req.Method, "path", req.URL.Path, "err", err)
	}
	out, nerr := c.NegotiateOutput(req)
	if nerr != nil || out.As != "" {
		out = Output{Info: c.JSON()}
	}
	c.writeObject(w, out.Info, metav1.Unversioned, int(status.Code), status)
}

// writeObject encodes obj (whose kind the scheme knows) with info into the response.
func (c *Codecs) writeObject(w http.ResponseWriter, info runtime.SerializerInfo, gv schema.GroupVersion, code int, obj runtime.Object) {
	if info.MediaType == runtime.ContentTypeProtobuf && !SupportsProtobuf(obj) {
		// wasmplane's own types have no protobuf form; clients that accept protobuf also
		// accept JSON, as with Kubernetes custom resources.
		info = c.JSON()
	}
	var enc runtime.Encoder = c.Factory.EncoderForVersion(info.Serializer, gv)
	if isUnstructured(obj) {
		// Custom objects carry their apiVersion and kind and the scheme cannot convert
		// them: they are written as they are.
		enc = info.Serializer
	}
	var body []byte
	if u, ok := obj.(*unstructured.Unstructured); ok && info.MediaType == runtime.ContentTypeJSON {
		// The bytes the JSON serializer writes, without encoding/json's reflection when
		// the content allows.
		if b, ok := unstructuredjson.Append(make([]byte, 0, 1024), u.Object); ok {
			body = append(b, '\n')
		}
	}
	if body == nil {
		var buf bytes.Buffer
		if err := enc.Encode(obj, &buf); err != nil {
			slog.Error("encoding response", "err", err)
			http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
			return
		}
		body = buf.Bytes()
	}
	c.writeBody(w, info, code, body)
}

// writeBody writes an encoded answer.
func (c *Codecs) writeBody(w http.ResponseWriter, info runtime.SerializerInfo, code int, body []byte) {
	w.Header().Set("Content-Type", info.MediaType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// isUnstructured reports whether obj (or the object a cache wraps) is unstructured.
func isUnstructured(obj runtime.Object) bool {
	if co, ok := obj.(*storage.CachingObject); ok {
		obj = co.Shared()
	}
	_, ok := obj.(runtime.Unstructured)
	return ok
}

// WriteNegotiated encodes obj (a type the scheme knows) in the encoding the request
// accepts, with JSON as the fallback.
func (c *Codecs) WriteNegotiated(w http.ResponseWriter, req *http.Request, code int, obj runtime.Object) {
	out, err := c.NegotiateOutput(req)
	if err != nil || out.As != "" {
		out = Output{Info: c.JSON()}
	}
	gvks, _, err := c.Scheme.ObjectKinds(obj)
	if err != nil {
		c.WriteError(w, req, apierrors.NewInternalError(err))
		return
	}
	c.writeObject(w, out.Info, gvks[0].GroupVersion(), code, obj)
}

// SupportsProtobuf reports whether obj has a protobuf encoding (k8s.io/api types do). It
// asks for what apimachinery's protobuf serializer uses: k8s.io/api v0.35+ types no longer
// have gogo's ProtoMessage method, only Size and the MarshalTo family.
func SupportsProtobuf(obj runtime.Object) bool {
	if co, ok := obj.(*storage.CachingObject); ok {
		// The wrapped object's type, without the deep copy GetObject makes.
		obj = co.Shared()
	} else if co, ok := obj.(runtime.CacheableObject); ok {
		obj = co.GetObject()
	}
	switch obj.(type) {
	case runtime.ProtobufReverseMarshaller, runtime.ProtobufMarshaller, interface{ Marshal() ([]byte, error) }:
		return true
	}
	return false
}
