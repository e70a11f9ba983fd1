package apply

import (
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// KeepTimestamps gives obj old's managedFields when the two differ in nothing but the
// times of managedFields entries, as Kubernetes' store does: an update that changes
// nothing then writes nothing and keeps its resourceVersion. obj is changed in place.
func KeepTimestamps(obj, old runtime.Object) {
	om, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	oldm, err := meta.Accessor(old)
	if err != nil {
		return
	}
	mf, oldmf := om.GetManagedFields(), oldm.GetManagedFields()
	if !sameEntriesButTimes(mf, oldmf) {
		return
	}
	// The comparison of everything else runs with old's entries in place; it is what
	// stays if the objects are equal.
	// The kinds may differ in whether TypeMeta is set (a field manager's output has it).
	om.SetManagedFields(oldmf)
	gvk := obj.GetObjectKind().GroupVersionKind()
	obj.GetObjectKind().SetGroupVersionKind(old.GetObjectKind().GroupVersionKind())
	if !semanticallyEqual(obj, old) {
		om.SetManagedFields(mf)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
}

// sameEntriesButTimes reports whether a and b hold the same entries but for their
// times, in any order: entries are kept sorted by time, so a write that only moved a
// manager's time to the next second can also have reordered them.
func sameEntriesButTimes(a, b []metav1.ManagedFieldsEntry) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
next:
	for i := range a {
		// Mostly in the same place.
		if !used[i] && sameButTime(a[i], b[i]) {
			used[i] = true
			continue
		}
		for j := range b {
			if !used[j] && sameButTime(a[i], b[j]) {
				used[j] = true
				continue next
			}
		}
		return false
	}
	return true
}

func sameButTime(a, b metav1.ManagedFieldsEntry) bool {
	a.Time, b.Time = nil, nil
	return apiequality.Semantic.DeepEqual(a, b)
}

// semanticallyEqual is apiequality.Semantic.DeepEqual(a, b), field by field in the order
// that finds a difference soonest: metadata first, then the other top-level fields from
// the last to the first, so that status (last, and what most writes change) is compared
// before spec. Equality is the conjunction of the fields' equalities, so the order
// changes only how much is compared.
func semanticallyEqual(a, b runtime.Object) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || va.Kind() != reflect.Pointer || va.IsNil() || vb.IsNil() || va.Elem().Kind() != reflect.Struct {
		return apiequality.Semantic.DeepEqual(a, b)
	}
	ea, eb := va.Elem(), vb.Elem()
	t := ea.Type()
	meta := -1
	order := make([]int, 0, t.NumField())
	if f, ok := t.FieldByName("ObjectMeta"); ok && len(f.Index) == 1 {
		meta = f.Index[0]
		order = append(order, meta)
	}
	for i := t.NumField() - 1; i >= 0; i-- {
		if !t.Field(i).IsExported() {
			return apiequality.Semantic.DeepEqual(a, b)
		}
		if i != meta {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if !apiequality.Semantic.DeepEqual(ea.Field(i).Addr().Interface(), eb.Field(i).Addr().Interface()) {
			return false
		}
	}
	return true
}
