package resources

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// ingressNetworking returns the networking.k8s.io/v1 resources of traffic policy:
// Ingresses, IngressClasses and NetworkPolicies. They are stored and validated as
// Kubernetes does; nothing in wasmplane routes or enforces them.
func ingressNetworking() []Definition {
	gv := networkingv1.SchemeGroupVersion
	ingress := stored(gv, "ingresses", "Ingress", []string{"ing"}, true, true,
		func() runtime.Object { return &networkingv1.Ingress{} }, func() runtime.Object { return &networkingv1.IngressList{} },
		&strategy{
			prepareCreate: func(obj runtime.Object) { obj.(*networkingv1.Ingress).Status = networkingv1.IngressStatus{} },
			prepareUpdate: func(obj, old runtime.Object) {
				obj.(*networkingv1.Ingress).Status = old.(*networkingv1.Ingress).Status
			},
			validate: func(obj runtime.Object) field.ErrorList {
				return validateIngressSpec(&obj.(*networkingv1.Ingress).Spec)
			},
			validateOnUpdate: true,
		}, func(r *registry.Resource) { r.Printer = ingressPrinter() })
	class := stored(gv, "ingressclasses", "IngressClass", nil, false, false,
		func() runtime.Object { return &networkingv1.IngressClass{} }, func() runtime.Object { return &networkingv1.IngressClassList{} },
		&strategy{
			// Kubernetes' v1 default: parameters without a scope are cluster-scoped.
			defaults: func(obj runtime.Object) {
				if p := obj.(*networkingv1.IngressClass).Spec.Parameters; p != nil && p.Scope == nil {
					p.Scope = ptr.To(networkingv1.IngressClassParametersReferenceScopeCluster)
				}
			},
			validate: func(obj runtime.Object) field.ErrorList {
				return validateIngressClassSpec(&obj.(*networkingv1.IngressClass).Spec)
			},
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				c, o := obj.(*networkingv1.IngressClass), old.(*networkingv1.IngressClass)
				return apimachineryvalidation.ValidateImmutableField(c.Spec.Controller, o.Spec.Controller, field.NewPath("spec", "controller"))
			},
			validateOnUpdate: true,
		}, func(r *registry.Resource) {
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "Controller", Type: "string", Description: networkingv1.IngressClassSpec{}.SwaggerDoc()["controller"]},
					{Name: "Parameters", Type: "string", Description: networkingv1.IngressClassSpec{}.SwaggerDoc()["parameters"]},
					endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					c := obj.(*networkingv1.IngressClass)
					params := "<none>"
					if p := c.Spec.Parameters; p != nil {
						params = p.Kind + "/" + p.Name
						if p.APIGroup != nil && *p.APIGroup != "" {
							params = p.Kind + "." + *p.APIGroup + "/" + p.Name
						}
					}
					return []any{c.Name, c.Spec.Controller, params, endpoints.Age(c.CreationTimestamp, time.Now())}
				},
			}
		})
	policy := stored(gv, "networkpolicies", "NetworkPolicy", []string{"netpol"}, true, false,
		func() runtime.Object { return &networkingv1.NetworkPolicy{} }, func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		&strategy{
			defaults: func(obj runtime.Object) { defaultNetworkPolicy(obj.(*networkingv1.NetworkPolicy)) },
			validate: func(obj runtime.Object) field.ErrorList {
				return validateNetworkPolicySpec(&obj.(*networkingv1.NetworkPolicy).Spec)
			},
			validateOnUpdate: true,
		}, func(r *registry.Resource) {
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "Pod-Selector", Type: "string", Description: networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]},
					endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					p := obj.(*networkingv1.NetworkPolicy)
					return []any{p.Name, metav1.FormatLabelSelector(&p.Spec.PodSelector), endpoints.Age(p.CreationTimestamp, time.Now())}
				},
			}
		})
	return []Definition{ingress, class, policy}
}

