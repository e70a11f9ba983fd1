package admission_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
)

// BenchmarkPodCreateBesideUnrelatedPolicies measures what admission configurations for
// other namespaces cost a pod create: two servers, one without any, one with a
// mutating and a validating webhook configuration and a mutating and a validating
// admission policy, each bound to namespaces other than the creates'; creates take turns
// between them, b.N on each. What the second adds is its p50 less the first's: what a
// cluster pays for cert-manager's or an injector's webhooks on requests they never see.
func BenchmarkPodCreateBesideUnrelatedPolicies(b *testing.B) {
	plain := testserver.StartAPI(b).Clientset(b, false)
	busy := testserver.StartAPI(b).Clientset(b, false)
	for _, cs := range []kubernetes.Interface{plain, busy} {
		benchNamespace(b, cs, "here")
	}
	benchNamespace(b, busy, "elsewhere")
	configureElsewhere(b, busy)
	created := 0
	create := func(cs kubernetes.Interface) time.Duration {
		p := simplePod(fmt.Sprintf("p-%d", created))
		p.Labels = map[string]string{"team": "bench"}
		created++
		start := time.Now()
		if _, err := cs.CoreV1().Pods("here").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 200 {
		create(plain)
		create(busy)
	}
	var none, with []time.Duration
	b.ResetTimer()
	for range b.N {
		none = append(none, create(plain))
		with = append(with, create(busy))
	}
	b.StopTimer()
	p50 := reportLatency(b, "none", none)
	b.ReportMetric(reportLatency(b, "unrelated", with)-p50, "unrelated-adds-µs")
}

// configureElsewhere gives the server a mutating and a validating webhook configuration
// and a mutating and a validating admission policy, all for pods in namespace
// "elsewhere" only, and waits until they are in force there.
func configureElsewhere(b *testing.B, cs kubernetes.Interface) {
	ctx := context.Background()
	elsewhere := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "elsewhere"}}
	podCreates := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
	named := []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: podCreates[0]}}
	// Nothing listens there: a pod create in "elsewhere" fails once the webhooks are in
	// force, and nothing in "here" may reach them.
	refused := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/hook")}
	ar := cs.AdmissionregistrationV1()
	if _, err := ar.MutatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: named},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{metadata: Object.metadata{labels: {"seen": "yes"}}}`}}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := ar.MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "label",
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: elsewhere}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := ar.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "named"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: named},
			Validations: []admissionregistrationv1.Validation{{Expression: `object.metadata.name != ""`}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := ar.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "named"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "named",
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: elsewhere},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := ar.MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "inject"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "inject.bench.wasmplane.io", ClientConfig: refused, Rules: podCreates,
			NamespaceSelector: elsewhere, FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			ReinvocationPolicy: ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy), AdmissionReviewVersions: []string{"v1"}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "check"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "check.bench.wasmplane.io", ClientConfig: refused, Rules: podCreates,
			NamespaceSelector: elsewhere, FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods("elsewhere").Create(ctx, simplePod("probe"), metav1.CreateOptions{})
		if err == nil {
			return false, cs.CoreV1().Pods("elsewhere").Delete(ctx, "probe", metav1.DeleteOptions{})
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("the webhooks never refused a pod in elsewhere: %v", err)
	}
}
