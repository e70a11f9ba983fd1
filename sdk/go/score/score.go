// Package score exports the score hook of a wasmplane scheduler plugin. Requests use the
// node table of ABI §7.6 in the packed framing of §7.7, so node documents are decoded
// once per node version per instance and nodes and scores cross as binary arrays.
package score

import (
	"encoding/binary"
	"fmt"
	"math"
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
	registerWith(guest.DecodeAny, fn)
}

// withPod and nodeOnly decode a request for handlers that resolve packed slots
// themselves, with the pod and without it.
func withPod(in []byte) (guest.Scheduling, error)  { return guest.DecodeSlots(in, true) }
func nodeOnly(in []byte) (guest.Scheduling, error) { return guest.DecodeSlots(in, false) }

// registerWith installs fn behind decode (guest.DecodeSlots for handlers that resolve
// packed slots themselves).
func registerWith(decode func([]byte) (guest.Scheduling, error), fn func(s *guest.Scheduling, dst []byte) ([]byte, error)) {
	guest.Flags.NodeTable = true
	guest.Flags.Packed = true
	handler = func(in, dst []byte) ([]byte, error) {
		s, err := decode(in)
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

// packedAnswer starts the packed answer to s in dst and returns it with room for every
// node's score, which the caller writes by index in the same pass that resolves the
// node's slot (an append per node costs a capacity check and a length update per node
// in a WebAssembly guest, and a second pass over thousands of nodes costs more).
func packedAnswer(dst []byte, s *guest.Scheduling) (answer, scores []byte) {
	n := len(s.SlotBytes) / 4
	dst = guest.PackedHeader(dst, n)
	h := len(dst)
	dst = slices.Grow(dst, 8*n)[:h+8*n]
	return dst, dst[h:]
}

// RegisterNodeScore registers a score that depends on the node alone (and the
// configuration), never on the pod: it is computed when the host sends the node (once
// per node version and instance) and kept by slot, so a pod's call only copies the kept
// scores, without calling plugin code or resolving nodes per node. Use RegisterPrepared
// when the pod matters.
func RegisterNodeScore(score func(node *abi.Node) int64) {
	kept := &slotScores{fn: score}
	guest.WatchSlots(kept)
	var scores []int64
	registerWith(nodeOnly, func(s *guest.Scheduling, dst []byte) ([]byte, error) {
		if !s.Packed {
			scores = scores[:0]
			for _, n := range s.Req.Nodes {
				scores = append(scores, score(n))
			}
			return guest.EncodeScores(dst, scores), nil
		}
		dst, out := packedAnswer(dst, s)
		vals := kept.vals
		for i := range len(out) / 8 {
			k := binary.LittleEndian.Uint32(s.SlotBytes[4*i:])
			if int(k) >= len(vals) || vals[k] == undefinedScore {
				return nil, guest.ErrUndefinedSlot(k)
			}
			binary.LittleEndian.PutUint64(out[8*i:], uint64(vals[k]))
		}
		return dst, nil
	})
}

// undefinedScore marks a slot without a node in slotScores. A plugin's score equal to it
// is kept one higher: both are below 0, which the scheduler clamps to 0 alike.
const undefinedScore = math.MinInt64

// slotScores keeps RegisterNodeScore's score of each slot's node, computed as the host
// defines it.
type slotScores struct {
	fn   func(*abi.Node) int64
	vals []int64
}

// Defined implements guest.SlotWatcher.
func (c *slotScores) Defined(k uint32, n *abi.Node) {
	for int(k) >= len(c.vals) {
		c.vals = append(c.vals, undefinedScore)
	}
	v := c.fn(n)
	if v == undefinedScore {
		v++
	}
	c.vals[k] = v
}

// Forgotten implements guest.SlotWatcher.
func (c *slotScores) Forgotten(k uint32) {
	if int(k) < len(c.vals) {
		c.vals[k] = undefinedScore
	}
}

// Reset implements guest.SlotWatcher.
func (c *slotScores) Reset() { c.vals = c.vals[:0] }

// RegisterPrepared is RegisterNode for a score that reads the node through a value
// computed from the node alone: prepare runs once per node version (per instance) and
// its result is kept with the node, so each pod costs fn per node rather than prepare.
// prepare must depend on nothing but the node (and the configuration).
func RegisterPrepared[T any](prepare func(node *abi.Node) T, fn func(pod *abi.Pod, node *abi.Node, prepared T) int64) {
	cache := guest.NewPrepared(prepare)
	var scores []int64
	registerWith(withPod, func(s *guest.Scheduling, dst []byte) ([]byte, error) {
		pod, nodes := s.Req.Pod, s.Req.Nodes
		if s.Packed {
			dst, out := packedAnswer(dst, s)
			for i := range len(out) / 8 {
				k := binary.LittleEndian.Uint32(s.SlotBytes[4*i:])
				node := guest.SlotNode(k)
				if node == nil {
					return nil, guest.ErrUndefinedSlot(k)
				}
				binary.LittleEndian.PutUint64(out[8*i:], uint64(fn(pod, node, cache.At(k, node))))
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
