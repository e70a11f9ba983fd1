package wasm

import "github.com/wasmplane/wasmplane/sdk/go/abi"

// hookID numbers the hooks of ABI v1 in abi.Hooks' order. A call finds its hook's guest
// function, flag and metrics by this index rather than in maps keyed by the hook's name:
// a lone call runs with the CPU's caches cold, where each such map lookup (the map, its
// group, the key's bytes) is a few cache misses.
type hookID uint8

// numHooks is len(abi.Hooks) (TestHookIDs).
const numHooks = 7

// hookOf returns the index of the hook named name; false if ABI v1 has no such hook.
// A switch on constant strings reads nothing but name's bytes.
func hookOf(name string) (hookID, bool) {
	switch name {
	case abi.HookConfigure:
		return 0, true
	case abi.HookAuthenticate:
		return 1, true
	case abi.HookMutate:
		return 2, true
	case abi.HookValidate:
		return 3, true
	case abi.HookInitialize:
		return 4, true
	case abi.HookFilter:
		return 5, true
	case abi.HookScore:
		return 6, true
	}
	return 0, false
}

// hookSet is the set of hooks a module exports.
type hookSet [numHooks]bool

// has tells whether the set holds the hook named name.
func (s *hookSet) has(name string) bool {
	id, ok := hookOf(name)
	return ok && s[id]
}

// add puts the hook named name in the set; names outside ABI v1 are ignored.
func (s *hookSet) add(name string) {
	if id, ok := hookOf(name); ok {
		s[id] = true
	}
}
