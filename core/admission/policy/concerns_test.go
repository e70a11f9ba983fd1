package policy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/admission/adapter"
	"github.com/wasmplane/wasmplane/core/api"
	"github.com/wasmplane/wasmplane/core/authz"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// TestConcerns: a request concerns the validating (and the mutating) policies when a bound policy's match
// constraints and its binding's match resources both take it in, or when a policy with
// params takes it in whatever its bindings say; bindings of missing policies count for
// nothing.
func TestConcerns(t *testing.T) {
	policy := func(name string, params bool) *admissionregistrationv1.ValidatingAdmissionPolicy {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
					MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: ptr.To(admissionregistrationv1.AllScopes)}}}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "false"}}}}
		if params {
			p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		}
		return p
	}
	binding := func(policyName string, ns map[string]string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policyName + "-binding"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policyName, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
		if ns != nil {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: ns}, ObjectSelector: &metav1.LabelSelector{},
				MatchPolicy: ptr.To(admissionregistrationv1.Equivalent)}
		}
		return b
	}
	pod := func(ns string) *admission.Attributes {
		return &admission.Attributes{Kind: corev1.SchemeGroupVersion.WithKind("Pod"), Resource: corev1.SchemeGroupVersion.WithResource("pods"),
			Namespace: ns, Name: "p", Operation: admission.Create, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}}
	}
	deployment := &admission.Attributes{Kind: appsv1.SchemeGroupVersion.WithKind("Deployment"), Resource: appsv1.SchemeGroupVersion.WithResource("deployments"),
		Namespace: "a", Name: "d", Operation: admission.Create, Object: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "a"}}}
	teamA := map[string]string{"team": "a"}
	tests := []struct {
		name string
		objs []runtime.Object
		a    *admission.Attributes
		want bool
	}{
		{"no bindings", []runtime.Object{policy("p", false)}, pod("a"), false},
		{"bound everywhere", []runtime.Object{policy("p", false), binding("p", nil)}, pod("b"), true},
		{"binding selects the namespace", []runtime.Object{policy("p", false), binding("p", teamA)}, pod("a"), true},
		{"binding leaves the namespace out", []runtime.Object{policy("p", false), binding("p", teamA)}, pod("b"), false},
		{"policy leaves the resource out", []runtime.Object{policy("p", false), binding("p", nil)}, deployment, false},
		{"binding of a missing policy", []runtime.Object{binding("missing", nil)}, pod("a"), false},
		{"policy with params, binding leaves the namespace out", []runtime.Object{policy("p", true), binding("p", teamA)}, pod("b"), true},
		{"policy with params, resource left out", []runtime.Object{policy("p", true), binding("p", teamA)}, deployment, false},
		{"unknown namespace", []runtime.Object{policy("p", false), binding("p", teamA)}, pod("nowhere"), true},
	}
	for _, tt := range tests {
		namespaces := []runtime.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: teamA}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"team": "b"}}},
		}
		t.Run(tt.name, func(t *testing.T) {
			p := startPolicies(t, append(namespaces, tt.objs...)...)
			if got := (validator{p}).Concerns(context.Background(), tt.a); got != tt.want {
				t.Fatalf("Concerns = %v, want %v", got, tt.want)
			}
			if (mutator{p}).Concerns(context.Background(), tt.a) {
				t.Fatal("the mutating policies are concerned without any")
			}
		})
		// The same policies and bindings as mutating ones answer the same.
		t.Run(tt.name+"/mutating", func(t *testing.T) {
			objs := slices.Clone(namespaces)
			for _, o := range tt.objs {
				objs = append(objs, asMutating(o))
			}
			p := startPolicies(t, objs...)
			if got := (mutator{p}).Concerns(context.Background(), tt.a); got != tt.want {
				t.Fatalf("Concerns = %v, want %v", got, tt.want)
			}
		})
	}
}

// asMutating turns a validating policy or binding of TestConcerns into the mutating one
// with the same name, constraints, params and match resources.
func asMutating(o runtime.Object) runtime.Object {
	switch o := o.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		c := o.Spec.MatchConstraints
		return &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: o.ObjectMeta, Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			ParamKind: o.Spec.ParamKind, FailurePolicy: o.Spec.FailurePolicy, ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			MatchConstraints: &admissionregistrationv1.MatchResources{NamespaceSelector: c.NamespaceSelector, ObjectSelector: c.ObjectSelector,
				MatchPolicy: c.MatchPolicy, ResourceRules: c.ResourceRules},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: "Object{}"}}}}}
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: o.ObjectMeta,
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: o.Spec.PolicyName}}
		if m := o.Spec.MatchResources; m != nil {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: m.NamespaceSelector, ObjectSelector: m.ObjectSelector, MatchPolicy: m.MatchPolicy}
		}
		return b
	}
	return o
}

// startPolicies runs the informers of Policies over a fake client holding objs until the
// test ends, once they have synced; the plugins themselves are not initialized (no
// discovery), only marked started, which is all Concerns reads.
func startPolicies(t *testing.T, objs ...runtime.Object) *Policies {
	t.Helper()
	scheme := api.MustScheme()
	p, err := New(Config{Client: fake.NewClientset(objs...), Dynamic: dynamicfake.NewSimpleDynamicClient(scheme),
		Authorizer: Authorizer(authz.AuthorizerFunc(func(context.Context, authz.Attributes) (authz.Decision, string, error) {
			return authz.DecisionAllow, "", nil
		})), Objects: adapter.ObjectInterfaces{Scheme: scheme}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		p.factory.Shutdown()
	})
	close(p.started)
	p.factory.Start(ctx.Done())
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return p.allSynced(), nil
	}); err != nil {
		t.Fatal("informers did not sync")
	}
	return p
}
