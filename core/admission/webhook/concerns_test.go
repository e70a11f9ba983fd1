package webhook

import (
	"context"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/api"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// TestConcerns checks Concerns against what the webhook plugins do: a request
// that concerns no webhook never reaches one, and one that a webhook's rules and selectors
// take in does (each webhook here points at a closed port with failurePolicy Fail, so a
// call shows as an error).
func TestConcerns(t *testing.T) {
	refused := "https://127.0.0.1:1/refused"
	hook := func(name string, mod func(h *admissionregistrationv1.ValidatingWebhook)) *admissionregistrationv1.ValidatingWebhookConfiguration {
		h := admissionregistrationv1.ValidatingWebhook{Name: name + ".example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &refused},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: ptr.To(admissionregistrationv1.AllScopes)}}},
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), MatchPolicy: ptr.To(admissionregistrationv1.Exact),
			NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, TimeoutSeconds: ptr.To[int32](1)}
		if mod != nil {
			mod(&h)
		}
		return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: []admissionregistrationv1.ValidatingWebhook{h}}
	}
	inTeamA := func(h *admissionregistrationv1.ValidatingWebhook) {
		h.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	}
	labelled := func(h *admissionregistrationv1.ValidatingWebhook) {
		h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"checked": "yes"}}
	}
	deployments := func(policy admissionregistrationv1.MatchPolicyType) func(h *admissionregistrationv1.ValidatingWebhook) {
		return func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules[0].APIGroups, h.Rules[0].APIVersions, h.Rules[0].Resources = []string{"apps"}, []string{"v1beta2"}, []string{"deployments"}
			h.MatchPolicy = ptr.To(policy)
		}
	}
	withCondition := func(h *admissionregistrationv1.ValidatingWebhook) {
		h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "never", Expression: "false"}}
	}
	pod := func(ns string, labels map[string]string) *admission.Attributes {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, Labels: labels}}
		return &admission.Attributes{Kind: corev1.SchemeGroupVersion.WithKind("Pod"), Resource: corev1.SchemeGroupVersion.WithResource("pods"),
			Namespace: ns, Name: "p", Operation: admission.Create, Object: p}
	}
	deployment := &admission.Attributes{Kind: appsv1.SchemeGroupVersion.WithKind("Deployment"), Resource: appsv1.SchemeGroupVersion.WithResource("deployments"),
		Namespace: "a", Name: "d", Operation: admission.Create, Object: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "a"}}}
	configuration := &admission.Attributes{Kind: admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"),
		Resource: admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations"), Name: "c", Operation: admission.Create,
		Object: &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "c"}}}
	tests := []struct {
		name     string
		hook     *admissionregistrationv1.ValidatingWebhookConfiguration
		a        *admission.Attributes
		concerns bool
		// called is whether the webhook is called (false with match conditions that
		// leave the request out, which Concerns does not evaluate).
		called bool
	}{
		{"rules match", hook("all", nil), pod("b", nil), true, true},
		{"other resource", hook("all", nil), deployment, false, false},
		{"other operation", hook("all", nil), &admission.Attributes{Kind: corev1.SchemeGroupVersion.WithKind("Pod"), Resource: corev1.SchemeGroupVersion.WithResource("pods"),
			Namespace: "b", Name: "p", Operation: admission.Delete, OldObject: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "b"}}}, false, false},
		{"namespace selected", hook("team-a", inTeamA), pod("a", nil), true, true},
		{"namespace not selected", hook("team-a", inTeamA), pod("b", nil), false, false},
		{"unknown namespace", hook("team-a", inTeamA), pod("nowhere", nil), true, true},
		{"object selected", hook("labelled", labelled), pod("b", map[string]string{"checked": "yes"}), true, true},
		{"object not selected", hook("labelled", labelled), pod("b", nil), false, false},
		{"equivalent resource, Equivalent", hook("deploy", deployments(admissionregistrationv1.Equivalent)), deployment, true, true},
		{"equivalent resource, Exact", hook("deploy", deployments(admissionregistrationv1.Exact)), deployment, false, false},
		{"match conditions not evaluated", hook("cond", withCondition), pod("b", nil), true, false},
		{"admission configuration", hook("cfg", func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules[0].APIGroups, h.Rules[0].Resources = []string{"*"}, []string{"*"}
			h.Rules[0].APIVersions = []string{"*"}
		}), configuration, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := startConcerns(t, tt.hook)
			_, vs, release := w.Acquire(tt.a)
			defer release()
			if len(vs) != 1 {
				t.Fatalf("got %d validators, want 1", len(vs))
			}
			ctx := context.Background()
			if got := vs[0].(admission.Selective).Concerns(ctx, tt.a); got != tt.concerns {
				t.Fatalf("Concerns = %v, want %v", got, tt.concerns)
			}
			err := vs[0].Validate(ctx, tt.a)
			if called := err != nil; called != tt.called {
				t.Fatalf("webhook called = %v (%v), want %v", called, err, tt.called)
			}
		})
		// The same webhook as a mutating one: the mutating plugin's answer is the same.
		t.Run(tt.name+"/mutating", func(t *testing.T) {
			v := tt.hook.Webhooks[0]
			hook := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: tt.hook.ObjectMeta, Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules, FailurePolicy: v.FailurePolicy, MatchPolicy: v.MatchPolicy,
				NamespaceSelector: v.NamespaceSelector, ObjectSelector: v.ObjectSelector, SideEffects: v.SideEffects, TimeoutSeconds: v.TimeoutSeconds,
				AdmissionReviewVersions: v.AdmissionReviewVersions, MatchConditions: v.MatchConditions,
				ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy)}}}
			w := startConcerns(t, hook)
			ms, _, release := w.Acquire(tt.a)
			defer release()
			if len(ms) != 1 {
				t.Fatalf("got %d mutators, want 1", len(ms))
			}
			ctx := context.Background()
			if got := ms[0].(admission.Selective).Concerns(ctx, tt.a); got != tt.concerns {
				t.Fatalf("Concerns = %v, want %v", got, tt.concerns)
			}
			err := ms[0].Admit(ctx, tt.a)
			if called := err != nil; called != tt.called {
				t.Fatalf("webhook called = %v (%v), want %v", called, err, tt.called)
			}
		})
	}
}

// startConcerns runs Webhooks with configuration and namespaces a (team=a) and b
// (team=b), apps/v1 and v1beta2 deployments being the same objects.
func startConcerns(t *testing.T, configuration runtime.Object) *Webhooks {
	t.Helper()
	nsA := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"team": "a"}}}
	nsB := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"team": "b"}}}
	return startWith(t, Config{Client: fake.NewClientset(configuration, nsA, nsB), Scheme: api.MustScheme(), Equivalents: deploymentVersions()})
}

// deploymentVersions makes apps/v1 and apps/v1beta2 deployments the same objects.
func deploymentVersions() runtime.EquivalentResourceMapper {
	r := runtime.NewEquivalentResourceRegistry()
	for _, v := range []string{"v1", "v1beta2"} {
		r.RegisterKindFor(schema.GroupVersionResource{Group: "apps", Version: v, Resource: "deployments"}, "", schema.GroupVersionKind{Group: "apps", Version: v, Kind: "Deployment"})
	}
	return r
}
