package registry

import (
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// metaForValidation returns the accessor the store validates metadata through. For an
// unstructured object whose managedFields are plainly formed it is a view that hands
// the validation the entries' manager, operation, fieldsType and subresource (all it
// reads of them) without apimachinery's reflective converter, which otherwise turns every
// entry, fieldsV1 included, into a ManagedFieldsEntry through JSON on each create and
// update of a custom object. Anything else is validated through the object itself.
func metaForValidation(accessor metav1.Object) metav1.Object {
	u, ok := accessor.(*unstructured.Unstructured)
	if !ok {
		return accessor
	}
	entries, ok := managedFieldsForValidation(u.Object)
	if !ok {
		return accessor
	}
	return unstructuredMeta{Unstructured: u, managedFields: entries}
}

// unstructuredMeta is an unstructured object whose managedFields were read ahead.
type unstructuredMeta struct {
	*unstructured.Unstructured
	managedFields []metav1.ManagedFieldsEntry
}

// GetManagedFields returns the entries read ahead (their time and fieldsV1 left out).
func (m unstructuredMeta) GetManagedFields() []metav1.ManagedFieldsEntry {
	return m.managedFields
}

// managedFieldsForValidation reads the managedFields of unstructured content as
// Unstructured.GetManagedFields does, for the fields validation reads, and reports false
// when the content is anything it cannot be sure the converter would read the same way
// (a field of an unexpected type or name, a time that does not parse, a fieldsV1 that is
// not a tree of objects): GetManagedFields answers then.
func managedFieldsForValidation(obj map[string]any) ([]metav1.ManagedFieldsEntry, bool) {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return nil, false
	}
	raw, found := md["managedFields"]
	if !found {
		return nil, true
	}
	items, ok := raw.([]any)
	if !ok {
		return nil, false
	}
	entries := make([]metav1.ManagedFieldsEntry, 0, len(items))
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, false
		}
		var e metav1.ManagedFieldsEntry
		for k, v := range m {
			switch k {
			case "manager", "operation", "apiVersion", "fieldsType", "subresource":
				s, ok := v.(string)
				if !ok {
					return nil, false
				}
				switch k {
				case "manager":
					e.Manager = s
				case "operation":
					e.Operation = metav1.ManagedFieldsOperationType(s)
				case "fieldsType":
					e.FieldsType = s
				case "subresource":
					e.Subresource = s
				}
			case "time":
				s, ok := v.(string)
				if !ok || !utf8.ValidString(s) {
					return nil, false
				}
				if _, err := time.Parse(time.RFC3339, s); err != nil {
					return nil, false
				}
			case "fieldsV1":
				if !fieldTree(v, 0) {
					return nil, false
				}
			default:
				return nil, false
			}
		}
		entries = append(entries, e)
	}
	return entries, true
}

// fieldTree reports whether v is a fieldsV1 set as field managers write it: objects of
// objects, no deeper than encoding/json encodes without its cycle check.
func fieldTree(v any, depth int) bool {
	m, ok := v.(map[string]any)
	if !ok || m == nil || depth > 500 {
		return false
	}
	for _, c := range m {
		if !fieldTree(c, depth+1) {
			return false
		}
	}
	return true
}