// ingressPrinter renders `kubectl get ingress` as Kubernetes does.
func ingressPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{endpoints.NameColumn,
			{Name: "Class", Type: "string", Description: networkingv1.IngressSpec{}.SwaggerDoc()["ingressClassName"]},
			{Name: "Hosts", Type: "string", Description: networkingv1.IngressSpec{}.SwaggerDoc()["rules"]},
			{Name: "Address", Type: "string", Description: networkingv1.IngressStatus{}.SwaggerDoc()["loadBalancer"]},
			{Name: "Ports", Type: "string", Description: networkingv1.IngressSpec{}.SwaggerDoc()["tls"]},
			endpoints.AgeColumn},
		Row: func(obj runtime.Object) []any {
			in := obj.(*networkingv1.Ingress)
			class := "<none>"
			if in.Spec.IngressClassName != nil {
				class = *in.Spec.IngressClassName
			}
			var hosts []string
			for _, r := range in.Spec.Rules {
				if r.Host != "" {
					hosts = append(hosts, r.Host)
				}
			}
			hostStr := "*"
			if len(hosts) > 0 {
				hostStr = strings.Join(hosts, ",")
				if len(hosts) > 4 {
					hostStr = strings.Join(hosts[:4], ",") + fmt.Sprintf(" + %d more...", len(hosts)-4)
				}
			}
			var addrs []string
			for _, lb := range in.Status.LoadBalancer.Ingress {
				if lb.IP != "" {
					addrs = append(addrs, lb.IP)
				} else if lb.Hostname != "" {
					addrs = append(addrs, lb.Hostname)
				}
			}
			ports := "80"
			if len(in.Spec.TLS) > 0 {
				ports = "80, 443"
			}
			return []any{in.Name, class, hostStr, strings.Join(addrs, ","), ports, endpoints.Age(in.CreationTimestamp, time.Now())}
		},
	}
}

var supportedPathTypes = sets.New(networkingv1.PathTypeExact, networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific)

// validateIngressSpec holds the rules of Kubernetes' ValidateIngressSpec: a default
// backend or rules, each backend exactly one of service and resource, hosts DNS names
// (a leading wildcard allowed) and every path a pathType and a path valid for it.
func validateIngressSpec(spec *networkingv1.IngressSpec) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if len(spec.Rules) == 0 && spec.DefaultBackend == nil {
		errs = append(errs, field.Invalid(p.Child("rules"), spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		errs = append(errs, validateIngressBackend(spec.DefaultBackend, p.Child("defaultBackend"))...)
	}
	for i, r := range spec.Rules {
		rp := p.Child("rules").Index(i)
		if r.Host != "" {
			errs = append(errs, validateIngressHost(r.Host, rp.Child("host"))...)
		}
		if r.HTTP == nil {
			continue
		}
		hp := rp.Child("http", "paths")
		if len(r.HTTP.Paths) == 0 {
			errs = append(errs, field.Required(hp, ""))
		}
		for j, path := range r.HTTP.Paths {
			errs = append(errs, validateHTTPIngressPath(&path, hp.Index(j))...)
		}
	}
	for i, tls := range spec.TLS {
		for j, h := range tls.Hosts {
			errs = append(errs, validateIngressHost(h, p.Child("tls").Index(i).Child("hosts").Index(j))...)
		}
	}
	if spec.IngressClassName != nil {
		errs = append(errs, dnsSubdomain(p.Child("ingressClassName"), *spec.IngressClassName)...)
	}
	return errs
}

// validateIngressHost allows a DNS name, with a leading "*." wildcard, but no IP address.
func validateIngressHost(host string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := netip.ParseAddr(host); err == nil {
		errs = append(errs, field.Invalid(p, host, "must be a DNS name, not an IP address"))
	}
	check := validation.IsDNS1123Subdomain
	if strings.Contains(host, "*") {
		check = validation.IsWildcardDNS1123Subdomain
	}
	for _, msg := range check(host) {
		errs = append(errs, field.Invalid(p, host, msg))
	}
	return errs
}

// validateHTTPIngressPath checks a path against its pathType: Exact and Prefix paths are
// absolute and free of "//" and of "." and ".." segments; ImplementationSpecific ones
// only have to be absolute when set.
func validateHTTPIngressPath(path *networkingv1.HTTPIngressPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case path.PathType == nil:
		errs = append(errs, field.Required(p.Child("pathType"), "pathType must be specified"))
	case !supportedPathTypes.Has(*path.PathType):
		errs = append(errs, field.NotSupported(p.Child("pathType"), *path.PathType, sets.List(supportedPathTypes)))
	case *path.PathType == networkingv1.PathTypeImplementationSpecific:
		if path.Path != "" && !strings.HasPrefix(path.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("path"), path.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, validateStrictIngressPath(path.Path, p.Child("path"))...)
	}
	return append(errs, validateIngressBackend(&path.Backend, p.Child("backend"))...)
}

