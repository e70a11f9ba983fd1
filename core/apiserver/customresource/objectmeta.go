package customresource

import (
	"time"
	"unicode/utf8"

	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// objectMeta is an object's metadata taken out for coercion, as apiextensions-apiserver's
// coercer takes it (schemaobjectmeta.GetObjectMetaWithOptions, a JSON round trip into
// metav1.ObjectMeta) and puts it back (SetObjectMeta, a conversion back to a map). Most
// objects have metadata the round trip gives back as it is: those keep their map and skip
// both conversions, which are most of the cost of pruning an object; any other metadata
// goes through the library.
type objectMeta struct {
	found bool
	// meta is the library's ObjectMeta; nil when the map is kept.
	meta *metav1.ObjectMeta
	// kept is the metadata map, when it is kept.
	kept map[string]any
}

// getObjectMeta takes obj's metadata out; unknown are the unknown metadata fields when
// opts asks for them.
func getObjectMeta(obj map[string]any, opts schemaobjectmeta.ObjectMetaOptions) (objectMeta, []string, error) {
	if md, ok := obj["metadata"].(map[string]any); ok && roundTripsAsIs(md) {
		if v, ok := md["creationTimestamp"]; ok && v == nil {
			// The round trip drops a null creationTimestamp (the zero time).
			delete(md, "creationTimestamp")
		}
		return objectMeta{found: true, kept: md}, nil, nil
	}
	m, found, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, opts)
	return objectMeta{found: found, meta: m}, unknown, err
}

// repairGeneration sets a missing generation to 1, as kube-apiserver's storage decoder
// does for very old objects.
func (m objectMeta) repairGeneration() {
	switch {
	case m.kept != nil:
		if _, ok := m.kept["generation"]; !ok {
			m.kept["generation"] = int64(1)
		}
	case m.meta != nil && m.meta.Generation == 0:
		m.meta.Generation = 1
	}
}

// put puts the metadata back into obj.
func (m objectMeta) put(obj map[string]any) error {
	if !m.found {
		return nil
	}
	if m.kept != nil {
		obj["metadata"] = m.kept
		return nil
	}
	return schemaobjectmeta.SetObjectMeta(obj, m.meta)
}

// roundTripsAsIs reports whether md comes back unchanged from the JSON round trip through
// metav1.ObjectMeta (but for a null creationTimestamp, which it drops): only fields of
// ObjectMeta, each of the type it decodes from, none empty (omitempty would drop it),
// strings valid UTF-8 (JSON would replace invalid bytes), a creationTimestamp already in
// the form metav1.Time writes.
func roundTripsAsIs(md map[string]any) bool {
	for k, v := range md {
		switch k {
		case "name", "generateName", "namespace", "uid", "resourceVersion", "selfLink":
			if s, ok := v.(string); !ok || s == "" || !utf8.ValidString(s) {
				return false
			}
		case "labels", "annotations":
			m, ok := v.(map[string]any)
			if !ok || len(m) == 0 {
				return false
			}
			for mk, mv := range m {
				if s, ok := mv.(string); !ok || !utf8.ValidString(s) || !utf8.ValidString(mk) {
					return false
				}
			}
		case "finalizers":
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return false
			}
			for _, e := range l {
				if s, ok := e.(string); !ok || !utf8.ValidString(s) {
					return false
				}
			}
		case "generation":
			if n, ok := v.(int64); !ok || n == 0 {
				return false
			}
		case "creationTimestamp":
			if v == nil {
				continue
			}
			s, ok := v.(string)
			if !ok {
				return false
			}
			t, err := time.Parse(time.RFC3339, s)
			if err != nil || t.UTC().Format(time.RFC3339) != s {
				return false
			}
		default:
			return false
		}
	}
	return true
}
