package rulecheck

import (
	"k8s.io/apiserver/pkg/cel/common"
)

// indexed is a common.Schema whose children (properties, items, additional properties,
// the embedded-resource view) are built once, when the checker is built, instead of on
// every call as apiextensions-apiserver's model.Structural does. Everything else is the
// wrapped schema's own answer, so CEL sees the same values.
type indexed struct {
	common.Schema
	properties   map[string]common.Schema
	items        common.Schema
	additional   common.SchemaOrBool
	withTypeMeta common.Schema
}

// newIndexed wraps s and, recursively, every schema reachable from it.
func newIndexed(s common.Schema) *indexed {
	if s == nil {
		return nil
	}
	ix := &indexed{Schema: s}
	if props := s.Properties(); props != nil {
		ix.properties = make(map[string]common.Schema, len(props))
		for k, p := range props {
			ix.properties[k] = newIndexed(p)
		}
	}
	if items := s.Items(); items != nil {
		ix.items = newIndexed(items)
	}
	if ap := s.AdditionalProperties(); ap != nil {
		ob := &indexedOrBool{allows: ap.Allows()}
		if aps := ap.Schema(); aps != nil {
			ob.schema = newIndexed(aps)
		}
		ix.additional = ob
	}
	if s.IsXEmbeddedResource() {
		// The view with apiVersion, kind and metadata is not itself an embedded resource
		// root again, so this recursion ends.
		w := s.WithTypeAndObjectMeta()
		wix := newIndexed(withoutEmbedding{w})
		ix.withTypeMeta = &indexed{Schema: w, properties: wix.properties, items: wix.items, additional: wix.additional}
	}
	return ix
}

func (s *indexed) Properties() map[string]common.Schema { return s.properties }

func (s *indexed) Items() common.Schema {
	if s.items == nil {
		return nil
	}
	return s.items
}

func (s *indexed) AdditionalProperties() common.SchemaOrBool {
	if s.additional == nil {
		return nil
	}
	return s.additional
}

func (s *indexed) WithTypeAndObjectMeta() common.Schema {
	if s.withTypeMeta != nil {
		return s.withTypeMeta
	}
	return newIndexed(withoutEmbedding{s.Schema.WithTypeAndObjectMeta()})
}

// indexedOrBool is additionalProperties with its schema indexed.
type indexedOrBool struct {
	schema *indexed
	allows bool
}

func (b *indexedOrBool) Schema() common.Schema {
	if b.schema == nil {
		return nil
	}
	return b.schema
}

func (b *indexedOrBool) Allows() bool { return b.allows }

// withoutEmbedding hides the embedded-resource flag while the embedded view is indexed,
// so that indexing it does not build the same view again.
type withoutEmbedding struct {
	common.Schema
}

func (withoutEmbedding) IsXEmbeddedResource() bool { return false }
