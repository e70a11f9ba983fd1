package apply

import (
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wasmplane/wasmplane/core/storage/unstructuredjson"
)

// customObject is a custom object as the field manager of an update sees it: the
// Unstructured itself, except that the managedFields the field manager writes back are
// built directly as unstructured content. Unstructured.SetManagedFields converts each
// entry by reflection and turns its fieldsV1 into maps through encoding/json (decoding
// with json.Number, then converting the numbers), then deep-copies the list: on a custom
// create that was as much as the rest of the managedFields work after the comparison.
// managedFieldsContent gives the same maps, and anything it cannot promise that of goes
// to the library.
type customObject struct {
	*unstructured.Unstructured
	// fields, when set, keeps the fieldsV1 trees decoded before.
	fields *fieldsCache
}

// SetManagedFields implements metav1.Object.
func (o customObject) SetManagedFields(entries []metav1.ManagedFieldsEntry) {
	if entries != nil {
		if md, ok := o.Object["metadata"].(map[string]any); ok && md != nil {
			if items, ok := o.fields.content(entries); ok {
				md["managedFields"] = items
				return
			}
		}
	}
	o.Unstructured.SetManagedFields(entries)
}

// managedFieldsContent is entries as unstructured content, exactly as
// Unstructured.SetManagedFields writes them (runtime.DefaultUnstructuredConverter: each
// field under its JSON name, empty ones left out, the time in RFC 3339 at UTC, fieldsV1
// decoded from its JSON into maps), or false for an entry whose conversion it does not
// reproduce: a zero time (the library writes a null), a fieldsV1 that is empty or not a
// JSON object, or one that holds anything but objects (the library converts numbers
// from json.Number) or that Decode declines (duplicate keys, invalid UTF-8, escaped
// surrogates, very deep nesting: encoding/json's answers for those are left to it).
// The field manager writes each fieldsV1 from a field set, objects only.
func managedFieldsContent(entries []metav1.ManagedFieldsEntry) ([]any, bool) {
	return (*fieldsCache)(nil).content(entries)
}

// content is managedFieldsContent, each fieldsV1 tree copied from the one decoded before
// from the same bytes when c has it.
func (c *fieldsCache) content(entries []metav1.ManagedFieldsEntry) ([]any, bool) {
	items := make([]any, 0, len(entries))
	for i := range entries {
		e := &entries[i]
		m := make(map[string]any, 7)
		if e.Manager != "" {
			m["manager"] = e.Manager
		}
		if e.Operation != "" {
			m["operation"] = string(e.Operation)
		}
		if e.APIVersion != "" {
			m["apiVersion"] = e.APIVersion
		}
		if e.Time != nil {
			if e.Time.IsZero() {
				return nil, false
			}
			m["time"] = e.Time.ToUnstructured()
		}
		if e.FieldsType != "" {
			m["fieldsType"] = e.FieldsType
		}
		if e.FieldsV1 != nil {
			raw := e.FieldsV1.GetRawBytes()
			if len(raw) == 0 || raw[0] != '{' {
				return nil, false
			}
			fields, ok := c.tree(raw)
			if !ok {
				return nil, false
			}
			m["fieldsV1"] = fields
		}
		if e.Subresource != "" {
			m["subresource"] = e.Subresource
		}
		items = append(items, m)
	}
	return items, true
}

// onlyObjects says whether every value under m, at any depth, is itself an object (the
// depth is bounded by Decode's).
func onlyObjects(m map[string]any) bool {
	for _, v := range m {
		sub, ok := v.(map[string]any)
		if !ok || !onlyObjects(sub) {
			return false
		}
	}
	return true
}

// fieldsCache keeps the last few fieldsV1 trees a field manager decoded, by their bytes:
// the writes of one manager to objects of one kind mostly record the same fields, and a
// copy of a decoded tree (maps of the right size, the keys shared) is about half the
// work and the garbage of decoding it again. A tree is kept once its bytes come a second
// time (the first time only the bytes are), so that writes that each record other
// fields pay no copy for a tree never asked for again. The trees it holds are never
// handed out. The zero value is ready; a nil one keeps nothing.
type fieldsCache struct {
	last atomic.Pointer[[]fieldsTree]
}

// fieldsCacheSize is how many fieldsV1 a fieldsCache knows, and maxCachedFields the
// longest it keeps: what every field manager of every CRD may hold stays small.
const (
	fieldsCacheSize = 8
	maxCachedFields = 8 << 10
)

// fieldsTree is a fieldsV1 and its tree; tree is nil when raw has come only once.
type fieldsTree struct {
	raw  string
	tree map[string]any
}

// tree returns raw's fieldsV1 tree as a new tree of maps, or false when raw is not an
// object of objects that Decode reads.
func (c *fieldsCache) tree(raw []byte) (map[string]any, bool) {
	var known []fieldsTree
	if c != nil {
		if p := c.last.Load(); p != nil {
			known = *p
		}
	}
	seen := false
	for _, t := range known {
		if t.raw == string(raw) {
			if t.tree != nil {
				return copyTree(t.tree), true
			}
			seen = true
			break
		}
	}
	fields, ok := unstructuredjson.Decode(raw)
	if !ok || !onlyObjects(fields) {
		return nil, false
	}
	if c != nil && len(raw) <= maxCachedFields {
		entry := fieldsTree{raw: string(raw)}
		if seen {
			entry.tree = copyTree(fields)
		}
		next := make([]fieldsTree, 0, fieldsCacheSize)
		next = append(next, entry)
		for _, t := range known {
			if len(next) < fieldsCacheSize && t.raw != entry.raw {
				next = append(next, t)
			}
		}
		c.last.Store(&next)
	}
	return fields, true
}

// copyTree copies a tree of objects (onlyObjects holds for it).
func copyTree(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyTree(v.(map[string]any))
	}
	return out
}
