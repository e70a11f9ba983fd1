package guest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// The node table of this instance (ABI §7.6) and what decoding it shares.
var (
	table  keyTable
	strs   = interner{m: map[string]string{}}
	keys   []uint64
	sreq   abi.SchedulingRequest
	nodesV []*abi.Node
	// slotNodes is the node table of the packed framing (ABI §7.7): the host names
	// documents by small reused slots, so the table is an array.
	slotNodes []*abi.Node
	slotsV    []uint32
	// slotWatchers are told of every change to slotNodes.
	slotWatchers []SlotWatcher
)

// SlotWatcher follows the packed node table (ABI §7.7), so a handler can keep a value
// per slot computed when the host defines the node rather than when a pod asks.
type SlotWatcher interface {
	// Defined is called when slot k receives node n (replacing what it held).
	Defined(k uint32, n *abi.Node)
	// Forgotten is called when slot k is emptied.
	Forgotten(k uint32)
	// Reset is called when every slot is emptied.
	Reset()
}

// WatchSlots adds w to the watchers of the packed node table.
func WatchSlots(w SlotWatcher) { slotWatchers = append(slotWatchers, w) }

// Scheduling is a decoded filter/score request.
type Scheduling struct {
	// Req is the request with its nodes resolved.
	Req *abi.SchedulingRequest
	// Packed is true for a request in the packed framing; the answer must be packed too.
	Packed bool
	// Slots (packed only) is each node's slot: the same slot names the same decoded node
	// until the host defines another document in it.
	Slots []uint32
	// SlotBytes (packed only) is the request's slot array as it arrived: 4 little-endian
	// bytes per node. A request decoded by DecodeSlots leaves Req.Nodes and Slots empty
	// and the caller resolves the slots itself (SlotNode), in its own loop over the nodes.
	SlotBytes []byte
}

// DecodeAny decodes a filter/score request in either framing (ABI §7.6 or §7.7).
func DecodeAny(in []byte) (Scheduling, error) {
	if len(in) > 0 && in[0] == abi.PackedMagic[0] {
		return decodePacked(in, true, true)
	}
	req, err := DecodeScheduling(in)
	return Scheduling{Req: req}, err
}

// DecodeSlots is DecodeAny, but a packed request's nodes are left unresolved: a plugin
// loop that reads each node once resolves it with SlotNode as it goes, which saves a
// WebAssembly guest a second pass over thousands of nodes. Without withPod a packed
// request's pod is not decoded either (Req.Pod is nil): decoding a new pod costs a Go
// guest more than a 64-node call, and a node-only handler never reads it.
func DecodeSlots(in []byte, withPod bool) (Scheduling, error) {
	if len(in) > 0 && in[0] == abi.PackedMagic[0] {
		return decodePacked(in, false, withPod)
	}
	return DecodeAny(in)
}

// SlotNode returns the node in slot k of the packed node table, or nil if the host
// never defined it (a broken request).
func SlotNode(k uint32) *abi.Node {
	if uint64(k) < uint64(len(slotNodes)) {
		return slotNodes[k]
	}
	return nil
}

// ErrUndefinedSlot is the error of a request naming a slot k the host never defined on
// this instance.
func ErrUndefinedSlot(k uint32) error {
	return fmt.Errorf("node slot %d was never defined on this instance", k)
}

