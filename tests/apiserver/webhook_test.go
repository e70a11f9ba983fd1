// The webhook tests drive admission webhooks (ValidatingWebhookConfiguration,
// MutatingWebhookConfiguration) end to end: real HTTPS webhook servers on 127.0.0.1,
// configured through the API, exercised through client-go.

package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"github.com/wasmplane/wasmplane/tests/internal/webhookserver"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// env is one API server shared by the subtests; each works in its own namespace and
// scopes its webhooks to it.
type webhookEnv struct {
	s  *testserver.Server
	cs kubernetes.Interface
}

func newWebhookEnv(t testing.TB) *webhookEnv {
	s := testserver.StartAPI(t)
	return &webhookEnv{s: s, cs: s.Clientset(t, true)}
}

func (e *webhookEnv) namespace(t testing.TB, name string, labels map[string]string) string {
	t.Helper()
	_, err := e.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// inNamespace scopes a webhook to one namespace.
func inNamespace(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}

var configMapRule = []admissionregistrationv1.RuleWithOperations{{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
}}

func validatingHook(name string, cc admissionregistrationv1.WebhookClientConfig, ns string) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: cc, Rules: configMapRule,
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		NamespaceSelector: inNamespace(ns)}
}

func mutatingHook(name string, cc admissionregistrationv1.WebhookClientConfig, ns string) admissionregistrationv1.MutatingWebhook {
	return admissionregistrationv1.MutatingWebhook{Name: name, ClientConfig: cc, Rules: configMapRule,
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		NamespaceSelector: inNamespace(ns)}
}

func (e *webhookEnv) validating(t testing.TB, name string, hooks ...admissionregistrationv1.ValidatingWebhook) {
	t.Helper()
	ctx := context.Background()
	api := e.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := api.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func (e *webhookEnv) mutating(t testing.TB, name string, hooks ...admissionregistrationv1.MutatingWebhook) {
	t.Helper()
	ctx := context.Background()
	api := e.cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := api.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func webhookConfigMap(name string, labels map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: data}
}

// until retries create until check accepts its result: a configuration takes effect
// once the server's informer has it, a moment after it is stored. Each attempt uses a
// fresh name (prefix-N); the name of the accepted attempt is returned.
func until(t testing.TB, prefix string, create func(name string) error, check func(error) bool) string {
	t.Helper()
	var last error
	n := 0
	name := ""
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		n++
		name = fmt.Sprintf("%s-%d", prefix, n)
		last = create(name)
		return check(last), nil
	})
	if err != nil {
		t.Fatalf("webhook not in effect after %d attempts; last result: %v", n, last)
	}
	return name
}

func deny(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: msg}}
}

// warnings collects the Warning headers client-go hears.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	w.msgs = append(w.msgs, text)
	w.mu.Unlock()
}

