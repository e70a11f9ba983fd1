package webhook

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/api"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// start runs Webhooks over a fake client holding objs until the test ends, once its
// informers have synced.
func start(t *testing.T, objs ...runtime.Object) *Webhooks {
	t.Helper()
	return startWith(t, Config{Client: fake.NewClientset(objs...), Scheme: api.MustScheme()})
}

// startWith runs Webhooks with cfg until the test ends, once its informers have synced.
func startWith(t *testing.T, cfg Config) *Webhooks {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return w.allSynced(), nil
	}); err != nil {
		t.Fatal("informers did not sync")
	}
	return w
}

func podAttributes(dryRun bool) *admission.Attributes {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	return &admission.Attributes{Kind: corev1.SchemeGroupVersion.WithKind("Pod"), Resource: corev1.SchemeGroupVersion.WithResource("pods"),
		Namespace: "default", Name: "p", Operation: admission.Create, Object: pod, DryRun: dryRun}
}

func TestNoConfigurationsNoPlugins(t *testing.T) {
	w := start(t)
	ms, vs, release := w.Acquire(podAttributes(false))
	defer release()
	if len(ms) != 0 || len(vs) != 0 {
		t.Fatalf("got %d mutators and %d validators without any configuration", len(ms), len(vs))
	}
}

// A webhook whose side effects are Some or Unknown (only storable through older API
// versions) refuses dry-run requests before any call.
func TestDryRunRefusedBySideEffects(t *testing.T) {
	u := "https://127.0.0.1:1/never-called"
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "some.example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: ptr.To(admissionregistrationv1.AllScopes)}}},
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassSome), AdmissionReviewVersions: []string{"v1"},
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
			NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, TimeoutSeconds: ptr.To[int32](1)}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	w := start(t, cfg, ns)
	_, vs, release := w.Acquire(podAttributes(true))
	defer release()
	if len(vs) != 1 {
		t.Fatalf("got %d validators, want 1", len(vs))
	}
	err := vs[0].Validate(context.Background(), podAttributes(true))
	want := `admission webhook "some.example.com" does not support dry run`
	if !apierrors.IsBadRequest(err) || err.Error() != want {
		t.Fatalf("got %v, want 400 %q", err, want)
	}
}

// clientConfig.service goes to the Service's cluster IP; a headless Service cannot be
// routed to.
func TestServiceResolvedToClusterIP(t *testing.T) {
	svc := func(name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hooks"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 443}}}}
	}
	w := start(t, svc("hook", "10.0.0.7"), svc("headless", corev1.ClusterIPNone))
	r := clusterIPResolver{w.factory.Core().V1().Services().Lister()}
	got, err := r.ResolveEndpoint("hooks", "hook", 443)
	if err != nil || *got != (url.URL{Scheme: "https", Host: "10.0.0.7:443"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := r.ResolveEndpoint("hooks", "headless", 443); err == nil || !strings.Contains(err.Error(), "None") {
		t.Fatalf("headless: got %v", err)
	}
	if _, err := r.ResolveEndpoint("hooks", "missing", 443); !apierrors.IsNotFound(err) {
		t.Fatalf("missing: got %v", err)
	}
}