// validateStrictIngressPath is the path rule of the Exact and Prefix path types.
func validateStrictIngressPath(path string, p *field.Path) field.ErrorList {
	if !strings.HasPrefix(path, "/") {
		return field.ErrorList{field.Invalid(p, path, "must be an absolute path")}
	}
	var errs field.ErrorList
	for _, bad := range []string{"//", "/./", "/../", "%2f", "%2F"} {
		if strings.Contains(path, bad) {
			errs = append(errs, field.Invalid(p, path, fmt.Sprintf("must not contain '%s'", bad)))
		}
	}
	for _, bad := range []string{"/..", "/."} {
		if strings.HasSuffix(path, bad) {
			errs = append(errs, field.Invalid(p, path, fmt.Sprintf("cannot end with '%s'", bad)))
		}
	}
	return errs
}

// validateIngressBackend requires exactly one of a service and a resource backend.
func validateIngressBackend(b *networkingv1.IngressBackend, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case b.Service != nil && b.Resource != nil:
		errs = append(errs, field.Invalid(p, "", "cannot set both resource and service backends"))
	case b.Resource != nil:
		rp := p.Child("resource")
		if b.Resource.Kind == "" {
			errs = append(errs, field.Required(rp.Child("kind"), "kind is required"))
		}
		if b.Resource.Name == "" {
			errs = append(errs, field.Required(rp.Child("name"), "name is required"))
		}
	case b.Service != nil:
		sp := p.Child("service")
		if b.Service.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		} else {
			for _, msg := range validation.IsDNS1035Label(b.Service.Name) {
				errs = append(errs, field.Invalid(sp.Child("name"), b.Service.Name, msg))
			}
		}
		pp := sp.Child("port")
		port := b.Service.Port
		switch {
		case port.Name != "" && port.Number != 0:
			errs = append(errs, field.Invalid(pp, port, "cannot set both port name & port number"))
		case port.Name != "":
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
		case port.Number != 0:
			for _, msg := range validation.IsValidPortNum(int(port.Number)) {
				errs = append(errs, field.Invalid(pp.Child("number"), port.Number, msg))
			}
		default:
			errs = append(errs, field.Required(pp, "port name or number is required"))
		}
	default:
		errs = append(errs, field.Invalid(p, "", "resource or service backend is required"))
	}
	return errs
}

// validateIngressClassSpec: a controller (a domain-prefixed path of at most 250
// characters) and, when set, parameters naming a kind and an object in a valid scope.
func validateIngressClassSpec(spec *networkingv1.IngressClassSpec) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if spec.Controller == "" {
		errs = append(errs, field.Required(p.Child("controller"), ""))
	} else {
		if len(spec.Controller) > 250 {
			errs = append(errs, field.TooLong(p.Child("controller"), "", 250))
		}
		errs = append(errs, validation.IsDomainPrefixedPath(p.Child("controller"), spec.Controller)...)
	}
	params := spec.Parameters
	if params == nil {
		return errs
	}
	pp := p.Child("parameters")
	if params.Kind == "" {
		errs = append(errs, field.Required(pp.Child("kind"), ""))
	}
	if params.Name == "" {
		errs = append(errs, field.Required(pp.Child("name"), ""))
	}
	scope := ""
	if params.Scope != nil {
		scope = *params.Scope
	}
	switch scope {
	case networkingv1.IngressClassParametersReferenceScopeNamespace:
		if params.Namespace == nil || *params.Namespace == "" {
			errs = append(errs, field.Required(pp.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
		}
	case networkingv1.IngressClassParametersReferenceScopeCluster:
		if params.Namespace != nil {
			errs = append(errs, field.Forbidden(pp.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
		}
	case "":
		errs = append(errs, field.Required(pp.Child("scope"), ""))
	default:
		errs = append(errs, field.NotSupported(pp.Child("scope"), scope, []string{
			networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace}))
	}
	return errs
}

// defaultNetworkPolicy applies Kubernetes' v1 defaults: TCP ports, and policyTypes of
// Ingress plus Egress when egress rules are given.
func defaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	defaultTCP := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				tcp := corev1.ProtocolTCP
				ports[i].Protocol = &tcp
			}
		}
	}
	for i := range np.Spec.Ingress {
		defaultTCP(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		defaultTCP(np.Spec.Egress[i].Ports)
	}
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}

