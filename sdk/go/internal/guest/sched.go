package guest

import (
	"encoding/json"
	"fmt"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// table holds the node documents the host defined on this instance (ABI §7.6).
var table = map[uint64]*abi.Node{}

// reused across calls so that a steady-state call allocates little.
var (
	keys    []uint64
	sreq    abi.SchedulingRequest
	scratch []*abi.Node
)

// DecodeScheduling decodes a filter/score request, resolving node-table keys.
func DecodeScheduling(in []byte) (*abi.SchedulingRequest, error) {
	var pod, nodes, define, forget, requested []byte
	reset := false
	err := ScanObject(in, func(key, val []byte) error {
		switch string(key) {
		case "pod":
			pod = val
		case "nodes":
			nodes = val
		case "define":
			define = val
		case "forget":
			forget = val
		case "requested":
			requested = val
		case "reset":
			reset = string(val) == "true"
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decode scheduling request: %w", err)
	}
	if reset {
		clear(table)
	}
	if len(forget) > 0 && string(forget) != "null" {
		ks, err := ParseUints(forget, keys[:0])
		if err != nil {
			return nil, fmt.Errorf("decode forget: %w", err)
		}
		for _, k := range ks {
			delete(table, k)
		}
	}
	if len(define) > 0 && string(define) != "null" {
		var defs []struct {
			Key  uint64    `json:"key"`
			Node *abi.Node `json:"node"`
		}
		if err := json.Unmarshal(define, &defs); err != nil {
			return nil, fmt.Errorf("decode define: %w", err)
		}
		for _, d := range defs {
			if d.Node == nil {
				return nil, fmt.Errorf("define %d: node is null", d.Key)
			}
			table[d.Key] = d.Node
		}
	}
	req := &sreq
	*req = abi.SchedulingRequest{Nodes: scratch[:0]}
	req.Pod = new(abi.Pod)
	if err := json.Unmarshal(pod, req.Pod); err != nil {
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	i := skipSpace(nodes, 0)
	if i < len(nodes) && nodes[i] == '[' && isKeyList(nodes[i+1:]) {
		keys, err = ParseUints(nodes, keys[:0])
		if err != nil {
			return nil, fmt.Errorf("decode nodes: %w", err)
		}
		for _, k := range keys {
			n, ok := table[k]
			if !ok {
				return nil, fmt.Errorf("node key %d was never defined on this instance", k)
			}
			req.Nodes = append(req.Nodes, n)
		}
	} else if err := json.Unmarshal(nodes, &req.Nodes); err != nil {
		return nil, fmt.Errorf("decode nodes: %w", err)
	}
	scratch = req.Nodes
	if len(requested) > 0 {
		if err := json.Unmarshal(requested, &req.Requested); err != nil {
			return nil, fmt.Errorf("decode requested: %w", err)
		}
	}
	return req, nil
}

func isKeyList(b []byte) bool {
	i := skipSpace(b, 0)
	return i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] == ']')
}

// EncodeFilter encodes a filter answer.
func EncodeFilter(dst []byte, r *abi.FilterResponse) []byte {
	dst = append(dst, `{"pass":[`...)
	anyReason := false
	for i, p := range r.Pass {
		if i > 0 {
			dst = append(dst, ',')
		}
		if p {
			dst = append(dst, "true"...)
		} else {
			dst = append(dst, "false"...)
		}
	}
	for _, s := range r.Reasons {
		if s != "" {
			anyReason = true
			break
		}
	}
	dst = append(dst, ']')
	if anyReason {
		dst = append(dst, `,"reasons":[`...)
		for i, s := range r.Reasons {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, s)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// EncodeScores encodes a score answer.
func EncodeScores(dst []byte, scores []int64) []byte {
	dst = append(dst, `{"scores":[`...)
	for i, s := range scores {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendInt(dst, s)
	}
	return append(dst, "]}"...)
}