// decodePacked decodes a packed request: the header, the slot array, then the JSON
// object of §7.6 without "nodes" (ABI §7.7); resolve fills Req.Nodes and Slots, withPod
// Req.Pod.
func decodePacked(in []byte, resolve, withPod bool) (Scheduling, error) {
	if len(in) < abi.PackedHeader || string(in[:len(abi.PackedMagic)]) != abi.PackedMagic {
		return Scheduling{}, errors.New("decode scheduling request: bad packed header")
	}
	n := int(binary.LittleEndian.Uint32(in[len(abi.PackedMagic):]))
	if n < 0 || (len(in)-abi.PackedHeader)/4 < n {
		return Scheduling{}, fmt.Errorf("decode scheduling request: %d slots do not fit", n)
	}
	slotBytes := in[abi.PackedHeader : abi.PackedHeader+4*n]
	var pod, define, forget, requested []byte
	reset := false
	err := ScanObject(in[abi.PackedHeader+4*n:], func(key, val []byte) error {
		switch string(key) {
		case "pod":
			pod = val
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
		return Scheduling{}, fmt.Errorf("decode scheduling request: %w", err)
	}
	if reset {
		clear(slotNodes)
		slotNodes = slotNodes[:0]
		for _, w := range slotWatchers {
			w.Reset()
		}
	}
	if len(forget) > 0 && string(forget) != "null" {
		ks, err := ParseUints(forget, keys[:0])
		if err != nil {
			return Scheduling{}, fmt.Errorf("decode forget: %w", err)
		}
		for _, k := range ks {
			if k < uint64(len(slotNodes)) {
				slotNodes[k] = nil
				for _, w := range slotWatchers {
					w.Forgotten(uint32(k))
				}
			}
		}
	}
	if len(define) > 0 && string(define) != "null" {
		if err := defineNodes(define, putSlot); err != nil {
			return Scheduling{}, err
		}
	}
	req := &sreq
	*req = abi.SchedulingRequest{Nodes: nodesV[:0]}
	if withPod {
		if req.Pod, err = decodePod(pod); err != nil {
			return Scheduling{}, err
		}
	}
	if len(requested) > 0 {
		if err := json.Unmarshal(requested, &req.Requested); err != nil {
			return Scheduling{}, fmt.Errorf("decode requested: %w", err)
		}
	}
	if !resolve {
		return Scheduling{Req: req, Packed: true, SlotBytes: slotBytes}, nil
	}
	// Sized once and filled by index: this loop runs once per node of every call.
	nodes, slots := slices.Grow(req.Nodes, n)[:n], slices.Grow(slotsV[:0], n)[:n]
	table := slotNodes
	for i := range nodes {
		k := binary.LittleEndian.Uint32(slotBytes[4*i:])
		if uint64(k) >= uint64(len(table)) || table[k] == nil {
			return Scheduling{}, ErrUndefinedSlot(k)
		}
		nodes[i], slots[i] = table[k], k
	}
	req.Nodes = nodes
	nodesV, slotsV = req.Nodes, slots
	return Scheduling{Req: req, Packed: true, Slots: slots, SlotBytes: slotBytes}, nil
}

// maxSlot bounds packed slots: the host keeps them below twice the cluster plus 1024
// (ABI §7.7); a larger one is a broken request, not a reason to allocate gigabytes.
const maxSlot = 1 << 24

func putSlot(k uint64, n *abi.Node) error {
	if k >= maxSlot {
		return fmt.Errorf("define: slot %d is too large", k)
	}
	if k >= uint64(len(slotNodes)) {
		slotNodes = append(slotNodes, make([]*abi.Node, int(k)+1-len(slotNodes))...)
	}
	slotNodes[k] = n
	for _, w := range slotWatchers {
		w.Defined(uint32(k), n)
	}
	return nil
}

func putKey(k uint64, n *abi.Node) error {
	table.put(k, n)
	return nil
}

// The last pod decoded: the host sends the same pod in several calls (one per batch of
// a scheduling cycle, and again after a retry), and decoding a full Pod with
// encoding/json costs a Go guest more than resolving thousands of node keys.
var (
	lastPodJSON []byte
	lastPod     *abi.Pod
)

// DecodeScheduling decodes a filter/score request, resolving node-table keys. The pod
// and the nodes it returns are shared with later calls: handlers must not modify them.
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
		table.reset()
	}
	if len(forget) > 0 && string(forget) != "null" {
		ks, err := ParseUints(forget, keys[:0])
		if err != nil {
			return nil, fmt.Errorf("decode forget: %w", err)
		}
		for _, k := range ks {
			table.remove(k)
		}
	}
	if len(define) > 0 && string(define) != "null" {
		if err := defineNodes(define, putKey); err != nil {
			return nil, err
		}
	}
	req := &sreq
	*req = abi.SchedulingRequest{Nodes: nodesV[:0]}
	if req.Pod, err = decodePod(pod); err != nil {
		return nil, err
	}
	i := skipSpace(nodes, 0)
	if i < len(nodes) && nodes[i] == '[' && isKeyList(nodes[i+1:]) {
		if req.Nodes, err = resolveKeys(nodes, req.Nodes); err != nil {
			return nil, err
		}
	} else if req.Nodes, err = decodeNodeList(nodes, req.Nodes); err != nil {
		return nil, err
	}
	nodesV = req.Nodes
	if len(requested) > 0 {
		if err := json.Unmarshal(requested, &req.Requested); err != nil {
			return nil, fmt.Errorf("decode requested: %w", err)
		}
	}
	return req, nil
}