// validateNetworkPolicySpec holds the main rules of Kubernetes' ValidateNetworkPolicySpec:
// valid selectors, ports and port ranges, one kind of peer each, CIDRs and policy types.
func validateNetworkPolicySpec(spec *networkingv1.NetworkPolicySpec) field.ErrorList {
	p := field.NewPath("spec")
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs := metav1validation.ValidateLabelSelector(&spec.PodSelector, opts, p.Child("podSelector"))
	for i, rule := range spec.Ingress {
		rp := p.Child("ingress").Index(i)
		for j := range rule.Ports {
			errs = append(errs, validateNetworkPolicyPort(&rule.Ports[j], rp.Child("ports").Index(j))...)
		}
		for j := range rule.From {
			errs = append(errs, validateNetworkPolicyPeer(&rule.From[j], rp.Child("from").Index(j))...)
		}
	}
	for i, rule := range spec.Egress {
		rp := p.Child("egress").Index(i)
		for j := range rule.Ports {
			errs = append(errs, validateNetworkPolicyPort(&rule.Ports[j], rp.Child("ports").Index(j))...)
		}
		for j := range rule.To {
			errs = append(errs, validateNetworkPolicyPeer(&rule.To[j], rp.Child("to").Index(j))...)
		}
	}
	allowed := []string{string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)}
	if len(spec.PolicyTypes) > len(allowed) {
		errs = append(errs, field.Invalid(p.Child("policyTypes"), spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			errs = append(errs, field.NotSupported(p.Child("policyTypes").Index(i), t, allowed))
		}
	}
	return errs
}

var networkPolicyProtocols = []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}

// validateNetworkPolicyPort checks the protocol, the port (a number or a name) and a
// port range's end.
func validateNetworkPolicyPort(port *networkingv1.NetworkPolicyPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Protocol != nil && !sets.New(networkPolicyProtocols...).Has(string(*port.Protocol)) {
		errs = append(errs, field.NotSupported(p.Child("protocol"), *port.Protocol, networkPolicyProtocols))
	}
	if port.Port == nil {
		if port.EndPort != nil {
			errs = append(errs, field.Forbidden(p.Child("endPort"), "may not be specified when `port` is not specified"))
		}
		return errs
	}
	if port.Port.Type == intstr.Int {
		for _, msg := range validation.IsValidPortNum(port.Port.IntValue()) {
			errs = append(errs, field.Invalid(p.Child("port"), port.Port.IntVal, msg))
		}
		if port.EndPort != nil {
			if *port.EndPort < port.Port.IntVal {
				errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "must be greater than or equal to `port`"))
			}
			for _, msg := range validation.IsValidPortNum(int(*port.EndPort)) {
				errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, msg))
			}
		}
		return errs
	}
	if port.EndPort != nil {
		errs = append(errs, field.Forbidden(p.Child("endPort"), "may not be specified when `port` is non-numeric"))
	}
	for _, msg := range validation.IsValidPortName(port.Port.StrVal) {
		errs = append(errs, field.Invalid(p.Child("port"), port.Port.StrVal, msg))
	}
	return errs
}

// validateNetworkPolicyPeer requires a peer to be selectors or an ipBlock, not both,
// and an ipBlock's exceptions to be valid CIDRs inside its cidr.
func validateNetworkPolicyPeer(peer *networkingv1.NetworkPolicyPeer, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	opts := metav1validation.LabelSelectorValidationOptions{}
	selectors := 0
	if peer.PodSelector != nil {
		selectors++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, opts, p.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		selectors++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	}
	switch {
	case peer.IPBlock != nil && selectors > 0:
		errs = append(errs, field.Forbidden(p, "may not specify both ipBlock and another peer"))
	case peer.IPBlock == nil && selectors == 0:
		errs = append(errs, field.Required(p, "must specify a peer"))
	case peer.IPBlock != nil:
		errs = append(errs, validateIPBlock(peer.IPBlock, p.Child("ipBlock"))...)
	}
	return errs
}

func validateIPBlock(b *networkingv1.IPBlock, p *field.Path) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(p.Child("cidr"), "")}
	}
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return field.ErrorList{field.Invalid(p.Child("cidr"), b.CIDR, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")}
	}
	var errs field.ErrorList
	for i, e := range b.Except {
		ep := p.Child("except").Index(i)
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			errs = append(errs, field.Invalid(ep, e, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
			continue
		}
		if ex.Bits() <= cidr.Bits() || !cidr.Contains(ex.Addr()) {
			errs = append(errs, field.Invalid(ep, e, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}
