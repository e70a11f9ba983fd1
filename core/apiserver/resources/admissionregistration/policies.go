package admissionregistration

import (
	"context"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// policyDefinitions are the CEL admission policies and their bindings.
func policyDefinitions(cel *celCompiler) []resources.Definition {
	vap := policyResource("ValidatingAdmissionPolicy",
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} },
		vapStrategy{strategy{defaults: defaultValidatingPolicy, validate: func(obj, old runtime.Object) field.ErrorList {
			var o *admissionregistrationv1.ValidatingAdmissionPolicy
			if old != nil {
				o = old.(*admissionregistrationv1.ValidatingAdmissionPolicy)
			}
			return validateValidatingPolicy(cel, obj.(*admissionregistrationv1.ValidatingAdmissionPolicy), o)
		}}},
		[]registry.TableColumn{{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration"},
			{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"}},
		func(obj runtime.Object) []any {
			p := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
			return []any{int64(len(p.Spec.Validations)), paramKindColumn(p.Spec.ParamKind)}
		})
	vap.Resource.StatusStrategy = vapStatusStrategy{}
	vap.Subresources = func(s *endpoints.Scope) []endpoints.Subresource {
		return []endpoints.Subresource{endpoints.StatusSubresource(s, vapStatusStrategy{})}
	}
	vapb := policyResource("ValidatingAdmissionPolicyBinding",
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{} },
		strategy{defaults: func(obj runtime.Object) {
			defaultMatchResources(obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec.MatchResources)
		}, validate: func(obj, _ runtime.Object) field.ErrorList {
			return validateValidatingBinding(obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding))
		}},
		bindingColumns, func(obj runtime.Object) []any {
			b := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
			return []any{b.Spec.PolicyName, paramRefColumn(b.Spec.ParamRef)}
		})
	mp := policyResource("MutatingAdmissionPolicy",
		func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicy{} },
		func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyList{} },
		strategy{defaults: defaultMutatingPolicy, validate: func(obj, old runtime.Object) field.ErrorList {
			var o *admissionregistrationv1.MutatingAdmissionPolicy
			if old != nil {
				o = old.(*admissionregistrationv1.MutatingAdmissionPolicy)
			}
			return validateMutatingPolicy(cel, obj.(*admissionregistrationv1.MutatingAdmissionPolicy), o)
		}},
		[]registry.TableColumn{{Name: "Mutations", Type: "integer", Description: "Mutations indicates the number of mutations rules defined in this configuration"},
			{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"}},
		func(obj runtime.Object) []any {
			p := obj.(*admissionregistrationv1.MutatingAdmissionPolicy)
			return []any{int64(len(p.Spec.Mutations)), paramKindColumn(p.Spec.ParamKind)}
		})
	mpb := policyResource("MutatingAdmissionPolicyBinding",
		func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBinding{} },
		func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBindingList{} },
		strategy{defaults: func(obj runtime.Object) {
			defaultMatchResources(obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding).Spec.MatchResources)
		}, validate: func(obj, _ runtime.Object) field.ErrorList {
			return validateMutatingBinding(obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding))
		}},
		bindingColumns, func(obj runtime.Object) []any {
			b := obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
			return []any{b.Spec.PolicyName, paramRefColumn(b.Spec.ParamRef)}
		})
	return []resources.Definition{vap, vapb, mp, mpb}
}

var bindingColumns = []registry.TableColumn{
	{Name: "PolicyName", Type: "string", Description: "PolicyName references a ValidatingAdmissionPolicy or MutatingAdmissionPolicy name"},
	{Name: "ParamRef", Type: "string", Description: "ParamRef specifies the parameter resource used to configure the admission control policy"},
}

// policyResource describes one cluster-scoped policy kind kept at Kubernetes' key
// (/registry/RESOURCE), its generation bumped when its spec changes; columns come
// between Name and Age.
func policyResource(kind string, newObj, newList func() runtime.Object, s registry.Strategy,
	columns []registry.TableColumn, cells func(obj runtime.Object) []any) resources.Definition {
	singular := strings.ToLower(kind)
	plural := singular + "s"
	if strings.HasSuffix(singular, "policy") {
		plural = strings.TrimSuffix(singular, "y") + "ies"
	}
	return resources.Definition{Resource: &registry.Resource{
		AllowUnconditionalUpdate: true, TracksGeneration: true, GroupVersion: admissionregistrationv1.SchemeGroupVersion,
		Name: plural, SingularName: singular, Kind: kind, ListKind: kind + "List",
		Categories: []string{"api-extensions"}, StoragePrefix: "/registry/" + plural,
		NewFunc: newObj, NewListFunc: newList, Strategy: s,
		Printer: &registry.Printer{
			Columns: append(append([]registry.TableColumn{endpoints.NameColumn}, columns...), endpoints.AgeColumn),
			Row: func(obj runtime.Object) []any {
				m := obj.(metav1.Object)
				row := append([]any{m.GetName()}, cells(obj)...)
				return append(row, endpoints.Age(m.GetCreationTimestamp(), time.Now()))
			},
		},
	}}
}

func paramKindColumn(pk *admissionregistrationv1.ParamKind) string {
	if pk == nil {
		return "<unset>"
	}
	return pk.APIVersion + "/" + pk.Kind
}

func paramRefColumn(pr *admissionregistrationv1.ParamRef) string {
	switch {
	case pr == nil:
		return "<unset>"
	case pr.Name != "" && pr.Namespace != "":
		return pr.Namespace + "/" + pr.Name
	case pr.Name != "":
		return pr.Name
	}
	return "<selector>"
}

// vapStrategy keeps a ValidatingAdmissionPolicy's status out of writes to the object:
// the status subresource (the type-checking controller) owns it.
type vapStrategy struct{ strategy }

func (vapStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
}

func (vapStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Status = old.(*admissionregistrationv1.ValidatingAdmissionPolicy).Status
}

// vapStatusStrategy writes only a ValidatingAdmissionPolicy's status.
type vapStatusStrategy struct{}

func (vapStatusStrategy) Default(runtime.Object) {}

func (vapStatusStrategy) PrepareForCreate(context.Context, runtime.Object) {}

func (vapStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	p, o := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy), old.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	p.Spec = o.Spec
	p.Labels, p.Annotations, p.Finalizers, p.OwnerReferences = o.Labels, o.Annotations, o.Finalizers, o.OwnerReferences
}

func (vapStatusStrategy) Validate(context.Context, runtime.Object) field.ErrorList { return nil }

func (vapStatusStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validatePolicyStatus(&obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Status, field.NewPath("status"))
}

// defaultValidatingPolicy is Kubernetes' SetDefaults_ValidatingAdmissionPolicySpec with
// the match resource and rule defaults under it.
func defaultValidatingPolicy(obj runtime.Object) {
	spec := &obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec
	if spec.FailurePolicy == nil {
		spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	}
	defaultMatchResources(spec.MatchConstraints)
}

// defaultMutatingPolicy is Kubernetes' SetDefaults_MutatingAdmissionPolicySpec with the
// match resource and rule defaults under it.
func defaultMutatingPolicy(obj runtime.Object) {
	spec := &obj.(*admissionregistrationv1.MutatingAdmissionPolicy).Spec
	if spec.FailurePolicy == nil {
		spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	}
	defaultMatchResources(spec.MatchConstraints)
}

// defaultMatchResources is Kubernetes' SetDefaults_MatchResources and SetDefaults_Rule.
func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
			}
		}
	}
}
