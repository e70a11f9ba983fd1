package resources

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// definitionOf finds a resource among the groups this file tests.
func definitionOf(t *testing.T, name string) Definition {
	t.Helper()
	for _, d := range append(append(Core(), Networking()...), NodeAPI()...) {
		if d.Resource.Name == name {
			return d
		}
	}
	t.Fatalf("no resource %q", name)
	return Definition{}
}

// strategyCase is one create (old == nil) or update through a resource's strategy.
type strategyCase struct {
	name, resource string
	old, obj       runtime.Object
	want           string // errFields of the result
}

func runStrategyCases(t *testing.T, tests []strategyCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := definitionOf(t, tt.resource).Resource.Strategy
			ctx := context.Background()
			st.Default(tt.obj)
			var got string
			if tt.old == nil {
				st.PrepareForCreate(ctx, tt.obj)
				got = errFields(st.Validate(ctx, tt.obj))
			} else {
				st.Default(tt.old)
				st.PrepareForUpdate(ctx, tt.obj, tt.old)
				got = errFields(st.ValidateUpdate(ctx, tt.obj, tt.old))
			}
			if got != tt.want {
				t.Errorf("errors = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestImmutableConfigMapsAndSecrets(t *testing.T) {
	cm := func(immutable *bool, data map[string]string, bin map[string][]byte) *corev1.ConfigMap {
		return &corev1.ConfigMap{Immutable: immutable, Data: data, BinaryData: bin}
	}
	secret := func(immutable *bool, data map[string][]byte, str map[string]string) *corev1.Secret {
		return &corev1.Secret{Immutable: immutable, Data: data, StringData: str}
	}
	a, b := map[string]string{"k": "a"}, map[string]string{"k": "b"}
	ba, bb := map[string][]byte{"k": []byte("a")}, map[string][]byte{"k": []byte("b")}
	yes, no := ptr.To(true), ptr.To(false)
	runStrategyCases(t, []strategyCase{
		{"mutable configmap changes", "configmaps", cm(nil, a, nil), cm(nil, b, nil), ""},
		{"configmap made immutable", "configmaps", cm(nil, a, nil), cm(yes, b, nil), ""},
		{"immutable configmap unchanged", "configmaps", cm(yes, a, map[string][]byte{"b": nil}), cm(yes, a, map[string][]byte{"b": nil}), ""},
		{"immutable configmap data", "configmaps", cm(yes, a, nil), cm(yes, b, nil), "data:FieldValueForbidden"},
		{"immutable configmap binaryData", "configmaps", cm(yes, nil, ba), cm(yes, nil, bb), "binaryData:FieldValueForbidden"},
		{"immutable configmap unset", "configmaps", cm(yes, a, nil), cm(nil, a, nil), "immutable:FieldValueForbidden"},
		{"immutable configmap set false", "configmaps", cm(yes, a, nil), cm(no, b, nil), "immutable:FieldValueForbidden,data:FieldValueForbidden"},
		{"mutable secret changes", "secrets", secret(nil, ba, nil), secret(nil, bb, nil), ""},
		{"immutable secret unchanged", "secrets", secret(yes, ba, nil), secret(yes, ba, nil), ""},
		{"immutable secret data", "secrets", secret(yes, ba, nil), secret(yes, bb, nil), "data:FieldValueForbidden"},
		{"immutable secret stringData", "secrets", secret(yes, ba, nil), secret(yes, map[string][]byte{"k": []byte("a")}, map[string]string{"k": "b"}), "data:FieldValueForbidden"},
		{"immutable secret unset", "secrets", secret(yes, ba, nil), secret(nil, ba, nil), "immutable:FieldValueForbidden"},
	})
}

func TestPodTemplateValidation(t *testing.T) {
	tmpl := func(labels map[string]string, cs ...corev1.Container) *corev1.PodTemplate {
		return &corev1.PodTemplate{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: cs}}}
	}
	c := corev1.Container{Name: "c", Image: "example.com/app:1"}
	runStrategyCases(t, []strategyCase{
		{"valid", "podtemplates", nil, tmpl(map[string]string{"app": "x"}, c), ""},
		{"no containers", "podtemplates", nil, tmpl(nil), "template.spec.containers:FieldValueRequired"},
		{"bad label", "podtemplates", nil, tmpl(map[string]string{"a b": "x"}, c), "template.metadata.labels[a b]:FieldValueInvalid"},
		{"update drops containers", "podtemplates", tmpl(nil, c), tmpl(nil), "template.spec.containers:FieldValueRequired"},
	})
	p := tmpl(nil, c)
	definitionOf(t, "podtemplates").Resource.Strategy.Default(p)
	if p.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways || p.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("pod spec defaults not applied: %+v", p.Template.Spec)
	}
}

