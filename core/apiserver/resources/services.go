package resources

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/servicealloc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// servicePrinter renders `kubectl get svc` as Kubernetes does.
func servicePrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Type", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["type"]},
			{Name: "Cluster-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]},
			{Name: "External-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]},
			{Name: "Port(s)", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["ports"]},
			endpoints.AgeColumn,
			{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ServiceSpec{}.SwaggerDoc()["selector"]},
		},
		Row: func(obj runtime.Object) []any {
			s := obj.(*corev1.Service)
			clusterIP := "<none>"
			if len(s.Spec.ClusterIPs) > 0 {
				clusterIP = s.Spec.ClusterIPs[0]
			}
			ports := make([]string, len(s.Spec.Ports))
			for i, p := range s.Spec.Ports {
				ports[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
				if p.NodePort > 0 {
					ports[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
				}
			}
			portStr := strings.Join(ports, ",")
			if portStr == "" {
				portStr = "<none>"
			}
			return []any{s.Name, string(s.Spec.Type), clusterIP, serviceExternalIP(s), portStr,
				endpoints.Age(s.CreationTimestamp, time.Now()), labels.FormatLabels(s.Spec.Selector)}
		},
	}
}

// serviceExternalIP is the External-IP column of Kubernetes' service printer.
func serviceExternalIP(s *corev1.Service) string {
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(s.Spec.ExternalIPs) > 0 {
			return strings.Join(s.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		seen := map[string]bool{}
		var lb []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			v := in.IP
			if v == "" {
				v = in.Hostname
			}
			if v != "" && !seen[v] {
				seen[v] = true
				lb = append(lb, v)
			}
		}
		sort.Strings(lb)
		all := append(lb, s.Spec.ExternalIPs...)
		if len(all) == 0 {
			return "<pending>"
		}
		return strings.Join(all, ",")
	case corev1.ServiceTypeExternalName:
		return s.Spec.ExternalName
	}
	return "<unknown>"
}

// validateServiceIPs checks the cluster IP fields and node ports against the type, as
// Kubernetes' ValidateService does (the allocator checks the ranges).
func validateServiceIPs(s *corev1.Service) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if len(s.Spec.ClusterIPs) > 0 && s.Spec.ClusterIP != s.Spec.ClusterIPs[0] {
		errs = append(errs, field.Invalid(p.Child("clusterIPs").Index(0), s.Spec.ClusterIPs, "must match `clusterIP`"))
	}
	for i, ip := range s.Spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			if i > 0 || len(s.Spec.ClusterIPs) > 1 {
				errs = append(errs, field.Invalid(p.Child("clusterIPs").Index(i), ip, "'None' must be the first and only value"))
			}
			continue
		}
		if _, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, field.Invalid(p.Child("clusterIPs").Index(i), ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
		}
	}
	switch s.Spec.Type {
	case corev1.ServiceTypeExternalName:
		if len(s.Spec.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(p.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			errs = append(errs, field.Invalid(p.Child("clusterIPs").Index(0), s.Spec.ClusterIP, fmt.Sprintf("may not be set to 'None' for %s services", s.Spec.Type)))
		}
	case corev1.ServiceTypeClusterIP:
		for i, port := range s.Spec.Ports {
			if port.NodePort != 0 {
				errs = append(errs, field.Forbidden(p.Child("ports").Index(i).Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
		}
	}
	for i, port := range s.Spec.Ports {
		if port.NodePort < 0 || port.NodePort > 65535 {
			errs = append(errs, field.Invalid(p.Child("ports").Index(i).Child("nodePort"), port.NodePort, "must be between 1 and 65535, inclusive"))
		}
	}
	return errs
}

// Endpoints returns core/v1 Endpoints (written by the endpoints controller and the API
// servers' reconciler of the `kubernetes` Service).
func Endpoints() []Definition {
	d := simple(corev1.SchemeGroupVersion, "endpoints", "endpoints", "Endpoints", []string{"ep"},
		func() runtime.Object { return &corev1.Endpoints{} }, func() runtime.Object { return &corev1.EndpointsList{} },
		&strategy{validate: func(obj runtime.Object) field.ErrorList { return validateEndpoints(obj.(*corev1.Endpoints)) }, validateOnUpdate: true},
		&registry.Printer{
			Columns: []registry.TableColumn{endpoints.NameColumn,
				{Name: "Endpoints", Type: "string", Description: corev1.Endpoints{}.SwaggerDoc()["subsets"]}, endpoints.AgeColumn},
			Row: func(obj runtime.Object) []any {
				e := obj.(*corev1.Endpoints)
				return []any{e.Name, formatEndpoints(e), endpoints.Age(e.CreationTimestamp, time.Now())}
			},
		})
	d.Resource.AllowCreateOnUpdate = true
	return []Definition{d}
}

// formatEndpoints is Kubernetes' ENDPOINTS column: at most three ip:port, then "+ N more...".
func formatEndpoints(e *corev1.Endpoints) string {
	if len(e.Subsets) == 0 {
		return "<none>"
	}
	var list []string
	count := 0
	for _, ss := range e.Subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				count++
				if len(list) < 3 {
					list = append(list, a.IP)
				}
			}
			continue
		}
		for _, port := range ss.Ports {
			for _, a := range ss.Addresses {
				count++
				if len(list) < 3 {
					list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(port.Port))))
				}
			}
		}
	}
	ret := strings.Join(list, ",")
	if count > len(list) {
		ret += fmt.Sprintf(" + %d more...", count-len(list))
	}
	if ret == "" {
		return "<none>"
	}
	return ret
}

