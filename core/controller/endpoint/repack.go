package endpoint

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

func parseIP(s string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// repack merges subsets as Kubernetes' endpoints.RepackSubsets: each address collects
// the ports it serves; addresses with the same port set share one subset; a ready
// address is never also listed not ready; subsets, addresses and ports are sorted.
func repack(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	type entry struct {
		addr  corev1.EndpointAddress
		ready bool
		ports []corev1.EndpointPort
	}
	var entries []*entry
	index := map[string]*entry{}
	addrKey := func(a corev1.EndpointAddress) string {
		if a.TargetRef != nil {
			return a.IP + "/" + string(a.TargetRef.UID)
		}
		return a.IP
	}
	addPort := func(e *entry, ports []corev1.EndpointPort) {
		for _, p := range ports {
			if !slices.Contains(e.ports, p) {
				e.ports = append(e.ports, p)
			}
		}
	}
	note := func(a corev1.EndpointAddress, ready bool, ports []corev1.EndpointPort) {
		k := addrKey(a)
		e, ok := index[k]
		if !ok {
			e = &entry{addr: a, ready: ready}
			index[k] = e
			entries = append(entries, e)
		}
		e.ready = e.ready || ready
		addPort(e, ports)
	}
	for _, ss := range subsets {
		for _, a := range ss.Addresses {
			note(a, true, ss.Ports)
		}
		for _, a := range ss.NotReadyAddresses {
			note(a, false, ss.Ports)
		}
	}
	portKey := func(ports []corev1.EndpointPort) string {
		slices.SortFunc(ports, comparePorts)
		var b strings.Builder
		for _, p := range ports {
			fmt.Fprintf(&b, "%s/%d/%s/%v;", p.Name, p.Port, p.Protocol, p.AppProtocol)
		}
		return b.String()
	}
	var out []corev1.EndpointSubset
	bySet := map[string]int{}
	for _, e := range entries {
		k := portKey(e.ports)
		i, ok := bySet[k]
		if !ok {
			i = len(out)
			bySet[k] = i
			out = append(out, corev1.EndpointSubset{Ports: e.ports})
		}
		if e.ready {
			out[i].Addresses = append(out[i].Addresses, e.addr)
		} else {
			out[i].NotReadyAddresses = append(out[i].NotReadyAddresses, e.addr)
		}
	}
	for i := range out {
		slices.SortFunc(out[i].Addresses, compareAddresses)
		slices.SortFunc(out[i].NotReadyAddresses, compareAddresses)
	}
	slices.SortFunc(out, func(a, b corev1.EndpointSubset) int { return strings.Compare(subsetKey(a), subsetKey(b)) })
	return out
}

func comparePorts(a, b corev1.EndpointPort) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port - b.Port)
	}
	return strings.Compare(string(a.Protocol), string(b.Protocol))
}

func compareAddresses(a, b corev1.EndpointAddress) int {
	if c := strings.Compare(a.IP, b.IP); c != 0 {
		return c
	}
	var ua, ub string
	if a.TargetRef != nil {
		ua = string(a.TargetRef.UID)
	}
	if b.TargetRef != nil {
		ub = string(b.TargetRef.UID)
	}
	return strings.Compare(ua, ub)
}

// subsetKey orders subsets by their first address, then their ports.
func subsetKey(s corev1.EndpointSubset) string {
	var b strings.Builder
	for _, a := range append(slices.Clone(s.Addresses), s.NotReadyAddresses...) {
		b.WriteString(a.IP + ",")
	}
	for _, p := range s.Ports {
		fmt.Fprintf(&b, "%s/%d;", p.Name, p.Port)
	}
	return b.String()
}
