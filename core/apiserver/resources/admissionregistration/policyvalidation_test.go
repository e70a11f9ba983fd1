package admissionregistration

import (
	"context"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func podRules(ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}}
}

func vap(mutate func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec)) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: podRules(admissionregistrationv1.Create),
			Validations: []admissionregistrationv1.Validation{{Expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"}}}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func mapolicy(mutate func(s *admissionregistrationv1.MutatingAdmissionPolicySpec)) *admissionregistrationv1.MutatingAdmissionPolicy {
	p := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: podRules(admissionregistrationv1.Create),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{labels: {"seen": "yes"}}}`}}}}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func vapBinding(mutate func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec)) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	if mutate != nil {
		mutate(&b.Spec)
	}
	return b
}

func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+":"+string(e.Type))
	}
	return out
}

// The policies and bindings are checked on create as Kubernetes checks them: CEL that
// does not compile is Invalid at the expression's path, required fields are Required,
// exclusive or unsupported values are refused.
func TestPolicyValidation(t *testing.T) {
	defs := Definitions()
	res := map[string]int{}
	for i, d := range defs {
		res[d.Resource.Kind] = i
	}
	tests := []struct {
		name string
		kind string
		obj  runtime.Object
		want []string
	}{
		{"valid policy", "ValidatingAdmissionPolicy", vap(nil), nil},
		{"bad CEL", "ValidatingAdmissionPolicy", vap(func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "object.metadata.name =="
		}), []string{"spec.validations[0].expression:FieldValueInvalid"}},
		{"CEL of the wrong type", "ValidatingAdmissionPolicy", vap(func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "object.metadata.name"
		}), []string{"spec.validations[0].expression:FieldValueInvalid"}},
		{"params without paramKind", "ValidatingAdmissionPolicy", vap(func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "params.data.x == 'y'"
		}), []string{"spec.validations[0].expression:FieldValueInvalid"}},
		{"params with paramKind, variables, message expression", "ValidatingAdmissionPolicy", vap(func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
			s.Variables = []admissionregistrationv1.Variable{{Name: "want", Expression: "params.data.label"}}
			s.Validations[0].Expression = "variables.want in object.metadata.labels"
			s.Validations[0].MessageExpression = "'missing label ' + params.data.label"
			s.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "has-params", Expression: "has(params.data)"}}
		}), nil},
		{"bad variable name and unknown variable", "ValidatingAdmissionPolicy", vap(func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Variables = []admissionregistrationv1.Variable{{Name: "in", Expression: "1"}}
			s.Validations[0].Expression = "variables.nope == 1"
		}), []string{"spec.variables[0].name:FieldValueInvalid", "spec.validations[0].expression:FieldValueInvalid"}},
		{"nothing to check, no constraints", "ValidatingAdmissionPolicy", vap(func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations = nil
			s.MatchConstraints = nil
		}), []string{"spec.matchConstraints:FieldValueRequired", "spec.validations:FieldValueRequired", "spec.auditAnnotations:FieldValueRequired"}},
		{"bad reason, paramKind and audit key", "ValidatingAdmissionPolicy", vap(func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Reason = ptr.To(metav1.StatusReasonConflict)
			s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "a/b/c", Kind: "Config Map"}
			s.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "bad key", ValueExpression: "'x'"}}
		}), []string{"spec.paramKind.apiVersion:FieldValueInvalid", "spec.paramKind.kind:FieldValueInvalid",
			"spec.validations[0].reason:FieldValueNotSupported", "spec.auditAnnotations[0].key:FieldValueInvalid"}},
		{"valid binding", "ValidatingAdmissionPolicyBinding", vapBinding(nil), nil},
		{"binding without actions or policy", "ValidatingAdmissionPolicyBinding", vapBinding(func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.PolicyName, s.ValidationActions = "", nil
		}), []string{"spec.policyName:FieldValueRequired", "spec.validationActions:FieldValueRequired"}},
		{"binding with Deny and Warn, name and selector", "ValidatingAdmissionPolicyBinding", vapBinding(func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny, admissionregistrationv1.Warn}
			s.ParamRef = &admissionregistrationv1.ParamRef{Name: "x", Selector: &metav1.LabelSelector{}}
		}), []string{"spec.paramRef.name:FieldValueForbidden", "spec.paramRef.selector:FieldValueForbidden",
			"spec.paramRef.parameterNotFoundAction:FieldValueRequired", "spec.validationActions:FieldValueInvalid"}},
		{"valid mutating policy", "MutatingAdmissionPolicy", mapolicy(nil), nil},
		{"mutating policy with bad JSONPatch and DELETE", "MutatingAdmissionPolicy", mapolicy(func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.MatchConstraints = podRules(admissionregistrationv1.Delete)
			s.Mutations[0] = admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: "[JSONPatch{op: 'add'"}}
			s.ReinvocationPolicy = ""
		}), []string{"spec.matchConstraints.resourceRules.operations:FieldValueNotSupported",
			"spec.mutations[0].jsonPatch.expression:FieldValueInvalid", "spec.reinvocationPolicy:FieldValueRequired"}},
		{"mutating policy without mutations", "MutatingAdmissionPolicy", mapolicy(func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.Mutations = nil
		}), []string{"spec.mutations:FieldValueRequired"}},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := defs[res[tt.kind]].Resource.Strategy
			s.Default(tt.obj)
			if got := fields(s.Validate(ctx, tt.obj)); !slices.Equal(got, tt.want) {
				t.Fatalf("errors %v, want %v", got, tt.want)
			}
		})
	}
}

// An update may keep an expression the stored policy had even where a new one would be
// refused, and the status written through the main resource is the stored one.
func TestPolicyUpdate(t *testing.T) {
	res := Definitions()[2].Resource
	if res.Kind != "ValidatingAdmissionPolicy" || res.StatusStrategy == nil {
		t.Fatalf("third definition is %s (status %v)", res.Kind, res.StatusStrategy != nil)
	}
	ctx := context.Background()
	old := vap(nil)
	res.Strategy.Default(old)
	old.Status.ObservedGeneration = 3
	updated := old.DeepCopy()
	updated.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
	updated.Spec.Validations = append(updated.Spec.Validations, admissionregistrationv1.Validation{Expression: "true", Message: "ok"})
	res.Strategy.PrepareForUpdate(ctx, updated, old)
	if updated.Status.ObservedGeneration != 3 {
		t.Fatalf("status not kept: %+v", updated.Status)
	}
	if errs := res.Strategy.ValidateUpdate(ctx, updated, old); len(errs) != 0 {
		t.Fatalf("update: %v", errs)
	}
	status := old.DeepCopy()
	status.Spec.Validations = nil
	status.Status.TypeChecking = &admissionregistrationv1.TypeChecking{ExpressionWarnings: []admissionregistrationv1.ExpressionWarning{{FieldRef: "spec.validations[0].expression"}}}
	res.StatusStrategy.PrepareForUpdate(ctx, status, old)
	if len(status.Spec.Validations) != 1 {
		t.Fatalf("status write changed the spec: %+v", status.Spec)
	}
	if got := fields(res.StatusStrategy.ValidateUpdate(ctx, status, old)); !slices.Equal(got, []string{"status.typeChecking.expressionWarnings[0].warning:FieldValueRequired"}) {
		t.Fatalf("status errors %v", got)
	}
}

// The resources are served under Kubernetes' names.
func TestPolicyResourceNames(t *testing.T) {
	var got []string
	for _, d := range Definitions() {
		got = append(got, d.Resource.Name+"@"+d.Resource.StoragePrefix)
	}
	want := []string{"validatingwebhookconfigurations@/registry/validatingwebhookconfigurations",
		"mutatingwebhookconfigurations@/registry/mutatingwebhookconfigurations",
		"validatingadmissionpolicies@/registry/validatingadmissionpolicies",
		"validatingadmissionpolicybindings@/registry/validatingadmissionpolicybindings",
		"mutatingadmissionpolicies@/registry/mutatingadmissionpolicies",
		"mutatingadmissionpolicybindings@/registry/mutatingadmissionpolicybindings"}
	if !slices.Equal(got, want) {
		t.Fatalf("resources %v, want %v", got, want)
	}
}