func validateEndpoints(e *corev1.Endpoints) field.ErrorList {
	var errs field.ErrorList
	for i, ss := range e.Subsets {
		p := field.NewPath("subsets").Index(i)
		for j, a := range append(append([]corev1.EndpointAddress{}, ss.Addresses...), ss.NotReadyAddresses...) {
			if _, err := netip.ParseAddr(a.IP); err != nil {
				errs = append(errs, field.Invalid(p.Child("addresses").Index(j).Child("ip"), a.IP, "must be a valid IP address"))
			}
		}
		for j, port := range ss.Ports {
			if port.Port < 1 || port.Port > 65535 {
				errs = append(errs, field.Invalid(p.Child("ports").Index(j).Child("port"), port.Port, "must be between 1 and 65535, inclusive"))
			}
		}
	}
	return errs
}

// Discovery returns discovery.k8s.io/v1 EndpointSlices.
func Discovery() []Definition {
	d := simple(discoveryv1.SchemeGroupVersion, "endpointslices", "endpointslice", "EndpointSlice", nil,
		func() runtime.Object { return &discoveryv1.EndpointSlice{} }, func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		&strategy{validate: func(obj runtime.Object) field.ErrorList {
			return validateEndpointSlice(obj.(*discoveryv1.EndpointSlice))
		},
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				s, o := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice)
				return apimachineryvalidation.ValidateImmutableField(s.AddressType, o.AddressType, field.NewPath("addressType"))
			}, validateOnUpdate: true},
		&registry.Printer{
			Columns: []registry.TableColumn{endpoints.NameColumn,
				{Name: "AddressType", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"]},
				{Name: "Ports", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"]},
				{Name: "Endpoints", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["endpoints"]},
				endpoints.AgeColumn},
			Row: func(obj runtime.Object) []any {
				s := obj.(*discoveryv1.EndpointSlice)
				return []any{s.Name, string(s.AddressType), slicePorts(s), sliceEndpoints(s), endpoints.Age(s.CreationTimestamp, time.Now())}
			},
		})
	return []Definition{d}
}

func slicePorts(s *discoveryv1.EndpointSlice) string {
	if len(s.Ports) == 0 {
		return "<unset>"
	}
	var out []string
	for i, p := range s.Ports {
		if i == 3 {
			return strings.Join(out, ",") + fmt.Sprintf(" + %d more...", len(s.Ports)-3)
		}
		if p.Port != nil {
			out = append(out, strconv.Itoa(int(*p.Port)))
		}
	}
	return strings.Join(out, ",")
}

func sliceEndpoints(s *discoveryv1.EndpointSlice) string {
	var out []string
	count := 0
	for _, e := range s.Endpoints {
		for _, a := range e.Addresses {
			count++
			if len(out) < 3 {
				out = append(out, a)
			}
		}
	}
	if count == 0 {
		return "<unset>"
	}
	ret := strings.Join(out, ",")
	if count > len(out) {
		ret += fmt.Sprintf(" + %d more...", count-len(out))
	}
	return ret
}

func validateEndpointSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType,
			[]string{string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6), string(discoveryv1.AddressTypeFQDN)}))
	}
	if len(s.Endpoints) > 1000 {
		errs = append(errs, field.TooMany(field.NewPath("endpoints"), len(s.Endpoints), 1000))
	}
	for i, e := range s.Endpoints {
		p := field.NewPath("endpoints").Index(i).Child("addresses")
		if len(e.Addresses) < 1 || len(e.Addresses) > 100 {
			errs = append(errs, field.Invalid(p, len(e.Addresses), "must contain at least 1 address but no more than 100"))
		}
		for j, a := range e.Addresses {
			ip, err := netip.ParseAddr(a)
			switch {
			case s.AddressType == discoveryv1.AddressTypeFQDN:
				errs = append(errs, dnsSubdomain(p.Index(j), a)...)
			case err != nil:
				errs = append(errs, field.Invalid(p.Index(j), a, "must be a valid IP address"))
			case (s.AddressType == discoveryv1.AddressTypeIPv4) != ip.Is4():
				errs = append(errs, field.Invalid(p.Index(j), a, "must be an "+string(s.AddressType)+" address"))
			}
		}
	}
	if len(s.Ports) > 20000 {
		errs = append(errs, field.TooMany(field.NewPath("ports"), len(s.Ports), 20000))
	}
	return errs
}

