package wasm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// NodeDocument is a node serialized for plugins, once per (uid, resourceVersion): the
// compact form of ABI §7.5 eagerly, the full Node lazily. Treat it as immutable.
type NodeDocument struct {
	UID             types.UID
	Name            string
	ResourceVersion string

	key     uint64 // node-table key of the compact form; key+1 names the full form
	idx     int    // the node's dense index in its NodeCache, kept across its documents
	compact []byte
	node    *corev1.Node
	fullMu  sync.Once
	full    []byte
	fullErr error
}

// Compact returns the compact document bytes.
func (d *NodeDocument) Compact() []byte { return d.compact }

// Full returns the full Node's JSON, serializing it on first use.
func (d *NodeDocument) Full() ([]byte, error) {
	d.fullMu.Do(func() {
		d.full, d.fullErr = json.Marshal(d.node)
		if d.fullErr != nil {
			d.fullErr = fmt.Errorf("encode node %s: %w", d.Name, d.fullErr)
		}
	})
	return d.full, d.fullErr
}

// NodeCache keeps one NodeDocument per node, rebuilt only when the node's
// resourceVersion changes. It is safe for concurrent use; share one per scheduler.
type NodeCache struct {
	mu   sync.Mutex
	docs map[types.UID]*NodeDocument
	next atomic.Uint64
	// Dense node indexes: an instance's packed table is an array by index, not a map by
	// key (a map lookup per node was a sixth of a 5,000-node score call). A deleted
	// node's index is reused.
	nextIdx  int
	freeIdxs []int
}

// NewNodeCache returns an empty cache.
func NewNodeCache() *NodeCache { return &NodeCache{docs: map[types.UID]*NodeDocument{}} }

// Document returns the cached document of n, serializing it if n is new or changed.
func (c *NodeCache) Document(n *corev1.Node) (*NodeDocument, error) {
	c.mu.Lock()
	d := c.docs[n.UID]
	c.mu.Unlock()
	if d != nil && d.ResourceVersion == n.ResourceVersion {
		return d, nil
	}
	compact, err := json.Marshal(CompactNode(n))
	if err != nil {
		return nil, fmt.Errorf("encode node %s: %w", n.Name, err)
	}
	d = &NodeDocument{UID: n.UID, Name: n.Name, ResourceVersion: n.ResourceVersion, compact: compact, node: n, key: c.next.Add(2)}
	c.mu.Lock()
	switch old := c.docs[n.UID]; {
	case old == nil:
		if k := len(c.freeIdxs); k > 0 {
			d.idx, c.freeIdxs = c.freeIdxs[k-1], c.freeIdxs[:k-1]
		} else {
			d.idx, c.nextIdx = c.nextIdx, c.nextIdx+1
		}
		c.docs[n.UID] = d
	case old.ResourceVersion != n.ResourceVersion:
		d.idx = old.idx
		c.docs[n.UID] = d
	default:
		d = old
	}
	c.mu.Unlock()
	return d, nil
}

// Forget drops a deleted node's document.
func (c *NodeCache) Forget(uid types.UID) {
	c.mu.Lock()
	if d, ok := c.docs[uid]; ok {
		delete(c.docs, uid)
		c.freeIdxs = append(c.freeIdxs, d.idx)
	}
	c.mu.Unlock()
}

// Len returns the number of cached nodes.
func (c *NodeCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.docs)
}