func TestIngressValidation(t *testing.T) {
	prefix, exact, impl := ptr.To(networkingv1.PathTypePrefix), ptr.To(networkingv1.PathTypeExact), ptr.To(networkingv1.PathTypeImplementationSpecific)
	svc := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}
	ing := func(host string, paths ...networkingv1.HTTPIngressPath) *networkingv1.Ingress {
		return &networkingv1.Ingress{Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}}}
	}
	path := func(p string, t *networkingv1.PathType, b networkingv1.IngressBackend) networkingv1.HTTPIngressPath {
		return networkingv1.HTTPIngressPath{Path: p, PathType: t, Backend: b}
	}
	both := networkingv1.IngressBackend{Service: svc.Service, Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}}
	res := networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}}
	noPort := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web"}}
	bothPorts := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web",
		Port: networkingv1.ServiceBackendPort{Name: "http", Number: 80}}}
	runStrategyCases(t, []strategyCase{
		{"valid", "ingresses", nil, ing("example.com", path("/", prefix, svc)), ""},
		{"wildcard host, resource backend", "ingresses", nil, ing("*.example.com", path("/a", exact, res)), ""},
		{"default backend only", "ingresses", nil, &networkingv1.Ingress{Spec: networkingv1.IngressSpec{DefaultBackend: &svc}}, ""},
		{"nothing", "ingresses", nil, &networkingv1.Ingress{}, "spec.rules:FieldValueInvalid"},
		{"both backends", "ingresses", nil, ing("", path("/", prefix, both)), "spec.rules[0].http.paths[0].backend:FieldValueInvalid"},
		{"no backend", "ingresses", nil, ing("", path("/", prefix, networkingv1.IngressBackend{})), "spec.rules[0].http.paths[0].backend:FieldValueInvalid"},
		{"no port", "ingresses", nil, ing("", path("/", prefix, noPort)), "spec.rules[0].http.paths[0].backend.service.port:FieldValueRequired"},
		{"both ports", "ingresses", nil, ing("", path("/", prefix, bothPorts)), "spec.rules[0].http.paths[0].backend.service.port:FieldValueInvalid"},
		{"no pathType", "ingresses", nil, ing("", path("/", nil, svc)), "spec.rules[0].http.paths[0].pathType:FieldValueRequired"},
		{"bad pathType", "ingresses", nil, ing("", path("/", ptr.To(networkingv1.PathType("Regex")), svc)), "spec.rules[0].http.paths[0].pathType:FieldValueNotSupported"},
		{"relative prefix", "ingresses", nil, ing("", path("a", prefix, svc)), "spec.rules[0].http.paths[0].path:FieldValueInvalid"},
		{"double slash exact", "ingresses", nil, ing("", path("/a//b", exact, svc)), "spec.rules[0].http.paths[0].path:FieldValueInvalid"},
		{"implementation specific empty", "ingresses", nil, ing("", path("", impl, svc)), ""},
		{"implementation specific relative", "ingresses", nil, ing("", path("a", impl, svc)), "spec.rules[0].http.paths[0].path:FieldValueInvalid"},
		{"ip host", "ingresses", nil, ing("10.0.0.1", path("/", prefix, svc)), "spec.rules[0].host:FieldValueInvalid"},
		{"no paths", "ingresses", nil, ing("a.example.com"), "spec.rules[0].http.paths:FieldValueRequired"},
	})
}

