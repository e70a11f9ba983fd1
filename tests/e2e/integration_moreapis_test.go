package e2e

import (
	"errors"
	"slices"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	nodev1ac "k8s.io/client-go/applyconfigurations/node/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// ingressBackend is a service backend on port 80.
func ingressBackend(service string) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: service, Port: networkingv1.ServiceBackendPort{Number: 80}}}
}

// moreAPICases are the resources served for the conformance suite beyond the
// scheduling inputs: PodTemplates and the networking.k8s.io and node.k8s.io kinds.
func moreAPICases() []resourceCase {
	return []resourceCase{
		crudCase("podtemplates", false, func(cs kubernetes.Interface, ns string) crudClient[*corev1.PodTemplate, *corev1.PodTemplateList] {
			return cs.CoreV1().PodTemplates(ns)
		}, func(n string) *corev1.PodTemplate {
			return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: n}, Template: podTemplate(n)}
		}),
		crudCase("ingresses", false, func(cs kubernetes.Interface, ns string) crudClient[*networkingv1.Ingress, *networkingv1.IngressList] {
			return cs.NetworkingV1().Ingresses(ns)
		}, func(n string) *networkingv1.Ingress {
			return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
				Host: "example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: ingressBackend("web")}}}}}}}}
		}),
		crudCase("ingressclasses", false, func(cs kubernetes.Interface, _ string) crudClient[*networkingv1.IngressClass, *networkingv1.IngressClassList] {
			return cs.NetworkingV1().IngressClasses()
		}, func(n string) *networkingv1.IngressClass {
			return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/ingress"}}
		}),
		crudCase("networkpolicies", false, func(cs kubernetes.Interface, ns string) crudClient[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList] {
			return cs.NetworkingV1().NetworkPolicies(ns)
		}, func(n string) *networkingv1.NetworkPolicy {
			return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": n}}}}
		}),
		crudCase("runtimeclasses", false, func(cs kubernetes.Interface, _ string) crudClient[*nodev1.RuntimeClass, *nodev1.RuntimeClassList] {
			return cs.NodeV1().RuntimeClasses()
		}, func(n string) *nodev1.RuntimeClass {
			return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: n}, Handler: "runc"}
		}),
	}
}

// TestMoreAPIs runs the CRUD, patch and watch cycle on each new resource in both wire
// encodings, then the refusals and server-side apply.
func TestMoreAPIs(t *testing.T) {
	srv := testserver.StartAPI(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			cs := srv.Clientset(t, m.json)
			ns := newNamespace(t, cs, "more-"+m.name)
			for _, rc := range moreAPICases() {
				t.Run(rc.name, func(t *testing.T) { rc.run(t, cs, ns, "more-"+m.name) })
			}
		})
	}
	cs := srv.Clientset(t, false)
	ns := newNamespace(t, cs, "more-invalid")
	t.Run("invalid", func(t *testing.T) { testMoreAPIsInvalid(t, cs, ns) })
	t.Run("apply", func(t *testing.T) { testMoreAPIsApply(t, cs, ns) })
	t.Run("ingress status", func(t *testing.T) { testIngressStatus(t, cs, ns) })
}

// testIngressStatus: ingresses/status writes only the status, the main resource never does.
func testIngressStatus(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	ings := cs.NetworkingV1().Ingresses(ns)
	ing, err := ings.Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "status"},
		Spec: networkingv1.IngressSpec{DefaultBackend: ptr.To(ingressBackend("web"))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ingress: %v", err)
	}
	lb := networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}}
	ing.Status.LoadBalancer = lb
	ing.Spec.DefaultBackend.Service.Name = "ignored"
	got, err := ings.UpdateStatus(ctx, ing, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if len(got.Status.LoadBalancer.Ingress) != 1 || got.Status.LoadBalancer.Ingress[0].IP != "192.0.2.10" || got.Spec.DefaultBackend.Service.Name != "web" {
		t.Fatalf("after status update: spec backend %q, status %+v", got.Spec.DefaultBackend.Service.Name, got.Status)
	}
	got.Status = networkingv1.IngressStatus{}
	got, err = ings.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if len(got.Status.LoadBalancer.Ingress) != 1 {
		t.Fatalf("an update of the ingress changed its status: %+v", got.Status)
	}
}