// CompactNode reduces a Node to the fields of the compact document (ABI §7.5).
func CompactNode(n *corev1.Node) *abi.Node {
	out := &abi.Node{
		Metadata: abi.ObjectMeta{
			Name: n.Name, UID: string(n.UID), ResourceVersion: n.ResourceVersion,
			Labels: n.Labels, Annotations: n.Annotations,
		},
		Spec: abi.NodeSpec{Unschedulable: n.Spec.Unschedulable},
	}
	for _, t := range n.Spec.Taints {
		out.Spec.Taints = append(out.Spec.Taints, abi.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	out.Status.Capacity = quantities(n.Status.Capacity)
	out.Status.Allocatable = quantities(n.Status.Allocatable)
	for _, c := range n.Status.Conditions {
		out.Status.Conditions = append(out.Status.Conditions, abi.NodeCondition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason})
	}
	return out
}

// lastApplied is kubectl's copy of the applied object: as large as the pod itself and
// of no use to a scheduling decision.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// CompactPod reduces a Pod to the compact pod document of ABI §7.5: the fields abi.Pod
// declares, in the Pod's own JSON shape, without kubectl's last-applied annotation.
func CompactPod(p *corev1.Pod) (*abi.Pod, error) {
	out := &abi.Pod{
		APIVersion: "v1", Kind: "Pod",
		Metadata: abi.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: string(p.UID), ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, Annotations: p.Annotations,
		},
		Spec: abi.PodSpec{
			NodeName: p.Spec.NodeName, NodeSelector: p.Spec.NodeSelector, SchedulerName: p.Spec.SchedulerName,
			PriorityClassName: p.Spec.PriorityClassName, Priority: p.Spec.Priority,
			Containers: containers(p.Spec.Containers), InitContainers: containers(p.Spec.InitContainers),
		},
	}
	if _, ok := p.Annotations[lastApplied]; ok {
		out.Metadata.Annotations = make(map[string]string, len(p.Annotations)-1)
		for k, v := range p.Annotations {
			if k != lastApplied {
				out.Metadata.Annotations[k] = v
			}
		}
	}
	if out.Spec.Containers == nil {
		out.Spec.Containers = []abi.Container{}
	}
	for _, t := range p.Spec.Tolerations {
		out.Spec.Tolerations = append(out.Spec.Tolerations, abi.Toleration{Key: t.Key, Operator: string(t.Operator),
			Value: t.Value, Effect: string(t.Effect), TolerationSeconds: t.TolerationSeconds})
	}
	if p.Spec.Affinity != nil {
		b, err := json.Marshal(p.Spec.Affinity)
		if err != nil {
			return nil, fmt.Errorf("encode affinity of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		out.Spec.Affinity = b
	}
	return out, nil
}

func containers(cs []corev1.Container) []abi.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]abi.Container, len(cs))
	for i, c := range cs {
		out[i] = abi.Container{Name: c.Name, Image: c.Image, Resources: abi.ResourceRequirements{
			Requests: quantities(c.Resources.Requests), Limits: quantities(c.Resources.Limits)}}
	}
	return out
}

func quantities(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	m := make(map[string]string, len(l))
	for k, v := range l {
		m[string(k)] = v.String()
	}
	return m
}

// nodeTable is the host's record of the node documents one instance holds (ABI §7.6).
// With the packed framing (ABI §7.7) the guest names documents by slot: small numbers
// the host hands out densely and reuses, so the guest's table is an array.
type nodeTable struct {
	keys  map[uint64]struct{}
	byUID map[types.UID]uint64
	// pending changes of the request being built, applied only if the call succeeds
	forget     []uint64
	define     []uint64
	defUID     []types.UID
	reset      bool
	scratch    []byte
	scratchIdx []int

	packed bool
	// held is, by node index (NodeDocument.idx), the document the guest holds for the node
	// and its slot; next is the number of slots handed out.
	held []heldDoc
	next uint32
	// pending slot changes: the node indexes and slots of define, and next after it.
	defIdx  []int
	defSlot []uint32
	nextAft uint32
}

// heldDoc is the document an instance holds for one node, in a packed table.
type heldDoc struct {
	key  uint64 // 0: none (keys start at 2)
	slot uint32
}

func newNodeTable(packed bool) *nodeTable {
	if packed {
		return &nodeTable{packed: true}
	}
	return &nodeTable{keys: map[uint64]struct{}{}, byUID: map[types.UID]uint64{}}
}

