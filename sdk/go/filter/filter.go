// Package filter exports the filter hook of a wasmplane scheduler plugin. Requests use the
// node table of ABI §7.6, so node documents are decoded once per node version per instance.
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
	guest.Flags.NodeTable = true
	handler = func(in, dst []byte) ([]byte, error) {
		req, err := guest.DecodeScheduling(in)
		if err != nil {
			return nil, err
		}
		resp, err := fn(req)
		if err != nil {
			return nil, err
		}
		if len(resp.Pass) != len(req.Nodes) || (resp.Reasons != nil && len(resp.Reasons) != len(req.Nodes)) {
			return nil, fmt.Errorf("filter answered %d results for %d nodes", len(resp.Pass), len(req.Nodes))
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
