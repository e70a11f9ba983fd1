package apply

import (
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
	if len(mf) != len(oldmf) {
		return
	}
	for i := range mf {
		if !sameButTime(mf[i], oldmf[i]) {
			return
		}
	}
	// The comparison of everything else runs with old's entries in place; it is what
	// stays if the objects are equal.
	// The kinds may differ in whether TypeMeta is set (a field manager's output has it).
	om.SetManagedFields(oldmf)
	gvk := obj.GetObjectKind().GroupVersionKind()
	obj.GetObjectKind().SetGroupVersionKind(old.GetObjectKind().GroupVersionKind())
	if !apiequality.Semantic.DeepEqual(obj, old) {
		om.SetManagedFields(mf)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
}

func sameButTime(a, b metav1.ManagedFieldsEntry) bool {
	a.Time, b.Time = nil, nil
	return apiequality.Semantic.DeepEqual(a, b)
}