// wantInvalid requires err to be a 422 whose causes name exactly the fields want.
func wantInvalid(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	var se *apierrors.StatusError
	if !apierrors.IsInvalid(err) || !errors.As(err, &se) || se.ErrStatus.Details == nil {
		t.Errorf("%s: got %v, want 422 Invalid", what, err)
		return
	}
	var got []string
	for _, c := range se.ErrStatus.Details.Causes {
		got = append(got, c.Field)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: causes %v (%v), want fields %v", what, got, se.ErrStatus.Details.Causes, want)
	}
}

func testMoreAPIsInvalid(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	const immutableMsg = "field is immutable when `immutable` is set"

	cms := cs.CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Immutable: ptr.To(true),
		Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"b": []byte("x")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create immutable configmap: %v", err)
	}
	changed := cm.DeepCopy()
	changed.Data["k"] = "w"
	changed.BinaryData["b"] = []byte("y")
	_, err = cms.Update(ctx, changed, metav1.UpdateOptions{})
	wantInvalid(t, "configmap data change", err, "data", "binaryData")
	if err != nil && !apierrors.HasStatusCause(err, metav1.CauseType(field.ErrorTypeForbidden)) {
		t.Errorf("configmap data change: %v has no Forbidden cause", err)
	}
	if se := (*apierrors.StatusError)(nil); errors.As(err, &se) && se.ErrStatus.Details != nil {
		for _, c := range se.ErrStatus.Details.Causes {
			if c.Message != "Forbidden: "+immutableMsg {
				t.Errorf("cause message %q, want %q", c.Message, "Forbidden: "+immutableMsg)
			}
		}
	}
	_, err = cms.Patch(ctx, "frozen", types.MergePatchType, []byte(`{"immutable":null}`), metav1.PatchOptions{})
	wantInvalid(t, "configmap unmarked", err, "immutable")
	// Metadata stays writable.
	if _, err := cms.Patch(ctx, "frozen", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("label an immutable configmap: %v", err)
	}

	secrets := cs.CoreV1().Secrets(ns)
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Immutable: ptr.To(true),
		Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create immutable secret: %v", err)
	}
	_, err = secrets.Patch(ctx, "frozen", types.MergePatchType, []byte(`{"stringData":{"k":"w"}}`), metav1.PatchOptions{})
	wantInvalid(t, "secret stringData change", err, "data")
	_, err = secrets.Patch(ctx, "frozen", types.MergePatchType, []byte(`{"immutable":false}`), metav1.PatchOptions{})
	wantInvalid(t, "secret unmarked", err, "immutable")

	_, err = cs.CoreV1().PodTemplates(ns).Create(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}, metav1.CreateOptions{})
	wantInvalid(t, "podtemplate without containers", err, "template.spec.containers")

	both := ingressBackend("web")
	both.Resource = &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}
	_, err = cs.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
				{Path: "/a", Backend: ingressBackend("web")},
				{Path: "b", PathType: ptr.To(networkingv1.PathTypeExact), Backend: both},
			}}}}}}}, metav1.CreateOptions{})
	wantInvalid(t, "ingress", err, "spec.rules[0].http.paths[0].pathType", "spec.rules[0].http.paths[1].path", "spec.rules[0].http.paths[1].backend")

	classes := cs.NetworkingV1().IngressClasses()
	_, err = classes.Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "more-nocontroller"}}, metav1.CreateOptions{})
	wantInvalid(t, "ingressclass without controller", err, "spec.controller")
	if _, err := classes.Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "more-fixed"},
		Spec: networkingv1.IngressClassSpec{Controller: "example.com/a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ingressclass: %v", err)
	}
	_, err = classes.Patch(ctx, "more-fixed", types.MergePatchType, []byte(`{"spec":{"controller":"example.com/b"}}`), metav1.PatchOptions{})
	wantInvalid(t, "ingressclass controller change", err, "spec.controller")

	_, err = cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.Protocol("ICMP"))}},
		}}}}, metav1.CreateOptions{})
	wantInvalid(t, "networkpolicy", err, "spec.ingress[0].from[0]", "spec.ingress[0].ports[0].protocol")

	rcs := cs.NodeV1().RuntimeClasses()
	_, err = rcs.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "more-bad"}, Handler: "Not_A_Label"}, metav1.CreateOptions{})
	wantInvalid(t, "runtimeclass handler", err, "handler")
	if _, err := rcs.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "more-fixed"}, Handler: "runc"}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create runtimeclass: %v", err)
	}
	_, err = rcs.Patch(ctx, "more-fixed", types.MergePatchType, []byte(`{"handler":"crun"}`), metav1.PatchOptions{})
	wantInvalid(t, "runtimeclass handler change", err, "handler")
}

