package apply

import (
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
}

// SetManagedFields implements metav1.Object.
func (o customObject) SetManagedFields(entries []metav1.ManagedFieldsEntry) {
	if entries != nil {
		if md, ok := o.Object["metadata"].(map[string]any); ok && md != nil {
			if items, ok := managedFieldsContent(entries); ok {
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
			fields, ok := unstructuredjson.Decode(raw)
			if !ok || !onlyObjects(fields) {
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
