package plugins

import (
	"context"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func class(name string, value int32, def bool, policy corev1.PreemptionPolicy) schedulingv1.PriorityClass {
	return schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: def, PreemptionPolicy: ptr.To(policy)}
}

func TestPriorityAdmit(t *testing.T) {
	high := class("high", 1000, false, corev1.PreemptNever)
	def := class("normal", 10, true, corev1.PreemptLowerPriority)
	tests := []struct {
		name       string
		classes    []schedulingv1.PriorityClass
		className  string
		priority   *int32
		policy     *corev1.PreemptionPolicy
		wantClass  string
		wantValue  int32
		wantPolicy corev1.PreemptionPolicy
		wantErr    string
	}{
		{name: "no class, no default", wantValue: 0, wantPolicy: corev1.PreemptLowerPriority},
		{name: "global default", classes: []schedulingv1.PriorityClass{high, def}, wantClass: "normal", wantValue: 10, wantPolicy: corev1.PreemptLowerPriority},
		{name: "named class", classes: []schedulingv1.PriorityClass{high, def}, className: "high", wantClass: "high", wantValue: 1000, wantPolicy: corev1.PreemptNever},
		{name: "missing class", className: "ghost", wantErr: `pods "p" is forbidden: no PriorityClass with name ghost was found`},
		{name: "same priority is fine", classes: []schedulingv1.PriorityClass{high}, className: "high", priority: ptr.To(int32(1000)), wantClass: "high", wantValue: 1000, wantPolicy: corev1.PreemptNever},
		{name: "own priority differs", classes: []schedulingv1.PriorityClass{high}, className: "high", priority: ptr.To(int32(5)),
			wantErr: `pods "p" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name`},
		{name: "own policy differs", classes: []schedulingv1.PriorityClass{high}, className: "high", policy: ptr.To(corev1.PreemptLowerPriority),
			wantErr: `pods "p" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod()
			p.Spec.PriorityClassName, p.Spec.Priority, p.Spec.PreemptionPolicy = tt.className, tt.priority, tt.policy
			err := (&Priority{Classes: &fakeReader{classes: tt.classes}}).Admit(context.Background(), attrs(admission.Create, "pods", p))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !apierrors.IsForbidden(err) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Spec.PriorityClassName != tt.wantClass || *p.Spec.Priority != tt.wantValue || *p.Spec.PreemptionPolicy != tt.wantPolicy {
				t.Errorf("got class %q priority %d policy %s", p.Spec.PriorityClassName, *p.Spec.Priority, *p.Spec.PreemptionPolicy)
			}
		})
	}
}

func TestPriorityUpdateKeepsPriority(t *testing.T) {
	old := pod()
	old.Spec.Priority = ptr.To(int32(7))
	p := pod()
	a := attrs(admission.Update, "pods", p)
	a.OldObject = old
	if err := (&Priority{Classes: &fakeReader{}}).Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if p.Spec.Priority == nil || *p.Spec.Priority != 7 {
		t.Fatalf("priority = %v", p.Spec.Priority)
	}
}

func TestPriorityOneGlobalDefault(t *testing.T) {
	existing := class("normal", 10, true, corev1.PreemptLowerPriority)
	tests := []struct {
		name    string
		op      admission.Operation
		obj     schedulingv1.PriorityClass
		wantErr bool
	}{
		{name: "second default", op: admission.Create, obj: class("other", 5, true, corev1.PreemptLowerPriority), wantErr: true},
		{name: "non-default", op: admission.Create, obj: class("other", 5, false, corev1.PreemptLowerPriority)},
		{name: "update of the default itself", op: admission.Update, obj: existing},
		{name: "another made default", op: admission.Update, obj: class("other", 5, true, corev1.PreemptLowerPriority), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.obj
			a := &admission.Attributes{Operation: tt.op, Name: obj.Name, Object: &obj,
				Resource: schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}}
			err := (&Priority{Classes: &fakeReader{classes: []schedulingv1.PriorityClass{existing}}}).Validate(context.Background(), a)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && err.Error() != `priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass normal is already marked as default. Only one default can exist` {
				t.Errorf("message = %q", err.Error())
			}
		})
	}
}
