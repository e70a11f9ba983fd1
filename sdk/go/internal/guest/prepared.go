package guest

import "github.com/wasmplane/wasmplane/sdk/go/abi"

// Prepared keeps a value computed from a node alone (its parsed label, say) with the
// node's slot, so a plugin's per-pod loop reads it instead of recomputing it for every
// pod. A value is recomputed when its slot holds another decoded node: the host defines
// a changed node as a new document, which the guest decodes into a new *abi.Node, and
// the cache holds the old pointer, so an address is never reused while it is compared.
type Prepared[T any] struct {
	fn    func(*abi.Node) T
	nodes []*abi.Node
	vals  []T
}

// NewPrepared returns an empty cache of fn's results.
func NewPrepared[T any](fn func(*abi.Node) T) *Prepared[T] { return &Prepared[T]{fn: fn} }

// Get returns fn of the i-th node of s: cached by slot for a packed request, computed
// afresh otherwise (a request without slots has no stable node identity). The cached
// case is small enough to inline into a plugin's per-node loop.
func (p *Prepared[T]) Get(s *Scheduling, i int) T {
	if s.Slots != nil {
		if k := int(s.Slots[i]); k < len(p.nodes) && p.nodes[k] == s.Req.Nodes[i] {
			return p.vals[k]
		}
	}
	return p.miss(s, i)
}

func (p *Prepared[T]) miss(s *Scheduling, i int) T {
	n := s.Req.Nodes[i]
	if s.Slots == nil {
		return p.fn(n)
	}
	return p.missAt(s.Slots[i], n)
}

// At returns fn of node n in slot k (a request decoded by DecodeSlots), cached by slot
// as Get does; small enough to inline into a plugin's per-node loop.
func (p *Prepared[T]) At(k uint32, n *abi.Node) T {
	if int(k) < len(p.nodes) && p.nodes[k] == n {
		return p.vals[k]
	}
	return p.missAt(k, n)
}

func (p *Prepared[T]) missAt(k uint32, n *abi.Node) T {
	if int(k) >= len(p.nodes) {
		size := max(int(k)+1, len(slotNodes))
		p.nodes = append(p.nodes, make([]*abi.Node, size-len(p.nodes))...)
		p.vals = append(p.vals, make([]T, size-len(p.vals))...)
	}
	p.vals[k], p.nodes[k] = p.fn(n), n
	return p.vals[k]
}