func TestIngressClassValidation(t *testing.T) {
	class := func(controller string, params *networkingv1.IngressClassParametersReference) *networkingv1.IngressClass {
		return &networkingv1.IngressClass{Spec: networkingv1.IngressClassSpec{Controller: controller, Parameters: params}}
	}
	runStrategyCases(t, []strategyCase{
		{"valid", "ingressclasses", nil, class("example.com/ingress", nil), ""},
		{"no controller", "ingressclasses", nil, class("", nil), "spec.controller:FieldValueRequired"},
		{"controller not domain-prefixed", "ingressclasses", nil, class("ingress", nil), "spec.controller:FieldValueInvalid"},
		{"namespaced parameters", "ingressclasses", nil, class("example.com/ingress", &networkingv1.IngressClassParametersReference{
			Kind: "Config", Name: "c", Scope: ptr.To("Namespace"), Namespace: ptr.To("default")}), ""},
		{"namespace scope without namespace", "ingressclasses", nil, class("example.com/ingress", &networkingv1.IngressClassParametersReference{
			Kind: "Config", Name: "c", Scope: ptr.To("Namespace")}), "spec.parameters.namespace:FieldValueRequired"},
		{"parameters scope defaults to Cluster", "ingressclasses", nil, class("example.com/ingress", &networkingv1.IngressClassParametersReference{
			Kind: "Config", Name: "c"}), ""},
		{"cluster scope with namespace", "ingressclasses", nil, class("example.com/ingress", &networkingv1.IngressClassParametersReference{
			Kind: "Config", Name: "c", Namespace: ptr.To("default")}), "spec.parameters.namespace:FieldValueForbidden"},
		{"bad scope", "ingressclasses", nil, class("example.com/ingress", &networkingv1.IngressClassParametersReference{
			Kind: "Config", Name: "c", Scope: ptr.To("Galaxy")}), "spec.parameters.scope:FieldValueNotSupported"},
		{"controller changed", "ingressclasses", class("example.com/a", nil), class("example.com/b", nil), "spec.controller:FieldValueInvalid"},
		{"parameters changed", "ingressclasses", class("example.com/a", nil), class("example.com/a", &networkingv1.IngressClassParametersReference{
			Kind: "Config", Name: "c", Scope: ptr.To("Cluster")}), ""},
	})
}