func (t *nodeTable) commit() {
	if t.packed {
		t.commitPacked()
		return
	}
	if t.reset {
		clear(t.keys)
		clear(t.byUID)
	}
	for _, k := range t.forget {
		delete(t.keys, k)
	}
	for i, k := range t.define {
		t.keys[k] = struct{}{}
		t.byUID[t.defUID[i]] = k
	}
}

func (t *nodeTable) commitPacked() {
	if t.reset {
		clear(t.held)
	}
	// A forgotten document's slot went to the node's new document (buildPacked), so
	// defining the new one replaces it.
	t.next = t.nextAft
	for i, k := range t.define {
		idx := t.defIdx[i]
		if idx >= len(t.held) {
			t.held = append(t.held, make([]heldDoc, idx+1-len(t.held))...)
		}
		t.held[idx] = heldDoc{key: k, slot: t.defSlot[i]}
	}
}

// size is the number of documents the guest holds, for the reset rule of ABI §7.6; with
// slots, the slots handed out (the guest's array length).
func (t *nodeTable) size() int {
	if t.packed {
		return int(t.next)
	}
	return len(t.keys)
}

// SchedulingInput is the input of Filter and Score: one pod and a batch of nodes.
type SchedulingInput struct {
	// Pod is the pod's JSON; serialize it once per scheduling cycle and share it.
	Pod []byte
	// Nodes are the candidate nodes, from a NodeCache.
	Nodes []*NodeDocument
	// Requested (optional, parallel to Nodes) is sent to plugins that asked for it.
	Requested []abi.Resources
	// ClusterNodes (optional) is the number of nodes in the cluster. A scheduler scores a
	// different subset of the nodes for each pod; bounding the node table by the cluster
	// rather than by this request keeps those subsets from resetting it on every call.
	ClusterNodes int
}

