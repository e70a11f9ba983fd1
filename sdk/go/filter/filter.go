// Package filter exports the filter hook of a wasmplane scheduler plugin. Requests use the
// node table of ABI §7.6 in the packed framing of §7.7, so node documents are decoded
// once per node version per instance and nodes and decisions cross as binary arrays.
package filter

import (
	"encoding/binary"
	"fmt"
	"slices"

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

// RegisterNodeVerdict registers a filter whose answer depends on the node alone (and
// the configuration), never on the pod: judge runs when the host sends the node (once
// per node version and instance) and its verdict is kept by slot, so a pod's call only
// copies the kept verdicts, without calling plugin code or resolving nodes per node.
// Use RegisterPrepared when the pod matters.
func RegisterNodeVerdict(judge func(node *abi.Node) (ok bool, reason string)) {
	kept := &slotVerdicts{fn: judge}
	guest.WatchSlots(kept)
	guest.Flags.NodeTable = true
	guest.Flags.Packed = true
	var resp abi.FilterResponse
	handler = func(in, dst []byte) ([]byte, error) {
		s, err := guest.DecodeSlots(in, false)
		if err != nil {
			return nil, err
		}
		if !s.Packed {
			resp.Pass, resp.Reasons = resp.Pass[:0], resp.Reasons[:0]
			for _, n := range s.Req.Nodes {
				ok, reason := judge(n)
				resp.Pass = append(resp.Pass, ok)
				resp.Reasons = append(resp.Reasons, reason)
			}
			return guest.EncodeFilter(dst, &resp), nil
		}
		n := len(s.SlotBytes) / 4
		dst = guest.PackedHeader(dst, n)
		h := len(dst)
		dst = slices.Grow(dst, n)[:h+n]
		out, pass := dst[h:], kept.pass
		rejected := false
		for i := range n {
			k := binary.LittleEndian.Uint32(s.SlotBytes[4*i:])
			if int(k) >= len(pass) || pass[k] == undefinedVerdict {
				return nil, guest.ErrUndefinedSlot(k)
			}
			out[i] = pass[k]
			rejected = rejected || pass[k] == 0
		}
		if !rejected {
			return dst, nil
		}
		first := true
		for i := range n {
			if dst[h+i] == 0 {
				dst, first = guest.AppendPackedReason(dst, first, i, kept.reasons[binary.LittleEndian.Uint32(s.SlotBytes[4*i:])]), false
			}
		}
		return guest.ClosePackedReasons(dst, first), nil
	}
}

// undefinedVerdict marks a slot without a node in slotVerdicts.pass (1 passes, 0 not).
const undefinedVerdict = 2

// slotVerdicts keeps RegisterNodeVerdict's verdict on each slot's node, judged as the
// host defines it.
type slotVerdicts struct {
	fn      func(*abi.Node) (bool, string)
	pass    []byte
	reasons []string
}

// Defined implements guest.SlotWatcher.
func (c *slotVerdicts) Defined(k uint32, n *abi.Node) {
	for int(k) >= len(c.pass) {
		c.pass, c.reasons = append(c.pass, undefinedVerdict), append(c.reasons, "")
	}
	ok, reason := c.fn(n)
	c.pass[k], c.reasons[k] = 0, reason
	if ok {
		c.pass[k], c.reasons[k] = 1, ""
	}
}

// Forgotten implements guest.SlotWatcher.
func (c *slotVerdicts) Forgotten(k uint32) {
	if int(k) < len(c.pass) {
		c.pass[k], c.reasons[k] = undefinedVerdict, ""
	}
}

// Reset implements guest.SlotWatcher.
func (c *slotVerdicts) Reset() { c.pass, c.reasons = c.pass[:0], c.reasons[:0] }

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
