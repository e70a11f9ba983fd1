// Package requireteam is the benchmarks' one admission rule — "pods must carry the label
// team" — as each mechanism expresses it: a ValidatingAdmissionPolicy with its binding, a
// validating webhook configuration and the webhook's decision. The WASM plugins of the
// rule are the require-labels examples under examples/plugins.
package requireteam

import (
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Name names the policy, its binding and the webhook configuration.
const Name = "require-team"

// Message is the refusal every mechanism gives.
const Message = `label "team" is required`

// podCreates matches pod creates.
var podCreates = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
}

// Policy is the rule in CEL.
func Policy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: podCreates}}},
			Validations: []admissionregistrationv1.Validation{{Expression: `has(object.metadata.labels) && 'team' in object.metadata.labels`,
				Message: Message}}}}
}

// Binding enforces Policy (Deny) in the namespaces sel selects.
func Binding(sel *metav1.LabelSelector) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: Name,
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: sel},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
}

// Webhook sends the pod creates of the namespaces sel selects to cc (Fail, 10 s).
func Webhook(cc admissionregistrationv1.WebhookClientConfig, sel *metav1.LabelSelector) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: Name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: Name + ".bench.wasmplane.io", ClientConfig: cc,
			Rules: []admissionregistrationv1.RuleWithOperations{podCreates}, NamespaceSelector: sel,
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds: ptr.To[int32](10), AdmissionReviewVersions: []string{"v1"}}}}
}

// Decide is the webhook's answer: refused without the label. It looks for the key in the
// raw object rather than decoding it, as a webhook tuned for speed would.
func Decide(_ *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if !strings.Contains(string(req.Object.Raw), `"team":`) {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: 403, Message: Message}}
	}
	return nil
}