func TestNetworkPolicyValidation(t *testing.T) {
	np := func(rule networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{rule}}}
	}
	port := func(p intstr.IntOrString, end *int32) networkingv1.NetworkPolicyIngressRule {
		return networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Port: &p, EndPort: end}}}
	}
	peer := func(p networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyIngressRule {
		return networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{p}}
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	runStrategyCases(t, []strategyCase{
		{"allow all", "networkpolicies", nil, np(networkingv1.NetworkPolicyIngressRule{}), ""},
		{"port range", "networkpolicies", nil, np(port(intstr.FromInt32(80), ptr.To[int32](90))), ""},
		{"named port", "networkpolicies", nil, np(port(intstr.FromString("http"), nil)), ""},
		{"port out of range", "networkpolicies", nil, np(port(intstr.FromInt32(70000), nil)), "spec.ingress[0].ports[0].port:FieldValueInvalid"},
		{"endPort below port", "networkpolicies", nil, np(port(intstr.FromInt32(80), ptr.To[int32](70))), "spec.ingress[0].ports[0].endPort:FieldValueInvalid"},
		{"endPort with named port", "networkpolicies", nil, np(port(intstr.FromString("http"), ptr.To[int32](90))), "spec.ingress[0].ports[0].endPort:FieldValueForbidden"},
		{"bad protocol", "networkpolicies", nil, np(networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.Protocol("ICMP"))}}}),
			"spec.ingress[0].ports[0].protocol:FieldValueNotSupported"},
		{"selector peer", "networkpolicies", nil, np(peer(networkingv1.NetworkPolicyPeer{PodSelector: sel, NamespaceSelector: sel})), ""},
		{"empty peer", "networkpolicies", nil, np(peer(networkingv1.NetworkPolicyPeer{})), "spec.ingress[0].from[0]:FieldValueRequired"},
		{"ipBlock and selector", "networkpolicies", nil, np(peer(networkingv1.NetworkPolicyPeer{PodSelector: sel, IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}})),
			"spec.ingress[0].from[0]:FieldValueForbidden"},
		{"ipBlock except outside", "networkpolicies", nil, np(peer(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"11.0.0.0/16"}}})),
			"spec.ingress[0].from[0].ipBlock.except[0]:FieldValueInvalid"},
		{"bad cidr", "networkpolicies", nil, np(peer(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0"}})),
			"spec.ingress[0].from[0].ipBlock.cidr:FieldValueInvalid"},
		{"bad policy type", "networkpolicies", nil, &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Sideways"}}},
			"spec.policyTypes[0]:FieldValueNotSupported"},
	})
	p := &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{}}}}}}
	definitionOf(t, "networkpolicies").Resource.Strategy.Default(p)
	if got := p.Spec.PolicyTypes; len(got) != 2 || ptr.Deref(p.Spec.Egress[0].Ports[0].Protocol, "") != corev1.ProtocolTCP {
		t.Errorf("defaults: policyTypes %v, protocol %v", got, p.Spec.Egress[0].Ports[0].Protocol)
	}
}

func TestRuntimeClassValidation(t *testing.T) {
	rc := func(handler string) *nodev1.RuntimeClass { return &nodev1.RuntimeClass{Handler: handler} }
	withOverhead := rc("runc")
	withOverhead.Overhead = &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}}
	withScheduling := rc("runc")
	withScheduling.Scheduling = &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "wasm"},
		Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}}
	runStrategyCases(t, []strategyCase{
		{"valid", "runtimeclasses", nil, rc("runc"), ""},
		{"no handler", "runtimeclasses", nil, rc(""), "handler:FieldValueRequired"},
		{"handler not a DNS label", "runtimeclasses", nil, rc("Run.C"), "handler:FieldValueInvalid"},
		{"negative overhead", "runtimeclasses", nil, withOverhead, "overhead.podFixed[cpu]:FieldValueInvalid"},
		{"toleration value with Exists", "runtimeclasses", nil, withScheduling, "scheduling.tolerations[0].operator:FieldValueInvalid"},
		{"handler changed", "runtimeclasses", rc("runc"), rc("crun"), "handler:FieldValueInvalid"},
	})
}

func TestMoreAPIsPrinters(t *testing.T) {
	tests := []struct {
		resource string
		obj      runtime.Object
		want     string
	}{
		{"podtemplates", &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "i:1"}, {Name: "b", Image: "j:2"}}}}},
			"t|a,b|i:1,j:2|app=x"},
		{"ingresses", &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "i"}, Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To("nginx"), Rules: []networkingv1.IngressRule{{Host: "a.example.com"}}}}, "i|nginx|a.example.com||80|"},
		{"ingressclasses", &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: networkingv1.IngressClassSpec{
			Controller: "example.com/ingress"}}, "c|example.com/ingress|<none>|"},
		{"networkpolicies", &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, "n|<none>|"},
		{"runtimeclasses", &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Handler: "runc"}, "r|runc|"},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			p := definitionOf(t, tt.resource).Resource.Printer
			row := p.Row(tt.obj)
			if len(row) != len(p.Columns) {
				t.Fatalf("%d cells for %d columns", len(row), len(p.Columns))
			}
			var cells []string
			for i, c := range row {
				if p.Columns[i].Name == "Age" {
					c = ""
				}
				cells = append(cells, c.(string))
			}
			if got := strings.Join(cells, "|"); got != tt.want {
				t.Errorf("row = %q, want %q", got, tt.want)
			}
		})
	}
}
