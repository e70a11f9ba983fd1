package storage

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// DefaultAttrs is the AttrFunc used when neither the predicate nor the resource has one:
// labels plus metadata.name and metadata.namespace.
func DefaultAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("attrs: %w", err)
	}
	f := fields.Set{"metadata.name": m.GetName()}
	if ns := m.GetNamespace(); ns != "" {
		f["metadata.namespace"] = ns
	} else {
		f["metadata.namespace"] = ""
	}
	return labels.Set(m.GetLabels()), f, nil
}

// matcher evaluates one predicate; built once per list/watch so that the choice of
// attribute function is not redone per object.
type matcher struct {
	pred  SelectionPredicate
	attrs AttrFunc
	empty bool
}

func newMatcher(p SelectionPredicate, resourceAttrs AttrFunc) matcher {
	a := p.GetAttrs
	if a == nil {
		a = resourceAttrs
	}
	if a == nil {
		a = DefaultAttrs
	}
	return matcher{pred: p, attrs: a, empty: p.Empty()}
}

// matches reports whether obj is selected; objects whose attributes cannot be computed
// are not selected.
func (m matcher) matches(obj runtime.Object) bool {
	if m.empty {
		return true
	}
	l, f, err := m.attrs(obj)
	if err != nil {
		return false
	}
	return m.matchesAttrs(l, f)
}

func (m matcher) matchesAttrs(l labels.Set, f fields.Set) bool {
	if m.pred.Label != nil && !m.pred.Label.Empty() && !m.pred.Label.Matches(l) {
		return false
	}
	if m.pred.Field != nil && !m.pred.Field.Empty() && !m.pred.Field.Matches(f) {
		return false
	}
	return true
}
