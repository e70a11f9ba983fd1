package customresource

import (
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// pruneIndex is a structural schema indexed once per CRD version to answer, without
// allocating, whether the coercer's two walks over a whole object would change it:
// pruning (apiextensions-apiserver's pruning.PruneWithOptions at a resource root, which
// removes and reports the fields the schema does not know) and then removing the nulls
// of non-nullable fields without defaults
// (defaulting.PruneNonNullableNullsWithoutDefaults). The library's walks copy a field's
// schema for every field they visit; an object a client wrote by the schema, which is
// nearly every object, has nothing for them to do, and when unchanged says so the
// coercer skips them. Its answer follows both walks step for step; schemas where they
// take paths it does not follow (fields that preserve unknown fields, embedded
// resources, additionalProperties without a schema) build no index, and the walks run.
type pruneIndex struct {
	props map[string]*pruneIndex
	// additional is the schema of additionalProperties when hasAdditional.
	additional    *pruneIndex
	hasAdditional bool
	items         *pruneIndex
	// nullRemoved: a null under this schema is removed (not nullable, no default).
	nullRemoved bool
}

// newPruneIndex indexes s (a resource root), or returns nil when s is outside what
// unchanged follows.
func newPruneIndex(s *structuralschema.Structural) *pruneIndex {
	if s == nil {
		return nil
	}
	ix, ok := indexPrune(s, true)
	if !ok {
		return nil
	}
	return ix
}

func indexPrune(s *structuralschema.Structural, root bool) (*pruneIndex, bool) {
	if s == nil {
		return nil, true
	}
	if s.XPreserveUnknownFields || (s.XEmbeddedResource && !root) {
		return nil, false
	}
	ix := &pruneIndex{nullRemoved: !s.Generic.Nullable && s.Default.Object == nil}
	if len(s.Properties) > 0 {
		ix.props = make(map[string]*pruneIndex, len(s.Properties))
		for k := range s.Properties {
			p := s.Properties[k]
			child, ok := indexPrune(&p, false)
			if !ok {
				return nil, false
			}
			ix.props[k] = child
		}
	}
	if s.AdditionalProperties != nil {
		if s.AdditionalProperties.Structural == nil {
			return nil, false
		}
		var ok bool
		if ix.additional, ok = indexPrune(s.AdditionalProperties.Structural, false); !ok {
			return nil, false
		}
		ix.hasAdditional = true
	}
	var ok bool
	if ix.items, ok = indexPrune(s.Items, false); !ok {
		return nil, false
	}
	return ix, true
}

// child is the schema both walks give a field of an object under ix: its property, else
// additionalProperties, else none.
func (ix *pruneIndex) child(k string) (*pruneIndex, bool) {
	if ix == nil {
		return nil, false
	}
	if c, ok := ix.props[k]; ok {
		return c, true
	}
	if ix.hasAdditional {
		return ix.additional, true
	}
	return nil, false
}

// unchanged reports whether neither walk would change obj, a whole object, or report an
// unknown field. false means "run them".
func (ix *pruneIndex) unchanged(obj map[string]any) bool {
	if ix == nil {
		return false
	}
	for k, v := range obj {
		c, known := ix.child(k)
		if v == nil && c != nil && c.nullRemoved {
			return false
		}
		switch {
		case k == "apiVersion" || k == "kind" || k == "metadata":
			// Pruning leaves a resource's type and metadata alone; the nulls walk
			// still goes through them.
			if !nullsUnchanged(v, c) {
				return false
			}
		case !known:
			return false
		case !pruneUnchanged(v, c):
			return false
		}
	}
	return true
}

// pruneUnchanged follows both walks below a field whose schema is ix (nil: none).
func pruneUnchanged(x any, ix *pruneIndex) bool {
	switch x := x.(type) {
	case map[string]any:
		if ix == nil {
			// Pruning removes every field of an object without a schema.
			return len(x) == 0
		}
		for k, v := range x {
			c, known := ix.child(k)
			if !known {
				return false
			}
			if v == nil {
				if c != nil && c.nullRemoved {
					return false
				}
				continue
			}
			if !pruneUnchanged(v, c) {
				return false
			}
		}
	case []any:
		var items *pruneIndex
		if ix != nil {
			items = ix.items
		}
		for _, e := range x {
			if !pruneUnchanged(e, items) {
				return false
			}
		}
	}
	return true
}

// nullsUnchanged follows the nulls walk alone below a field pruning leaves alone.
func nullsUnchanged(x any, ix *pruneIndex) bool {
	switch x := x.(type) {
	case map[string]any:
		if ix == nil {
			return true
		}
		for k, v := range x {
			c, _ := ix.child(k)
			if v == nil && c != nil && c.nullRemoved {
				return false
			}
			if !nullsUnchanged(v, c) {
				return false
			}
		}
	case []any:
		if ix == nil {
			return true
		}
		for _, e := range x {
			if !nullsUnchanged(e, ix.items) {
				return false
			}
		}
	}
	return true
}
