// Package score exports the score hook of a wasmplane scheduler plugin. Requests use the
// node table of ABI §7.6 in the packed framing of §7.7, so node documents are decoded
// once per node version per instance and nodes and scores cross as binary arrays.
package score

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/internal/guest"
)

var handler func(in, dst []byte) ([]byte, error)

// Register sets the plugin's score handler; call it from an init function. The handler
// gets the pod and every feasible node of one scheduling cycle and answers one score per
// node, in order (0 to 100). The request's pod and nodes are decoded once and shared
// with later calls: the handler must not modify them.
func Register(fn func(req *abi.SchedulingRequest) ([]int64, error)) {
	register(func(s *guest.Scheduling, dst []byte) ([]byte, error) {
		scores, err := fn(s.Req)
		if err != nil {
			return nil, err
		}
		if len(scores) != len(s.Req.Nodes) {
			return nil, fmt.Errorf("score answered %d scores for %d nodes", len(scores), len(s.Req.Nodes))
		}
		if s.Packed {
			return guest.EncodeScoresPacked(dst, scores), nil
		}
		return guest.EncodeScores(dst, scores), nil
	})
}

// register installs a handler that writes its answer itself (packed when s.Packed).
func register(fn func(s *guest.Scheduling, dst []byte) ([]byte, error)) {
	guest.Flags.NodeTable = true
	guest.Flags.Packed = true
	handler = func(in, dst []byte) ([]byte, error) {
		s, err := guest.DecodeAny(in)
		if err != nil {
			return nil, err
		}
		return fn(&s, dst)
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

// RegisterPrepared is RegisterNode for a score that reads the node through a value
// computed from the node alone: prepare runs once per node version (per instance) and
// its result is kept with the node, so each pod costs fn per node rather than prepare.
// prepare must depend on nothing but the node (and the configuration).
func RegisterPrepared[T any](prepare func(node *abi.Node) T, fn func(pod *abi.Pod, node *abi.Node, prepared T) int64) {
	cache := guest.NewPrepared(prepare)
	var scores []int64
	register(func(s *guest.Scheduling, dst []byte) ([]byte, error) {
		pod, nodes := s.Req.Pod, s.Req.Nodes
		if s.Packed {
			// One pass: score each node and write its score straight into the answer,
			// sized once (an append per node costs a capacity check and a length update
			// per node in a WebAssembly guest).
			dst = guest.PackedHeader(dst, len(nodes))
			h := len(dst)
			dst = slices.Grow(dst, 8*len(nodes))[:h+8*len(nodes)]
			out := dst[h:]
			for i, n := range nodes {
				binary.LittleEndian.PutUint64(out[8*i:], uint64(fn(pod, n, cache.Get(s, i))))
			}
			return dst, nil
		}
		scores = scores[:0]
		for i, n := range nodes {
			scores = append(scores, fn(pod, n, cache.Get(s, i)))
		}
		return guest.EncodeScores(dst, scores), nil
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
