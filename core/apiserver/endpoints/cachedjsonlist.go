package endpoints

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/unstructuredjson"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// errNotStoredJSON means a cached item is not kept as stored JSON, or its bytes are not
// the compact object JSON the storage codec writes.
var errNotStoredJSON = errors.New("not kept as stored JSON")

// itemsPlaceholder is what the JSON serializer writes for a list without items; the keys
// are sorted, so it follows only apiVersion, whose value holds no quotes.
var itemsPlaceholder = []byte(`"items":[]`)

// encodeCachedJSONList writes what the JSON serializer would write for list with items,
// custom objects the watch cache keeps as their stored JSON: each item is its stored
// bytes with the resourceVersion put back into its metadata, so that a list of 100,000
// custom objects neither decodes nor encodes any of them.
func encodeCachedJSONList(list runtime.Object, items []*storage.CachingObject, info runtime.SerializerInfo) ([]byte, error) {
	ul, ok := list.(*unstructured.UnstructuredList)
	if !ok {
		return nil, errNotStoredJSON
	}
	var head bytes.Buffer
	if err := info.Serializer.Encode(&unstructured.UnstructuredList{Object: ul.Object}, &head); err != nil {
		return nil, fmt.Errorf("list envelope: %w", err)
	}
	i := bytes.Index(head.Bytes(), itemsPlaceholder)
	if i < 0 {
		return nil, errNotStoredJSON
	}
	size := head.Len()
	for _, co := range items {
		data, _, ok := co.StoredJSON()
		if !ok {
			return nil, errNotStoredJSON
		}
		size += len(data) + 40
	}
	out := make([]byte, 0, size)
	out = append(out, head.Bytes()[:i+len(itemsPlaceholder)-1]...)
	for n, co := range items {
		data, rev, _ := co.StoredJSON()
		if n > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = appendWithResourceVersion(out, data, rev); err != nil {
			return nil, err
		}
	}
	return append(out, head.Bytes()[i+len(itemsPlaceholder)-1:]...), nil
}

// appendWithResourceVersion appends obj, a compact JSON object as the storage codec
// writes it, with "resourceVersion":"<rev>" added to its top-level metadata object where
// encoding/json puts it (unstructuredjson.AppendWithMember).
func appendWithResourceVersion(out, obj []byte, rev int64) ([]byte, error) {
	obj = bytes.TrimRight(obj, " \t\r\n")
	if len(obj) < 2 || obj[len(obj)-1] != '}' {
		return nil, errNotStoredJSON
	}
	out, ok := unstructuredjson.AppendWithMember(out, obj, "metadata", "resourceVersion", strconv.FormatInt(rev, 10))
	if !ok {
		return nil, errNotStoredJSON
	}
	return out, nil
}

// errNotTypedJSONList means the encoder's list did not end as a typed list's JSON does.
var errNotTypedJSONList = errors.New("list JSON does not end with its items")

// typedListEnd is how the JSON encoder ends a typed list with no items: items is the last
// field of every built-in list type.
var typedListEnd = []byte(`"items":[]}` + "\n")

// encodeCachedTypedJSONList writes what the JSON encoder writes for list with items, a
// typed list served from the watch cache: the envelope is the encoder's own for the list
// without items, and between the items' brackets go the items' JSON, which the cache keeps
// once per object version (storage.CachingObject.ListItemJSON) instead of encoding every
// item again for every LIST.
func (s *Scope) encodeCachedTypedJSONList(list runtime.Object, items []*storage.CachingObject, info runtime.SerializerInfo) ([]byte, error) {
	if len(items) > 0 {
		// Every item has the same type: check once that it is the served version's (the
		// encoder would convert another).
		if _, err := s.servedKind(items[0].Shared()); err != nil {
			return nil, err
		}
	}
	if err := meta.SetList(list, []runtime.Object{}); err != nil {
		return nil, fmt.Errorf("list items: %w", err)
	}
	var head bytes.Buffer
	if err := s.Codecs.Factory.EncoderForVersion(info.Serializer, s.gv()).Encode(list, &head); err != nil {
		return nil, fmt.Errorf("list envelope: %w", err)
	}
	if !bytes.HasSuffix(head.Bytes(), typedListEnd) {
		return nil, errNotTypedJSONList
	}
	encoded := make([][]byte, len(items))
	size := head.Len()
	for i, co := range items {
		data, err := co.ListItemJSON()
		if err != nil {
			return nil, fmt.Errorf("list item: %w", err)
		}
		encoded[i] = data
		size += len(data) + 1
	}
	open := head.Len() - len("]}\n")
	out := make([]byte, 0, size)
	out = append(out, head.Bytes()[:open]...)
	for i, data := range encoded {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, data...)
	}
	return append(out, head.Bytes()[open:]...), nil
}
