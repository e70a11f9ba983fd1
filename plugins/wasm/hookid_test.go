package wasm

import (
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

func TestHookIDs(t *testing.T) {
	if len(abi.Hooks) != numHooks {
		t.Fatalf("numHooks is %d, ABI v1 has %d hooks", numHooks, len(abi.Hooks))
	}
	for i, h := range abi.Hooks {
		id, ok := hookOf(h)
		if !ok || int(id) != i {
			t.Errorf("hookOf(%q) = %d, %v; want %d, true", h, id, ok, i)
		}
	}
	for _, name := range []string{"", "Validate", "validat", "validatee", "opa_eval", abi.ExportAlloc} {
		if id, ok := hookOf(name); ok {
			t.Errorf("hookOf(%q) = %d, true; want false", name, id)
		}
	}
	var s hookSet
	s.add(abi.HookValidate)
	s.add("not-a-hook")
	for _, h := range abi.Hooks {
		if got, want := s.has(h), h == abi.HookValidate; got != want {
			t.Errorf("has(%q) = %v; want %v", h, got, want)
		}
	}
	if s.has("not-a-hook") {
		t.Error(`has("not-a-hook") = true`)
	}
}