func (w *warnings) has(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func TestWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	e := newWebhookEnv(t)
	ctx := context.Background()

	t.Run("ValidatingDeniesWithMessageAndStoresNothing", func(t *testing.T) {
		ns := e.namespace(t, "deny", nil)
		srv := webhookserver.Start(t, func(_ *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			var cm corev1.ConfigMap
			if err := json.Unmarshal(req.Object.Raw, &cm); err != nil {
				return deny(err.Error())
			}
			if cm.Data["color"] == "red" {
				return deny("red is not allowed")
			}
			return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{"configmap " + req.Name + " looks fine"}}
		})
		e.validating(t, "deny", validatingHook("deny.example.com", srv.ClientConfig("/validate"), ns))
		name := until(t, "red", func(name string) error {
			_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name, nil, map[string]string{"color": "red"}), metav1.CreateOptions{})
			return err
		}, func(err error) bool { return err != nil })
		var err error
		_, err = e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name+"-again", nil, map[string]string{"color": "red"}), metav1.CreateOptions{})
		want := `admission webhook "deny.example.com" denied the request: red is not allowed`
		// A denial without a code is a 400, as kube-apiserver answers it.
		if status, ok := err.(*apierrors.StatusError); !ok || status.ErrStatus.Code != http.StatusBadRequest || err.Error() != want {
			t.Fatalf("create: got %v (%T), want 400 %q", err, err, want)
		}
		if _, err := e.cs.CoreV1().ConfigMaps(ns).Get(ctx, name+"-again", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("refused configmap: got %v, want NotFound", err)
		}
		// An allowed request carries the webhook's warning.
		w := &warnings{}
		cfg := e.s.Config(true)
		cfg.WarningHandler = w
		cs := testserver.NewClientset(t, cfg)
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap("blue", nil, map[string]string{"color": "blue"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if !w.has("configmap blue looks fine") {
			t.Fatalf("warnings %q lack the webhook's", w.msgs)
		}
	})

	t.Run("EquivalentMatchesTheSameObjectsInAnotherVersion", func(t *testing.T) {
		// HorizontalPodAutoscalers are served as autoscaling/v1 and v2, one storage: a
		// webhook for v2 with matchPolicy Equivalent sees a v1 create as a v2 object
		// (kind v2, requestKind v1); with Exact it does not see it at all.
		for _, policy := range []admissionregistrationv1.MatchPolicyType{admissionregistrationv1.Equivalent, admissionregistrationv1.Exact} {
			name := strings.ToLower(string(policy))
			ns := e.namespace(t, "hpa-"+name, nil)
			srv := webhookserver.Start(t, func(_ *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				return deny(fmt.Sprintf("kind %s/%s, requestKind %s/%s", req.Kind.Group, req.Kind.Version, req.RequestKind.Group, req.RequestKind.Version))
			})
			h := validatingHook(name+".example.com", srv.ClientConfig("/"), ns)
			h.Rules = []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"autoscaling"}, APIVersions: []string{"v2"}, Resources: []string{"horizontalpodautoscalers"}}}}
			h.MatchPolicy = ptr.To(policy)
			e.validating(t, "hpa-"+name, h)
			hpa := func(name string) *autoscalingv1.HorizontalPodAutoscaler {
				return &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 2,
						ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}
			}
			// In force once a v2 create is refused.
			until(t, "v2", func(name string) error {
				_, err := e.cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 2,
						ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}, metav1.CreateOptions{})
				return err
			}, func(err error) bool { return err != nil })
			_, err := e.cs.AutoscalingV1().HorizontalPodAutoscalers(ns).Create(ctx, hpa("v1"), metav1.CreateOptions{})
			switch want := "kind autoscaling/v2, requestKind autoscaling/v1"; policy {
			case admissionregistrationv1.Equivalent:
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Equivalent: v1 create got %v, want the webhook's refusal %q", err, want)
				}
			default:
				if err != nil {
					t.Fatalf("Exact: v1 create got %v, want it admitted", err)
				}
			}
		}
	})

	t.Run("MutatingPatchIsStoredAndRevalidated", func(t *testing.T) {
		ns := e.namespace(t, "mutate", nil)
		srv := webhookserver.Start(t, func(_ *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			value := "yes"
			if strings.HasPrefix(req.Name, "invalid") {
				value = "not a valid label value!"
			}
			patch := fmt.Sprintf(`[{"op":"add","path":"/metadata/labels/mutated","value":%q}]`, value)
			return &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(patch), PatchType: ptr.To(admissionv1.PatchTypeJSONPatch)}
		})
		e.mutating(t, "mutate", mutatingHook("mutate.example.com", srv.ClientConfig("/mutate"), ns))
		name := until(t, "cm", func(name string) error {
			_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name, map[string]string{"app": "x"}, nil), metav1.CreateOptions{})
			return err
		}, func(error) bool {
			return srv.Calls() > 0
		})
		stored, err := e.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if stored.Labels["mutated"] != "yes" || stored.Labels["app"] != "x" {
			t.Fatalf("stored labels %v, want mutated=yes beside app=x", stored.Labels)
		}
		// The patched object is validated again: an invalid label is a 422.
		_, err = e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap("invalid", map[string]string{"app": "x"}, nil), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.labels") {
			t.Fatalf("invalid patch: got %v, want 422 on metadata.labels", err)
		}
		if _, err := e.cs.CoreV1().ConfigMaps(ns).Get(ctx, "invalid", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("refused configmap: got %v, want NotFound", err)
		}
	})

	t.Run("ReinvocationIfNeeded", func(t *testing.T) {
		ns := e.namespace(t, "reinvoke", nil)
		var mu sync.Mutex
		calls := map[string]int{}
		srv := webhookserver.Start(t, func(r *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			var cm corev1.ConfigMap
			_ = json.Unmarshal(req.Object.Raw, &cm)
			key := strings.TrimPrefix(r.URL.Path, "/")
			mu.Lock()
			calls[req.Name+"/"+key]++
			mu.Unlock()
			if _, ok := cm.Labels[key]; ok {
				return nil
			}
			patch := fmt.Sprintf(`[{"op":"add","path":"/metadata/labels/%s","value":"1"}]`, key)
			return &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(patch), PatchType: ptr.To(admissionv1.PatchTypeJSONPatch)}
		})
		first := mutatingHook("first.example.com", srv.ClientConfig("/first"), ns)
		first.ReinvocationPolicy = ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy)
		e.mutating(t, "reinvoke", first, mutatingHook("second.example.com", srv.ClientConfig("/second"), ns))
		name := until(t, "cm", func(name string) error {
			_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name, map[string]string{"app": "x"}, nil), metav1.CreateOptions{})
			return err
		}, func(error) bool { return srv.Calls() > 0 })
		mu.Lock()
		defer mu.Unlock()
		// second changed the object after first saw it: first runs once more, second not.
		if calls[name+"/first"] != 2 || calls[name+"/second"] != 1 {
			t.Fatalf("calls %v: want first twice, second once", calls)
		}
	})

	t.Run("FailurePolicyWithServerStopped", func(t *testing.T) {
		ns := e.namespace(t, "failure", nil)
		srv := webhookserver.Start(t, func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return nil })
		srv.Stop()
		fail := validatingHook("fail.example.com", srv.ClientConfig("/"), ns)
		fail.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"policy": "fail"}}
		ignore := validatingHook("ignore.example.com", srv.ClientConfig("/"), ns)
		ignore.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"policy": "ignore"}}
		ignore.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		e.validating(t, "failure", fail, ignore)
		var err error
		until(t, "fail", func(name string) error {
			_, err = e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name, map[string]string{"policy": "fail"}, nil), metav1.CreateOptions{})
			return err
		}, func(err error) bool { return err != nil })
		if !apierrors.IsInternalError(err) || !strings.HasPrefix(err.Error(), `Internal error occurred: failed calling webhook "fail.example.com": failed to call webhook: Post "`+srv.URL+`/?timeout=10s"`) {
			t.Fatalf("Fail: got %v", err)
		}
		if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap("ignored", map[string]string{"policy": "ignore"}, nil), metav1.CreateOptions{}); err != nil {
			t.Fatalf("Ignore: %v", err)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		ns := e.namespace(t, "timeout", nil)
		release := make(chan struct{})
		srv := webhookserver.Start(t, func(r *http.Request, _ *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			select { // slower than the webhook's timeout: the API server gives up first
			case <-r.Context().Done():
			case <-release:
			}
			return nil
		})
		t.Cleanup(func() { close(release) })
		slow := validatingHook("slow.example.com", srv.ClientConfig("/"), ns)
		slow.TimeoutSeconds = ptr.To[int32](1)
		e.validating(t, "timeout", slow)
		var err error
		var took time.Duration
		// The webhook's 1 s timeout refuses the create well inside the request's 5 s.
		until(t, "slow", func(name string) error {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			start := time.Now()
			_, err = e.cs.CoreV1().ConfigMaps(ns).Create(cctx, webhookConfigMap(name, nil, nil), metav1.CreateOptions{})
			took = time.Since(start)
			return err
		}, func(err error) bool { return err != nil })
		if !strings.Contains(err.Error(), `failed calling webhook "slow.example.com"`) || !strings.Contains(err.Error(), "timeout=1s") {
			t.Fatalf("got %v, want a failed call with timeout=1s", err)
		}
		// Never early: the call is given its whole second.
		if took < time.Second {
			t.Fatalf("the refused create took %v, less than the webhook's 1 s timeout", took)
		}
	})

	t.Run("MatchConditionsSkipCalls", func(t *testing.T) {
		ns := e.namespace(t, "conditions", nil)
		srv := webhookserver.Start(t, func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return deny("checked")
		})
		h := validatingHook("conditions.example.com", srv.ClientConfig("/"), ns)
		h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "checked-only", Expression: `object.metadata.name.startsWith("check")`}}
		e.validating(t, "conditions", h)
		until(t, "check", func(name string) error {
			_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name, nil, nil), metav1.CreateOptions{})
			return err
		}, func(err error) bool { return err != nil })
		before := srv.Calls()
		for i := range 3 {
			if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(fmt.Sprintf("skip-%d", i), nil, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap("check-last", nil, nil), metav1.CreateOptions{}); err == nil {
			t.Fatal("check-last was admitted")
		}
		if got := srv.Calls() - before; got != 1 {
			t.Fatalf("the webhook got %d calls for 3 skipped creates and 1 checked one, want 1", got)
		}
	})

	t.Run("Selectors", func(t *testing.T) {
		ns := e.namespace(t, "selected", map[string]string{"webhooks": "on"})
		other := e.namespace(t, "unselected", nil)
		srv := webhookserver.Start(t, func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return deny("selected")
		})
		h := validatingHook("selectors.example.com", srv.ClientConfig("/"), ns)
		h.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"webhooks": "on"}}
		h.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "skip", Operator: metav1.LabelSelectorOpDoesNotExist}}}
		e.validating(t, "selectors", h)
		until(t, "cm", func(name string) error {
			_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name, nil, nil), metav1.CreateOptions{})
			return err
		}, func(err error) bool { return err != nil })
		before := srv.Calls()
		if _, err := e.cs.CoreV1().ConfigMaps(other).Create(ctx, webhookConfigMap("other-ns", nil, nil), metav1.CreateOptions{}); err != nil {
			t.Fatalf("namespace not selected: %v", err)
		}
		if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap("skipped", map[string]string{"skip": "1"}, nil), metav1.CreateOptions{}); err != nil {
			t.Fatalf("object not selected: %v", err)
		}
		if got := srv.Calls() - before; got != 0 {
			t.Fatalf("the webhook got %d calls for unselected objects", got)
		}
	})

	t.Run("DryRun", func(t *testing.T) {
		ns := e.namespace(t, "dryrun", nil)
		var mu sync.Mutex
		var dry []bool
		srv := webhookserver.Start(t, func(_ *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			mu.Lock()
			dry = append(dry, req.DryRun != nil && *req.DryRun)
			mu.Unlock()
			return deny("seen")
		})
		h := validatingHook("dryrun.example.com", srv.ClientConfig("/"), ns)
		h.SideEffects = ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun)
		e.validating(t, "dryrun", h)
		until(t, "cm", func(name string) error {
			_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name, nil, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, func(err error) bool { return err != nil })
		mu.Lock()
		defer mu.Unlock()
		if len(dry) == 0 || !dry[len(dry)-1] {
			t.Fatalf("the webhook saw dryRun %v, want true", dry)
		}
	})

	t.Run("ValidatingInParallel", func(t *testing.T) {
		ns := e.namespace(t, "parallel", nil)
		// Each call waits for the other to arrive: called one after the other, the first
		// would time out and refuse the request.
		var mu sync.Mutex
		arrived := map[string]chan struct{}{}
		srv := webhookserver.Start(t, func(r *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			mu.Lock()
			ch := arrived[req.Name]
			if ch == nil {
				ch = make(chan struct{})
				arrived[req.Name] = ch
				mu.Unlock()
			} else {
				mu.Unlock()
				close(ch)
			}
			select {
			case <-ch:
				return nil
			case <-r.Context().Done():
				return deny("alone")
			}
		})
		one := validatingHook("one.example.com", srv.ClientConfig("/one"), ns)
		two := validatingHook("two.example.com", srv.ClientConfig("/two"), ns)
		one.TimeoutSeconds, two.TimeoutSeconds = ptr.To[int32](5), ptr.To[int32](5)
		e.validating(t, "parallel", one, two)
		until(t, "cm", func(name string) error {
			_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name, nil, nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("both webhooks must admit: %v", err)
			}
			return err
		}, func(error) bool { return srv.Calls() >= 2 })
	})

	t.Run("AdmissionReviewV1beta1", func(t *testing.T) {
		ns := e.namespace(t, "v1beta1", nil)
		srv := webhookserver.Start(t, func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return deny("old") })
		h := validatingHook("v1beta1.example.com", srv.ClientConfig("/"), ns)
		h.AdmissionReviewVersions = []string{"v1beta1"}
		e.validating(t, "v1beta1", h)
		var err error
		until(t, "cm", func(name string) error {
			_, err = e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name, nil, nil), metav1.CreateOptions{})
			return err
		}, func(err error) bool { return err != nil })
		if got := srv.LastVersion(); got != "admission.k8s.io/v1beta1" || !strings.Contains(err.Error(), "denied the request: old") {
			t.Fatalf("got version %q and %v, want a v1beta1 review and its denial", got, err)
		}
	})

	t.Run("ConfigurationsAreNeverSentToWebhooks", func(t *testing.T) {
		srv := webhookserver.Start(t, func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return deny("no") })
		h := validatingHook("everything.example.com", srv.ClientConfig("/"), "")
		h.NamespaceSelector = nil
		h.Rules = []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"admissionregistration.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}}
		e.validating(t, "everything", h)
		// Were configurations sent, this one's own deletion and the next create would be refused.
		e.validating(t, "another", validatingHook("another.example.com", srv.ClientConfig("/"), "nowhere"))
		if srv.Calls() != 0 {
			t.Fatalf("the webhook got %d calls", srv.Calls())
		}
	})

	t.Run("Metrics", func(t *testing.T) {
		code, _, body := e.s.Do(t, ctx, http.MethodGet, "/metrics", "", "")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		for _, want := range []string{
			`apiserver_admission_webhook_admission_duration_seconds_count{name="deny.example.com",operation="CREATE",rejected="true",type="validating"} 2`,
			`apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="fail.example.com",operation="CREATE",rejection_code="503",type="validating"} 1`,
			`apiserver_admission_webhook_fail_open_count{name="ignore.example.com",type="validating"} 1`,
			// The three skipped creates of MatchConditionsSkipCalls (kube-apiserver's label
			// value is "validate" here).
			`apiserver_admission_match_condition_exclusions_total{kind="webhook",name="conditions.example.com",operation="CREATE",type="validate"} 3`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if t.Failed() {
			for _, line := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(line, "apiserver_admission_") && !strings.Contains(line, "_bucket") {
					t.Log(line)
				}
			}
		}
	})
}

