package rulecheck

import (
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiserver/pkg/cel/common"
)

// closedObject is an object with properties, under a schema that keeps no field it does
// not name, as CEL reads it: the library's value (common.UnstructuredToVal) for all but
// finding a field by name. The library unescapes every name looked up with a regular
// expression, which was a third of a simple rule's evaluation; only names with "__" in
// them are escaped (cel.Escape), so any other name is looked up as it is, and the field's
// value is what the library's would be. Equality and iteration are the library's.
type closedObject struct {
	traits.Mapper
	value  map[string]any
	schema common.Schema
}

// closedVal is common.UnstructuredToVal(v, s), as a closedObject where v is an object
// with properties. s must be closed (see closed): a closedObject compares itself with
// the library's objects as the library does only when neither holds a field its schema
// does not name.
func closedVal(v any, s common.Schema) ref.Val {
	val := common.UnstructuredToVal(v, s)
	if s.IsXIntOrString() || s.Type() != "object" || s.IsXEmbeddedResource() || s.Properties() == nil {
		return val
	}
	m, ok := v.(map[string]any)
	if !ok {
		return val
	}
	mapper, ok := val.(traits.Mapper)
	if !ok {
		return val
	}
	return &closedObject{Mapper: mapper, value: m, schema: s}
}

// Find is the library's Find without the unescaping of names that need none.
func (o *closedObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok || strings.Contains(string(k), "__") {
		return o.Mapper.Find(key)
	}
	v, ok := o.value[string(k)]
	if !ok || v == nil {
		// A null field of an object with properties is an absent one.
		return nil, false
	}
	ps, ok := o.schema.Properties()[string(k)]
	if !ok {
		return nil, false
	}
	return closedVal(v, ps), true
}

// Get is the library's Get, finding as Find does.
func (o *closedObject) Get(key ref.Val) ref.Val {
	if v, found := o.Find(key); found {
		return v
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

// Contains is the library's Contains, finding as Find does.
func (o *closedObject) Contains(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if v != nil && types.IsUnknownOrError(v) {
		return v
	}
	return types.Bool(found)
}

// Equal is the library's, with the library's value standing for a closedObject.
func (o *closedObject) Equal(other ref.Val) ref.Val {
	if c, ok := other.(*closedObject); ok {
		other = c.Mapper
	}
	return o.Mapper.Equal(other)
}

// closed tells whether s and every schema below it keep no field they do not name and
// embed no resource (whose metadata holds fields its CEL schema does not name): pruning
// then leaves no object with a field outside its properties, which the library's
// equality of objects treats apart.
func closed(s *structuralschema.Structural) bool {
	if s == nil {
		return true
	}
	if s.XPreserveUnknownFields || s.XEmbeddedResource {
		return false
	}
	if !closed(s.Items) {
		return false
	}
	if s.AdditionalProperties != nil && !closed(s.AdditionalProperties.Structural) {
		return false
	}
	for k := range s.Properties {
		p := s.Properties[k]
		if !closed(&p) {
			return false
		}
	}
	return true
}
