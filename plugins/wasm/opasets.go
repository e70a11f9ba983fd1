package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// hostValueBuiltins are the host's builtins whose operands or results are sets: they
// cross in Rego's value syntax (see opavalue.go).
var hostValueBuiltins = map[string]opaValueFunc{
	"object.subset":             opaObjectSubset,
	"net.cidr_expand":           opaCIDRExpand,
	"net.cidr_merge":            opaCIDRMerge,
	"graph.reachable_paths":     opaReachablePaths,
	"json.marshal_with_options": opaJSONMarshalWithOptions,
	"json.patch":                opaJSONPatch,
}

// opaObjectSubset is object.subset(super, sub): objects recursively, sets by
// membership, arrays as a contiguous run of super, a set against an array by
// membership — with OPA's quirks kept (an empty set is a subset of a non-empty array
// only).
func opaObjectSubset(_ *opaEval, args []any) (any, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("takes 2 arguments, got %d", len(args))
	}
	switch super := args[0].(type) {
	case map[string]any:
		if sub, ok := args[1].(map[string]any); ok {
			return objectSubset(super, sub), nil
		}
	case opaSet:
		if sub, ok := args[1].(opaSet); ok {
			return setSubset(super, sub), nil
		}
	case []any:
		switch sub := args[1].(type) {
		case []any:
			return arraySubset(super, sub), nil
		case opaSet:
			unmatched := len(sub)
			for _, e := range super {
				if sub.contains(e) {
					unmatched--
				}
				if unmatched == 0 {
					return true, nil
				}
			}
			return false, nil
		}
	}
	return nil, errors.New("both arguments object.subset must be of the same type or array and set")
}

func objectSubset(super, sub map[string]any) bool {
	for k, sv := range sub {
		pv, ok := super[k]
		if !ok {
			return false
		}
		if regoEqual(sv, pv) {
			continue
		}
		switch p := pv.(type) {
		case map[string]any:
			if s, ok := sv.(map[string]any); ok && objectSubset(p, s) {
				continue
			}
		case opaSet:
			if s, ok := sv.(opaSet); ok && setSubset(p, s) {
				continue
			}
		case []any:
			if s, ok := sv.([]any); ok && arraySubset(p, s) {
				continue
			}
		}
		return false
	}
	return true
}

func setSubset(super, sub opaSet) bool {
	for _, e := range sub {
		if !super.contains(e) {
			return false
		}
	}
	return true
}

// arraySubset reports whether sub appears in super as a contiguous run.
func arraySubset(super, sub []any) bool {
	if len(sub) > len(super) {
		return false
	}
	for start := 0; start+len(sub) <= len(super); start++ {
		if slices.EqualFunc(super[start:start+len(sub)], sub, regoEqual) {
			return true
		}
	}
	return false
}

// opaCIDRExpand is net.cidr_expand(cidr): the set of every address in it.
func opaCIDRExpand(_ *opaEval, args []any) (any, error) {
	s, err := valueString(args, 0)
	if err != nil {
		return nil, err
	}
	ip, ipNet, err := net.ParseCIDR(s)
	if err != nil {
		return nil, err
	}
	out := opaSet{}
	for ip := ip.Mask(ipNet.Mask); ipNet.Contains(ip); incIP(ip) {
		out = append(out, ip.String())
	}
	return out, nil
}

func incIP(ip net.IP) {
	for j := len(ip) - 1; j >= 0; j-- {
		ip[j]++
		if ip[j] > 0 {
			break
		}
	}
}

// cidrRange is one network of net.cidr_merge's operand as the addresses it spans.
type cidrRange struct {
	first, last netip.Addr
	network     string // as OPA prints the operand's network when nothing merges with it
	merged      bool
}

