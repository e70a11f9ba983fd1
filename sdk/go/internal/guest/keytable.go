package guest

import "github.com/wasmplane/wasmplane/sdk/go/abi"

// keyTable maps node-table keys (ABI §7.6) to decoded nodes: an open-addressing hash
// table with linear probing. Every filter/score call resolves one key per candidate
// node, and in a Go guest a generic map lookup costs about a microsecond (5 ms per call
// over 5,000 nodes); this table's lookup is a multiply, a shift and a compare or two.
type keyTable struct {
	keys  []uint64
	nodes []*abi.Node // nil marks a free slot (a defined node is never nil)
	n     int
	shift uint
}

func (t *keyTable) slot(k uint64) int { return int((k * 0x9E3779B97F4A7C15) >> t.shift) }

func (t *keyTable) get(k uint64) *abi.Node {
	if t.n == 0 {
		return nil
	}
	mask := len(t.keys) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		n := t.nodes[i]
		if n == nil || t.keys[i] == k {
			return n
		}
	}
}

func (t *keyTable) put(k uint64, node *abi.Node) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := len(t.keys) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch {
		case t.nodes[i] == nil:
			t.keys[i], t.nodes[i] = k, node
			t.n++
			return
		case t.keys[i] == k:
			t.nodes[i] = node
			return
		}
	}
}

func (t *keyTable) grow() {
	size := 64
	for size < 4*(t.n+1) {
		size *= 2
	}
	old := *t
	t.keys, t.nodes, t.n = make([]uint64, size), make([]*abi.Node, size), 0
	t.shift = 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
	for i, n := range old.nodes {
		if n != nil {
			t.put(old.keys[i], n)
		}
	}
}

// remove deletes k, shifting later entries of its probe run back so lookups need no
// tombstones.
func (t *keyTable) remove(k uint64) {
	if t.n == 0 {
		return
	}
	mask := len(t.keys) - 1
	i := t.slot(k)
	for ; ; i = (i + 1) & mask {
		if t.nodes[i] == nil {
			return
		}
		if t.keys[i] == k {
			break
		}
	}
	for j := (i + 1) & mask; t.nodes[j] != nil; j = (j + 1) & mask {
		// Move j back into the hole at i unless its home slot lies cyclically in (i, j].
		h := t.slot(t.keys[j])
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.keys[i], t.nodes[i] = t.keys[j], t.nodes[j]
			i = j
		}
	}
	t.keys[i], t.nodes[i] = 0, nil
	t.n--
}

func (t *keyTable) reset() {
	clear(t.keys)
	clear(t.nodes)
	t.n = 0
}

func (t *keyTable) len() int { return t.n }
