package endpoints

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/storage"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// protobufPrefix starts every object apimachinery's protobuf serializer writes.
var protobufPrefix = []byte("k8s\x00")

// Protobuf field tags (field number << 3 | wire type 2, length-delimited) of every
// Kubernetes list type (metadata = 1, items = 2) and of runtime.Unknown's raw bytes (2).
const (
	tagListMeta   = 1<<3 | 2
	tagListItems  = 2<<3 | 2
	tagUnknownRaw = 2<<3 | 2
)

// wantsCachedList reports whether a list answered with out can be written from the watch
// cache's shared objects: plain protobuf of a type that has a protobuf form, or plain JSON
// of custom objects.
func (s *Scope) wantsCachedList(out Output) bool {
	if out.As != "" {
		return false
	}
	switch out.Info.MediaType {
	case runtime.ContentTypeProtobuf:
		return SupportsProtobuf(s.resource().NewFunc())
	case runtime.ContentTypeJSON:
		// Custom objects are cached as their stored JSON (see encodeCachedJSONList), the
		// others with their JSON as list items (see encodeCachedTypedJSONList).
		return true
	}
	return false
}

// listCached serves a protobuf list. When the watch cache answers, the items are not copied
// into the list object and encoded again: each item's protobuf bytes are the ones its
// watchers already got when there are, or are marshalled straight from the shared object
// into the response, which is what makes a paged list of 150,000 pods cheap.
func (s *Scope) listCached(w http.ResponseWriter, req *http.Request, r Request, opts *metav1.ListOptions, out Output) {
	ci := &storage.CachedItems{}
	ctx, warnings := admission.WithWarnings(storage.WithCachedItems(req.Context(), ci))
	obj, err := s.Store.List(ctx, r.Namespace, opts)
	for _, msg := range warnings() {
		addWarning(w, msg)
	}
	if err != nil {
		s.Codecs.WriteError(w, req, err)
		return
	}
	if !ci.Served {
		s.Codecs.writeObject(w, out.Info, s.gv(), http.StatusOK, obj)
		return
	}
	var data []byte
	switch {
	case out.Info.MediaType == runtime.ContentTypeJSON && isUnstructured(obj):
		data, err = encodeCachedJSONList(obj, ci.Items, out.Info)
	case out.Info.MediaType == runtime.ContentTypeJSON:
		data, err = s.encodeCachedTypedJSONList(obj, ci.Items, out.Info)
	default:
		data, err = s.encodeCachedList(obj, ci.Items, out.Info)
	}
	if err != nil {
		// An item the fast path cannot write (not expected): the generic path answers.
		if err := s.materialize(obj, ci.Items); err != nil {
			s.Codecs.WriteError(w, req, err)
			return
		}
		s.Codecs.writeObject(w, out.Info, s.gv(), http.StatusOK, obj)
		return
	}
	w.Header().Set("Content-Type", out.Info.MediaType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// materialize puts shallow copies of the shared items into list, as GetList does without
// CachedItems.
func (s *Scope) materialize(list runtime.Object, items []*storage.CachingObject) error {
	objs := make([]runtime.Object, len(items))
	for i, co := range items {
		objs[i] = co.Shared()
	}
	if err := meta.SetList(list, objs); err != nil {
		return fmt.Errorf("list items: %w", err)
	}
	return nil
}

// errNotProtobuf means an object has no protobuf form, or is not of the served version.
var errNotProtobuf = errors.New("no protobuf encoding in the served version")

// encodeCachedList writes what the protobuf serializer would write for list with items:
// the k8s envelope (runtime.Unknown with apiVersion and kind) around the list message,
// whose metadata is field 1 and whose items are field 2, in order.
func (s *Scope) encodeCachedList(list runtime.Object, items []*storage.CachingObject, info runtime.SerializerInfo) ([]byte, error) {
	gv := s.gv()
	kind, err := s.servedKind(list)
	if err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, fmt.Errorf("list metadata: %w", err)
	}
	listMeta := metav1.ListMeta{SelfLink: lm.GetSelfLink(), ResourceVersion: lm.GetResourceVersion(),
		Continue: lm.GetContinue(), RemainingItemCount: lm.GetRemainingItemCount()}
	mb, err := listMeta.Marshal()
	if err != nil {
		return nil, fmt.Errorf("list metadata: %w", err)
	}
	// The id under which watch responses remember an object's encoding (see Watch).
	id := s.Codecs.Factory.EncoderForVersion(info.Serializer, gv).Identifier()
	// The envelope goes in front of the list message once its length is known: room for it
	// is kept at the start, so that the list is not copied once more.
	typeMeta := runtime.TypeMeta{APIVersion: gv.String(), Kind: kind}
	tmb, err := typeMeta.Marshal()
	if err != nil {
		return nil, fmt.Errorf("list envelope: %w", err)
	}
	head := len(protobufPrefix) + 1 + binary.MaxVarintLen64 + len(tmb) + 1 + binary.MaxVarintLen64
	// body grows past the room kept at its start: the list message is body[head:].
	body := make([]byte, head, head+16+len(mb)+len(items)*1024+4)
	body = appendField(body, tagListMeta, mb)
	for i, co := range items {
		if i == 0 {
			// Every item has the same type: check once that it is the served version's.
			if _, err := s.servedKind(co.Shared()); err != nil {
				return nil, err
			}
		}
		if enc, ok := co.Encoded(id); ok {
			raw, err := unknownRaw(enc)
			if err != nil {
				return nil, err
			}
			body = appendField(body, tagListItems, raw)
			continue
		}
		m, ok := co.Shared().(runtime.ProtobufReverseMarshaller)
		if !ok {
			return nil, errNotProtobuf
		}
		// Marshalling only reads the shared object (unlike encoding, which sets its kind).
		n := m.Size()
		body = append(body, tagListItems)
		body = binary.AppendUvarint(body, uint64(n))
		body = append(body, make([]byte, n)...)
		if _, err := m.MarshalToSizedBuffer(body[len(body)-n:]); err != nil {
			return nil, fmt.Errorf("marshalling a list item: %w", err)
		}
	}
	// runtime.Unknown: typeMeta = 1, raw = 2, then the empty contentEncoding (3) and
	// contentType (4) its marshaller always writes.
	bodyLen := len(body) - head
	body = append(body, 3<<3|2, 0, 4<<3|2, 0)
	envelope := append([]byte(nil), protobufPrefix...)
	envelope = appendField(envelope, 1<<3|2, tmb)
	envelope = append(envelope, tagUnknownRaw)
	envelope = binary.AppendUvarint(envelope, uint64(bodyLen))
	out := body[head-len(envelope):]
	copy(out, envelope)
	return out, nil
}

// servedKind returns obj's kind in the served group version, or errNotProtobuf when its
// type is not registered there (the generic encoder would convert it).
func (s *Scope) servedKind(obj runtime.Object) (string, error) {
	gvks, _, err := s.Codecs.Scheme.ObjectKinds(obj)
	if err != nil {
		return "", fmt.Errorf("kind of %T: %w", obj, err)
	}
	for _, gvk := range gvks {
		if gvk.GroupVersion() == s.gv() {
			return gvk.Kind, nil
		}
	}
	return "", errNotProtobuf
}

func appendField(b []byte, tag byte, data []byte) []byte {
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

// unknownRaw returns the raw object bytes (field 2) of a protobuf envelope.
func unknownRaw(enc []byte) ([]byte, error) {
	b, ok := bytes.CutPrefix(enc, protobufPrefix)
	if !ok {
		return nil, errNotProtobuf
	}
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 || tag&7 != 2 {
			return nil, fmt.Errorf("cached encoding: unexpected field %d", tag)
		}
		b = b[n:]
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, errors.New("cached encoding: truncated")
		}
		b = b[n:]
		if tag == tagUnknownRaw {
			return b[:l], nil
		}
		b = b[l:]
	}
	return nil, errors.New("cached encoding: no raw object")
}