// buildScheduling writes the filter/score request for one instance.
func buildScheduling(in *instance, si *SchedulingInput) ([]byte, error) {
	flags := in.set.flags
	b := append(in.reqBuf[:0], `{"pod":`...)
	if len(si.Pod) == 0 {
		return nil, fmt.Errorf("scheduling input has no pod")
	}
	t := in.table
	if t != nil && t.packed {
		return buildPacked(in, si)
	}
	b = append(b, si.Pod...)
	doc := func(d *NodeDocument) ([]byte, error) {
		if flags.FullNodes {
			return d.Full()
		}
		return d.compact, nil
	}
	if t == nil {
		b = append(b, `,"nodes":[`...)
		for i, d := range si.Nodes {
			if i > 0 {
				b = append(b, ',')
			}
			db, err := doc(d)
			if err != nil {
				return nil, err
			}
			b = append(b, db...)
		}
		b = append(b, ']')
	} else {
		t.forget, t.define, t.defUID = t.forget[:0], t.define[:0], t.defUID[:0]
		t.reset = t.size() > tableBound(si)
		if t.reset {
			b = append(b, `,"reset":true`...)
		}
		// Keys of this request: the compact form is key, the full form key+1.
		keyOf := func(d *NodeDocument) uint64 {
			if flags.FullNodes {
				return d.key + 1
			}
			return d.key
		}
		b = append(b, `,"define":[`...)
		first := true
		for _, d := range si.Nodes {
			k := keyOf(d)
			if !t.reset {
				if _, ok := t.keys[k]; ok {
					continue
				}
				if old, ok := t.byUID[d.UID]; ok && old != k {
					t.forget = append(t.forget, old)
				}
			}
			db, err := doc(d)
			if err != nil {
				return nil, err
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"key":`...)
			b = strconv.AppendUint(b, k, 10)
			b = append(b, `,"node":`...)
			b = append(b, db...)
			b = append(b, '}')
			t.define = append(t.define, k)
			t.defUID = append(t.defUID, d.UID)
		}
		b = append(b, ']')
		if len(t.forget) > 0 {
			b = append(b, `,"forget":[`...)
			for i, k := range t.forget {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendUint(b, k, 10)
			}
			b = append(b, ']')
		}
		b = append(b, `,"nodes":[`...)
		for i, d := range si.Nodes {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, keyOf(d), 10)
		}
		b = append(b, ']')
	}
	b, err := appendRequested(b, flags, si)
	if err != nil {
		return nil, err
	}
	b = append(b, '}')
	in.reqBuf = b
	return b, nil
}

// tableBound is the node-table size past which the host resets an instance's table
// (ABI §7.6): twice the request or the cluster, plus 1024.
func tableBound(si *SchedulingInput) int { return 2*max(len(si.Nodes), si.ClusterNodes) + 1024 }

func appendRequested(b []byte, flags abi.ConfigureResponse, si *SchedulingInput) ([]byte, error) {
	if !flags.Requested || si.Requested == nil {
		return b, nil
	}
	if len(si.Requested) != len(si.Nodes) {
		return nil, fmt.Errorf("requested has %d entries for %d nodes", len(si.Requested), len(si.Nodes))
	}
	rb, err := json.Marshal(si.Requested)
	if err != nil {
		return nil, fmt.Errorf("encode requested: %w", err)
	}
	b = append(b, `,"requested":`...)
	return append(b, rb...), nil
}

// buildPacked writes the packed filter/score request of ABI §7.7: the header, one
// little-endian uint32 slot per candidate node, then the JSON object of §7.6 without
// "nodes". Slots are planned here and recorded by commit once the call succeeds.
func buildPacked(in *instance, si *SchedulingInput) ([]byte, error) {
	flags, t := in.set.flags, in.table
	t.forget, t.define, t.defIdx, t.defSlot = t.forget[:0], t.define[:0], t.defIdx[:0], t.defSlot[:0]
	t.reset = t.size() > tableBound(si)
	t.nextAft = t.next
	if t.reset {
		t.nextAft = 0
	}
	n := len(si.Nodes)
	b := append(in.reqBuf[:0], abi.PackedMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	slots := len(b)
	b = slices.Grow(b, 4*n)[:slots+4*n]
	// Documents to define, by index into si.Nodes; written after the slot array.
	defs := t.scratchIdx[:0]
	held := t.held
	if t.reset {
		held = nil
	}
	for i, d := range si.Nodes {
		k := d.key
		if flags.FullNodes {
			k++ // the full form's key
		}
		var slot uint32
		switch {
		case d.idx < len(held) && held[d.idx].key == k:
			slot = held[d.idx].slot
			binary.LittleEndian.PutUint32(b[slots+4*i:], slot)
			continue
		case d.idx < len(held) && held[d.idx].key != 0:
			// The node changed: its new document takes the old one's slot.
			slot = held[d.idx].slot
			t.forget = append(t.forget, uint64(slot))
		default:
			slot = t.nextAft
			t.nextAft++
		}
		t.define = append(t.define, k)
		t.defIdx = append(t.defIdx, d.idx)
		t.defSlot = append(t.defSlot, slot)
		defs = append(defs, i)
		binary.LittleEndian.PutUint32(b[slots+4*i:], slot)
	}
	t.scratchIdx = defs
	b = append(b, `{"pod":`...)
	b = append(b, si.Pod...)
	if t.reset {
		b = append(b, `,"reset":true`...)
	}
	if len(t.forget) > 0 {
		b = append(b, `,"forget":[`...)
		for i, slot := range t.forget { // in a packed table, forget lists slots
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, slot, 10)
		}
		b = append(b, ']')
	}
	if len(defs) > 0 {
		b = append(b, `,"define":[`...)
		for j, i := range defs {
			d := si.Nodes[i]
			db := d.compact
			if flags.FullNodes {
				var err error
				if db, err = d.Full(); err != nil {
					return nil, err
				}
			}
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"key":`...)
			b = strconv.AppendUint(b, uint64(t.defSlot[j]), 10)
			b = append(b, `,"node":`...)
			b = append(b, db...)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b, err := appendRequested(b, flags, si)
	if err != nil {
		return nil, err
	}
	b = append(b, '}')
	in.reqBuf = b
	return b, nil
}