// testMoreAPIsApply server-side applies one object of each kind twice: the second apply
// changes a field the manager owns, which only works if the kind's schema is known.
func testMoreAPIsApply(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	opts := metav1.ApplyOptions{FieldManager: "moreapis-test", Force: true}
	for _, image := range []string{"example.com/a:1", "example.com/a:2"} {
		pt, err := cs.CoreV1().PodTemplates(ns).Apply(ctx, corev1ac.PodTemplate("applied", ns).WithTemplate(
			corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("c").WithImage(image)))), opts)
		if err != nil {
			t.Fatalf("apply podtemplate: %v", err)
		}
		if got := pt.Template.Spec.Containers; len(got) != 1 || got[0].Image != image {
			t.Fatalf("applied podtemplate containers = %+v, want one with image %s", got, image)
		}
	}
	for _, port := range []int32{80, 8080} {
		ing, err := cs.NetworkingV1().Ingresses(ns).Apply(ctx, networkingv1ac.Ingress("applied", ns).WithSpec(networkingv1ac.IngressSpec().
			WithDefaultBackend(networkingv1ac.IngressBackend().WithService(networkingv1ac.IngressServiceBackend().WithName("web").
				WithPort(networkingv1ac.ServiceBackendPort().WithNumber(port))))), opts)
		if err != nil {
			t.Fatalf("apply ingress: %v", err)
		}
		if got := ing.Spec.DefaultBackend.Service.Port.Number; got != port {
			t.Fatalf("applied ingress port = %d, want %d", got, port)
		}
	}
	for _, params := range []string{"one", "two"} {
		c, err := cs.NetworkingV1().IngressClasses().Apply(ctx, networkingv1ac.IngressClass("more-applied").WithSpec(networkingv1ac.IngressClassSpec().
			WithController("example.com/ingress").WithParameters(networkingv1ac.IngressClassParametersReference().
			WithKind("Config").WithName(params).WithScope("Cluster"))), opts)
		if err != nil {
			t.Fatalf("apply ingressclass: %v", err)
		}
		if c.Spec.Parameters == nil || c.Spec.Parameters.Name != params {
			t.Fatalf("applied ingressclass parameters = %+v, want name %s", c.Spec.Parameters, params)
		}
	}
	for _, app := range []string{"a", "b"} {
		np, err := cs.NetworkingV1().NetworkPolicies(ns).Apply(ctx, networkingv1ac.NetworkPolicy("applied", ns).WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": app}))), opts)
		if err != nil {
			t.Fatalf("apply networkpolicy: %v", err)
		}
		if got := np.Spec.PodSelector.MatchLabels; len(got) != 1 || got["app"] != app {
			t.Fatalf("applied networkpolicy selector = %v, want app=%s", got, app)
		}
	}
	for _, zone := range []string{"a", "b"} {
		rc, err := cs.NodeV1().RuntimeClasses().Apply(ctx, nodev1ac.RuntimeClass("more-applied").WithHandler("runc").
			WithScheduling(nodev1ac.Scheduling().WithNodeSelector(map[string]string{"zone": zone})), opts)
		if err != nil {
			t.Fatalf("apply runtimeclass: %v", err)
		}
		if got := rc.Scheduling.NodeSelector; len(got) != 1 || got["zone"] != zone {
			t.Fatalf("applied runtimeclass nodeSelector = %v, want zone=%s", got, zone)
		}
	}
}
