// Package filter exports the filter hook of a wasmplane scheduler plugin. Requests use the
// node table of ABI §7.6 in the packed framing of §7.7, so node documents are decoded
// once per node version per instance and nodes and decisions cross as binary arrays.
package filter

import (
	"fmt"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/internal/guest"
)

var handler func(in, dst []byte) ([]byte, error)

// Register sets the plugin's filter handler; call it from an init function. The handler
// gets the pod and a batch of the candidate nodes of one scheduling cycle (a cycle may
// take several batches, ABI §7.5) and answers one pass flag (and optionally a reason)
// per node, in order. The request's pod and nodes are decoded once and shared with later
// calls: the handler must not modify them.
func Register(fn func(req *abi.SchedulingRequest) (abi.FilterResponse, error)) {
	register(func(s *guest.Scheduling) (abi.FilterResponse, error) { return fn(s.Req) })
}

func register(fn func(s *guest.Scheduling) (abi.FilterResponse, error)) {
	guest.Flags.NodeTable = true
	guest.Flags.Packed = true
	handler = func(in, dst []byte) ([]byte, error) {
		s, err := guest.DecodeAny(in)
		if err != nil {
			return nil, err
		}
		resp, err := fn(&s)
		if err != nil {
			return nil, err
		}
		if n := len(s.Req.Nodes); len(resp.Pass) != n || (resp.Reasons != nil && len(resp.Reasons) != n) {
			return nil, fmt.Errorf("filter answered %d results for %d nodes", len(resp.Pass), n)
		}
		if s.Packed {
			return guest.EncodeFilterPacked(dst, &resp), nil
		}
		return guest.EncodeFilter(dst, &resp), nil
	}
}

// RegisterNode is Register for a handler that looks at one node at a time.
func RegisterNode(fn func(pod *abi.Pod, node *abi.Node) (ok bool, reason string)) {
	var resp abi.FilterResponse
	Register(func(req *abi.SchedulingRequest) (abi.FilterResponse, error) {
		resp.Pass, resp.Reasons = resp.Pass[:0], resp.Reasons[:0]
		for _, n := range req.Nodes {
			ok, reason := fn(req.Pod, n)
			resp.Pass = append(resp.Pass, ok)
			resp.Reasons = append(resp.Reasons, reason)
		}
		return resp, nil
	})
}

// RegisterPrepared is RegisterNode for a filter that reads the node through a value
// computed from the node alone: prepare runs once per node version (per instance) and
// its result is kept with the node, so each pod costs fn per node rather than prepare.
// prepare must depend on nothing but the node (and the configuration).
func RegisterPrepared[T any](prepare func(node *abi.Node) T, fn func(pod *abi.Pod, node *abi.Node, prepared T) (ok bool, reason string)) {
	cache := guest.NewPrepared(prepare)
	var resp abi.FilterResponse
	register(func(s *guest.Scheduling) (abi.FilterResponse, error) {
		resp.Pass, resp.Reasons = resp.Pass[:0], resp.Reasons[:0]
		for i, n := range s.Req.Nodes {
			ok, reason := fn(s.Req.Pod, n, cache.Get(s, i))
			resp.Pass = append(resp.Pass, ok)
			resp.Reasons = append(resp.Reasons, reason)
		}
		return resp, nil
	})
}

// Handle runs the registered handler on one encoded request, as the host's call does;
// it lets plugins unit-test their handler without WebAssembly.
func Handle(request []byte) []byte {
	if handler == nil {
		return guest.ErrorResponse(errNotRegistered)
	}
	return guest.Serve(request, handler)
}

type notRegistered struct{}

func (notRegistered) Error() string { return "filter: no handler registered" }

var errNotRegistered = notRegistered{}
