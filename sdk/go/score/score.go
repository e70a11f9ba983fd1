// Package score exports the score hook of a wasmplane scheduler plugin. Requests use the
// node table of ABI §7.6, so node documents are decoded once per node version per instance.
package score

import (
	"fmt"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/internal/guest"
)

var handler func(in, dst []byte) ([]byte, error)

// Register sets the plugin's score handler; call it from an init function. The handler
// gets the pod and every feasible node of one scheduling cycle and answers one score per
// node, in order (0 to 100). The request's pod and nodes are decoded once and shared
// with later calls: the handler must not modify them.
func Register(fn func(req *abi.SchedulingRequest) ([]int64, error)) {
	guest.Flags.NodeTable = true
	handler = func(in, dst []byte) ([]byte, error) {
		req, err := guest.DecodeScheduling(in)
		if err != nil {
			return nil, err
		}
		scores, err := fn(req)
		if err != nil {
			return nil, err
		}
		if len(scores) != len(req.Nodes) {
			return nil, fmt.Errorf("score answered %d scores for %d nodes", len(scores), len(req.Nodes))
		}
		return guest.EncodeScores(dst, scores), nil
	}
}

// RegisterNode is Register for a handler that scores one node at a time.
func RegisterNode(fn func(pod *abi.Pod, node *abi.Node) int64) {
	var scores []int64
	Register(func(req *abi.SchedulingRequest) ([]int64, error) {
		scores = scores[:0]
		for _, n := range req.Nodes {
			scores = append(scores, fn(req.Pod, n))
		}
		return scores, nil
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

func (notRegistered) Error() string { return "score: no handler registered" }

var errNotRegistered = notRegistered{}