// Networking returns the networking.k8s.io/v1 resources: those of Service IP allocation,
// IPAddresses (one per allocated cluster IP) and ServiceCIDRs (the ranges), and the
// Ingress and NetworkPolicy kinds of ingressNetworking.
func Networking() []Definition {
	gv := networkingv1.SchemeGroupVersion
	ip := stored(gv, "ipaddresses", "IPAddress", []string{"ip"}, false, false,
		func() runtime.Object { return &networkingv1.IPAddress{} }, func() runtime.Object { return &networkingv1.IPAddressList{} },
		&strategy{
			validate: func(obj runtime.Object) field.ErrorList {
				a := obj.(*networkingv1.IPAddress)
				p := field.NewPath("spec", "parentRef")
				var errs field.ErrorList
				if a.Spec.ParentRef == nil {
					return append(errs, field.Required(p, ""))
				}
				if a.Spec.ParentRef.Resource == "" {
					errs = append(errs, field.Required(p.Child("resource"), ""))
				}
				if a.Spec.ParentRef.Name == "" {
					errs = append(errs, field.Required(p.Child("name"), ""))
				}
				return errs
			},
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return apimachineryvalidation.ValidateImmutableField(obj.(*networkingv1.IPAddress).Spec, old.(*networkingv1.IPAddress).Spec, field.NewPath("spec"))
			},
		}, nameIs(func(p *field.Path, name string) field.ErrorList {
			ip, err := netip.ParseAddr(name)
			if err != nil || ip.String() != name || ip.Zone() != "" {
				return field.ErrorList{field.Invalid(p, name, "must be a canonical format IP address")}
			}
			return nil
		}), func(r *registry.Resource) {
			r.NoInitializers = true
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "ParentRef", Type: "string", Description: networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"]}},
				Row: func(obj runtime.Object) []any {
					a := obj.(*networkingv1.IPAddress)
					ref := "<none>"
					if r := a.Spec.ParentRef; r != nil {
						ref = r.Resource + "/" + r.Namespace + "/" + r.Name
						if r.Group != "" {
							ref = r.Resource + "." + r.Group + "/" + r.Namespace + "/" + r.Name
						}
					}
					return []any{a.Name, ref}
				},
			}
		})
	cidr := stored(gv, "servicecidrs", "ServiceCIDR", nil, false, true,
		func() runtime.Object { return &networkingv1.ServiceCIDR{} }, func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		&strategy{
			prepareCreate: func(obj runtime.Object) { obj.(*networkingv1.ServiceCIDR).Status = networkingv1.ServiceCIDRStatus{} },
			prepareUpdate: func(obj, old runtime.Object) {
				obj.(*networkingv1.ServiceCIDR).Status = old.(*networkingv1.ServiceCIDR).Status
			},
			validate: func(obj runtime.Object) field.ErrorList {
				c := obj.(*networkingv1.ServiceCIDR)
				p := field.NewPath("spec", "cidrs")
				if len(c.Spec.CIDRs) == 0 || len(c.Spec.CIDRs) > 2 {
					return field.ErrorList{field.Invalid(p, c.Spec.CIDRs, "at least one and at most two CIDRs are required")}
				}
				var errs field.ErrorList
				for i, s := range c.Spec.CIDRs {
					if pr, err := netip.ParsePrefix(s); err != nil || pr.Masked() != pr {
						errs = append(errs, field.Invalid(p.Index(i), s, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
					}
				}
				return errs
			},
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				c, o := obj.(*networkingv1.ServiceCIDR), old.(*networkingv1.ServiceCIDR)
				return apimachineryvalidation.ValidateImmutableField(c.Spec.CIDRs, o.Spec.CIDRs, field.NewPath("spec", "cidrs"))
			},
			validateOnUpdate: true,
		}, func(r *registry.Resource) {
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "CIDRs", Type: "string", Description: networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]}, endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					c := obj.(*networkingv1.ServiceCIDR)
					return []any{c.Name, strings.Join(c.Spec.CIDRs, ","), endpoints.Age(c.CreationTimestamp, time.Now())}
				},
			}
		})
	return append([]Definition{ip, cidr}, ingressNetworking()...)
}

// servicesPrepareCreate resets status and makes clusterIP and clusterIPs agree.
func servicesPrepareCreate(obj runtime.Object) {
	s := obj.(*corev1.Service)
	s.Status = corev1.ServiceStatus{}
	servicealloc.NormalizeClusterIPs(s, nil)
}

// servicesPrepareUpdate keeps status, what the server allocated, and drops what a type
// change leaves without meaning.
func servicesPrepareUpdate(obj, old runtime.Object) {
	s, o := obj.(*corev1.Service), old.(*corev1.Service)
	s.Status = o.Status
	servicealloc.PrepareUpdate(s, o)
	servicealloc.NormalizeClusterIPs(s, o)
}