func decodePod(b []byte) (*abi.Pod, error) {
	if lastPod != nil && bytes.Equal(b, lastPodJSON) {
		return lastPod, nil
	}
	p := new(abi.Pod)
	if err := DecodePod(b, p); err != nil {
		lastPod = nil
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	lastPod, lastPodJSON = p, append(lastPodJSON[:0], b...)
	return p, nil
}

// defineNodes reads define: [{"key": k, "node": {…}}, …] into the table.
func defineNodes(b []byte, put func(uint64, *abi.Node) error) error {
	r := reader{b: b, in: &strs}
	err := r.array(func() error {
		var key uint64
		var node []byte
		haveKey := false
		err := r.object(func(name []byte) error {
			switch string(name) {
			case "key":
				start := r.i
				if err := r.skip(); err != nil {
					return err
				}
				k, ok := parseKey(b[start:r.i])
				if !ok {
					return errFallback
				}
				key, haveKey = k, true
			case "node":
				r.space()
				start := r.i
				if err := r.skip(); err != nil {
					return err
				}
				node = b[start:r.i]
			default:
				return r.unknown(name, "key", "node")
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !haveKey {
			return errFallback
		}
		return define(key, node, put)
	})
	if errors.Is(err, errFallback) {
		var defs []abi.NodeDefinition
		if err := json.Unmarshal(b, &defs); err != nil {
			return fmt.Errorf("decode define: %w", err)
		}
		for _, d := range defs {
			if err := define(d.Key, d.Node, put); err != nil {
				return err
			}
		}
		return nil
	}
	return err
}

// parseKey parses a key: a non-negative integer below 2^53 (ABI §7.6).
func parseKey(b []byte) (uint64, bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || len(b) > 16 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var k uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		k = k*10 + uint64(c-'0')
	}
	return k, true
}

func define(key uint64, doc []byte, put func(uint64, *abi.Node) error) error {
	if len(doc) == 0 || string(doc) == "null" {
		return fmt.Errorf("define %d: node is null", key)
	}
	n, err := decodeNode(doc, &strs)
	if err != nil {
		return fmt.Errorf("define %d: %w", key, err)
	}
	return put(key, n)
}

// resolveKeys parses the key list of "nodes" and looks each key up, in one pass.
func resolveKeys(b []byte, dst []*abi.Node) ([]*abi.Node, error) {
	i := skipSpace(b, 0) + 1 // past '['
	i = skipSpace(b, i)
	if i < len(b) && b[i] == ']' {
		return dst, nil
	}
	for i < len(b) {
		var k uint64
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			k = k*10 + uint64(b[i]-'0')
			i++
		}
		if i == start || i-start > 16 {
			return nil, fmt.Errorf("decode nodes: %w", errSyntax)
		}
		n := table.get(k)
		if n == nil {
			return nil, fmt.Errorf("node key %d was never defined on this instance", k)
		}
		dst = append(dst, n)
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		i = skipSpace(b, i)
		if i < len(b) && b[i] == ']' {
			return dst, nil
		}
		if i >= len(b) || b[i] != ',' {
			return nil, fmt.Errorf("decode nodes: %w", errSyntax)
		}
		i = skipSpace(b, i+1)
	}
	return nil, fmt.Errorf("decode nodes: %w", errSyntax)
}

// decodeNodeList reads "nodes" as an array of node documents (a host without the node
// table).
func decodeNodeList(b []byte, dst []*abi.Node) ([]*abi.Node, error) {
	r := reader{b: b, in: &strs}
	if r.isNull() {
		return dst, nil
	}
	err := r.array(func() error {
		r.space()
		start := r.i
		if err := r.skip(); err != nil {
			return err
		}
		doc := b[start:r.i]
		if string(doc) == "null" {
			dst = append(dst, nil)
			return nil
		}
		n, err := decodeNode(doc, &strs)
		if err != nil {
			return err
		}
		dst = append(dst, n)
		return nil
	})
	if err != nil {
		dst = dst[:0]
		if err := json.Unmarshal(b, &dst); err != nil {
			return nil, fmt.Errorf("decode nodes: %w", err)
		}
	}
	return dst, nil
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

// PackedRequest builds a packed filter/score request as the host does (ABI §7.7): the
// slots, then obj, the JSON part. Tests of handlers use it.
func PackedRequest(slots []uint32, obj string) []byte {
	b := binary.LittleEndian.AppendUint32([]byte(abi.PackedMagic), uint32(len(slots)))
	for _, s := range slots {
		b = binary.LittleEndian.AppendUint32(b, s)
	}
	return append(b, obj...)
}

// PackedHeader appends the header of a packed answer for n nodes (ABI §7.7).
func PackedHeader(dst []byte, n int) []byte {
	dst = append(dst, abi.PackedMagic...)
	return binary.LittleEndian.AppendUint32(dst, uint32(n))
}

// EncodeScoresPacked encodes a packed score answer: one little-endian int64 per node.
func EncodeScoresPacked(dst []byte, scores []int64) []byte {
	dst = PackedHeader(dst, len(scores))
	for _, s := range scores {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(s))
	}
	return dst
}

// EncodeFilterPacked encodes a packed filter answer: one byte per node (1 pass, 0 fail),
// then the non-empty reasons as a JSON object keyed by node index, if any.
func EncodeFilterPacked(dst []byte, r *abi.FilterResponse) []byte {
	dst = PackedHeader(dst, len(r.Pass))
	for _, p := range r.Pass {
		if p {
			dst = append(dst, 1)
		} else {
			dst = append(dst, 0)
		}
	}
	first := true
	for i, s := range r.Reasons {
		if s != "" {
			dst, first = AppendPackedReason(dst, first, i, s), false
		}
	}
	return ClosePackedReasons(dst, first)
}

// AppendPackedReason appends the reason of node i to a packed filter answer's reasons
// object; first is true for the object's first member.
func AppendPackedReason(dst []byte, first bool, i int, reason string) []byte {
	if first {
		dst = append(dst, '{')
	} else {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = AppendInt(dst, int64(i))
	dst = append(dst, '"', ':')
	return AppendString(dst, reason)
}

// ClosePackedReasons ends the reasons object, if AppendPackedReason began one (first is
// false).
func ClosePackedReasons(dst []byte, first bool) []byte {
	if !first {
		dst = append(dst, '}')
	}
	return dst
}