// TestConfigurationDefaultsAndValidation checks what kube-apiserver defaults and refuses.
func TestConfigurationDefaultsAndValidation(t *testing.T) {
	e := newWebhookEnv(t)
	ctx := context.Background()
	url := "https://127.0.0.1:1/x"
	vapi := e.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	c, err := vapi.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "d.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: configMapRule, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Webhooks[0]
	if *h.FailurePolicy != admissionregistrationv1.Fail || *h.MatchPolicy != admissionregistrationv1.Equivalent || *h.TimeoutSeconds != 10 ||
		h.NamespaceSelector == nil || h.ObjectSelector == nil || *h.Rules[0].Scope != admissionregistrationv1.AllScopes || c.Generation != 1 {
		t.Fatalf("defaults not applied: %+v (generation %d)", h, c.Generation)
	}
	mapi := e.cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	m, err := mapi.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "d.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "hook"}},
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *m.Webhooks[0].ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy || *m.Webhooks[0].ClientConfig.Service.Port != 443 {
		t.Fatalf("mutating defaults not applied: %+v", m.Webhooks[0])
	}

	httpURL := "http://127.0.0.1:1/x"
	bad := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "a.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &httpURL}, TimeoutSeconds: ptr.To[int32](31),
				SideEffects: ptr.To(admissionregistrationv1.SideEffectClassSome)},
			{Name: "a.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, Service: &admissionregistrationv1.ServiceReference{Namespace: "d", Name: "s"}},
				AdmissionReviewVersions: []string{"v1"}, MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "broken", Expression: "object.metadata.name ==="}}},
		}}
	_, err = vapi.Create(ctx, bad, metav1.CreateOptions{})
	status, ok := err.(*apierrors.StatusError)
	if !ok || !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want 422", err)
	}
	causes := map[string]metav1.CauseType{}
	for _, c := range status.ErrStatus.Details.Causes {
		causes[c.Field] = c.Type
	}
	for field, typ := range map[string]metav1.CauseType{
		"webhooks[0].clientConfig.url":              metav1.CauseTypeFieldValueInvalid,
		"webhooks[0].timeoutSeconds":                metav1.CauseTypeFieldValueInvalid,
		"webhooks[0].sideEffects":                   metav1.CauseTypeFieldValueNotSupported,
		"webhooks[0].admissionReviewVersions":       metav1.CauseTypeFieldValueRequired,
		"webhooks[1].sideEffects":                   metav1.CauseTypeFieldValueRequired,
		"webhooks[1].clientConfig":                  metav1.CauseTypeFieldValueRequired,
		"webhooks[1].name":                          metav1.CauseTypeFieldValueDuplicate,
		"webhooks[1].matchConditions[0].expression": metav1.CauseTypeFieldValueInvalid,
	} {
		if causes[field] != typ {
			t.Errorf("cause for %s: got %q, want %q (all: %v)", field, causes[field], typ, causes)
		}
	}
	if _, err := vapi.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("invalid configuration: got %v, want NotFound", err)
	}
}