// opaCIDRMerge is net.cidr_merge(networks): the fewest CIDRs covering the networks and
// addresses given (an array or set of strings). A network merged with nothing is
// answered as given (an address as OPA reads it: with its class's default mask).
func opaCIDRMerge(_ *opaEval, args []any) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("takes 1 argument, got %d", len(args))
	}
	var elems []any
	switch v := args[0].(type) {
	case []any:
		elems = v
	case opaSet:
		elems = v
	default:
		return nil, errors.New("operand must be an array")
	}
	var ranges []*cidrRange
	for _, e := range elems {
		s, ok := e.(string)
		if !ok {
			return nil, errors.New("element must be string")
		}
		r, err := parseCIDRRange(s)
		if err != nil {
			return nil, err
		}
		ranges = append(ranges, r)
	}
	slices.SortFunc(ranges, func(a, b *cidrRange) int {
		if c := a.last.Compare(b.last); c != 0 {
			return c
		}
		return a.first.Compare(b.first)
	})
	for i := len(ranges) - 1; i > 0; i-- {
		cur, prev := ranges[i], ranges[i-1]
		if before := cur.first.Prev(); before.IsValid() && before.Compare(prev.last) > 0 {
			continue
		}
		first := cur.first
		if prev.first.Less(first) {
			first = prev.first
		}
		ranges[i-1] = &cidrRange{first: first, last: cur.last, merged: true}
		ranges = slices.Delete(ranges, i, i+1)
	}
	out := opaSet{}
	for _, r := range ranges {
		if !r.merged {
			out = out.add(r.network)
			continue
		}
		for _, p := range rangePrefixes(r.first, r.last) {
			out = out.add(p.String())
		}
	}
	return out, nil
}

// parseCIDRRange reads a CIDR, or an IPv4 address with its class's default mask as Go's
// net.IP.DefaultMask gives it (IPv6 addresses need a prefix length).
func parseCIDRRange(s string) (*cidrRange, error) {
	ipNet := &net.IPNet{}
	if ip := net.ParseIP(s); ip != nil {
		if ip.To4() == nil {
			return nil, errors.New("IPv6 invalid: needs prefix length")
		}
		ipNet = &net.IPNet{IP: ip, Mask: ip.DefaultMask()}
	} else {
		var err error
		if _, ipNet, err = net.ParseCIDR(s); err != nil {
			return nil, err
		}
	}
	first := ipNet.IP.Mask(ipNet.Mask)
	last := slices.Clone(first)
	for i := range last {
		last[i] |= ^ipNet.Mask[len(ipNet.Mask)-len(last)+i]
	}
	f, _ := netip.AddrFromSlice(first)
	l, _ := netip.AddrFromSlice(last)
	return &cidrRange{first: f.Unmap(), last: l.Unmap(), network: ipNet.String()}, nil
}

// rangePrefixes is the shortest list of prefixes covering first..last exactly.
func rangePrefixes(first, last netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for first.IsValid() && first.Compare(last) <= 0 {
		bits := first.BitLen()
		for bits > 0 {
			p := netip.PrefixFrom(first, bits-1).Masked()
			if p.Addr() != first || lastOf(p).Compare(last) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(first, bits)
		out = append(out, p)
		first = lastOf(p).Next()
	}
	return out
}

// lastOf is the highest address of p.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// opaReachablePaths is graph.reachable_paths(graph, initial): every path from an
// initial vertex that ends at a vertex without edges, at one not in the graph (left
// out of the path) or where it would close a cycle.
func opaReachablePaths(_ *opaEval, args []any) (any, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("takes 2 arguments, got %d", len(args))
	}
	graph, ok := args[0].(map[string]any)
	if !ok {
		return nil, errors.New("operand 1 must be object")
	}
	initial, ok := elements(args[1])
	if !ok {
		return nil, errors.New("operand 2 must be one of {array, set}")
	}
	out := opaSet{}
	for _, node := range initial {
		name, ok := node.(string)
		if !ok {
			continue
		}
		edges, ok := graph[name]
		if !ok {
			continue
		}
		next, _ := elements(edges)
		if len(next) == 0 {
			out = out.add([]any{node})
			continue
		}
		for _, n := range next {
			out = reachablePaths(graph, n, []any{node}, out, opaSet{node})
		}
	}
	return out, nil
}

func reachablePaths(graph map[string]any, root any, path []any, out opaSet, reached opaSet) opaSet {
	name, isString := root.(string)
	edges, ok := graph[name]
	if !isString || !ok {
		// Not a vertex of the graph: the path ends before it.
		return out.add(slices.Clone(path))
	}
	path = append(slices.Clone(path), root)
	next, _ := elements(edges)
	if len(next) == 0 {
		return out.add(path)
	}
	reached = append(slices.Clone(reached), root)
	for _, n := range next {
		if reached.contains(n) {
			out = out.add(path)
		} else {
			out = reachablePaths(graph, n, path, out, reached)
		}
	}
	return out
}

// elements are the members of an array or a set.
func elements(v any) ([]any, bool) {
	switch v := v.(type) {
	case []any:
		return v, true
	case opaSet:
		return v, true
	}
	return nil, false
}

// opaJSONMarshalWithOptions is json.marshal_with_options(value, {"pretty", "indent",
// "prefix"}): sets are written as arrays in Rego's order, as OPA writes them.
func opaJSONMarshalWithOptions(_ *opaEval, args []any) (any, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("takes 2 arguments, got %d", len(args))
	}
	opts, ok := args[1].(map[string]any)
	if !ok {
		return nil, errors.New("operand 2 must be object")
	}
	indent, prefix := "\t", ""
	implicit, explicit, pretty := false, false, false
	for k, v := range opts {
		switch k {
		case "prefix", "indent":
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("operand 2 key %s failed cast to string", k)
			}
			if k == "prefix" {
				prefix = s
			} else {
				indent = s
			}
			implicit = true
		case "pretty":
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("operand 2 key %s failed cast to bool", k)
			}
			explicit, pretty = true, b
		default:
			return nil, fmt.Errorf("operand 2 object contained unknown key %s", k)
		}
	}
	if !explicit {
		pretty = implicit
	}
	value := toJSONValue(args[0])
	if !pretty {
		js, err := json.Marshal(value)
		return string(js), err
	}
	js, err := json.MarshalIndent(value, prefix, indent)
	if err != nil {
		return nil, err
	}
	return prefix + string(js), nil
}

// toJSONValue turns sets into arrays sorted in Rego's order.
func toJSONValue(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = toJSONValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = toJSONValue(e)
		}
		return out
	case opaSet:
		sorted := slices.Clone(v)
		slices.SortFunc(sorted, regoCompare)
		return toJSONValue([]any(sorted))
	}
	return v
}

// regoCompare orders values as Rego does: null, booleans, numbers, strings, arrays,
// objects, sets; within a type by value.
func regoCompare(a, b any) int {
	ra, rb := regoRank(a), regoRank(b)
	if ra != rb {
		return ra - rb
	}
	switch a := a.(type) {
	case bool:
		switch {
		case a == b.(bool):
			return 0
		case !a:
			return -1
		}
		return 1
	case json.Number:
		x, _ := new(big.Rat).SetString(string(a))
		y, _ := new(big.Rat).SetString(string(b.(json.Number)))
		if x == nil || y == nil {
			return strings.Compare(string(a), string(b.(json.Number)))
		}
		return x.Cmp(y)
	case string:
		return strings.Compare(a, b.(string))
	case []any:
		return slices.CompareFunc(a, b.([]any), regoCompare)
	}
	return bytes.Compare([]byte(regoKey(a)), []byte(regoKey(b)))
}

func regoRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case json.Number:
		return 2
	case string:
		return 3
	case []any:
		return 4
	case map[string]any:
		return 5
	}
	return 6
}

func valueString(args []any, i int) (string, error) {
	if i >= len(args) {
		return "", fmt.Errorf("operand %d missing", i+1)
	}
	s, ok := args[i].(string)
	if !ok {
		return "", fmt.Errorf("operand %d must be a string", i+1)
	}
	return s, nil
}
