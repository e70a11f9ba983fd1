package wasm

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// checkEndsWAT allows a request whose first byte is '{' and whose last is '}', and denies
// any other: what it answers shows what reached guest memory.
const checkEndsWAT = `(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (func (export "wasmplane_abi_version") (result i32) (i32.const 1))
  (func (export "wasmplane_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (i32.mul (memory.size) (i32.const 65536))) (i32.const 16)) (i32.const 1)))
                    (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))
  (data (i32.const 64) "{\"allowed\":true}")
  (data (i32.const 128) "{\"allowed\":false}")
  (func (export "validate") (param $p i32) (param $n i32) (result i64)
    (if (result i64)
      (i32.and
        (i32.eq (i32.load8_u (local.get $p)) (i32.const 123))
        (i32.eq (i32.load8_u (i32.sub (i32.add (local.get $p) (local.get $n)) (i32.const 1))) (i32.const 125)))
      (then (i64.const 274877906960))     ;; 64<<32 | 16
      (else (i64.const 549755813905))))   ;; 128<<32 | 17
)`

// TestValidateJSONInPlace: ValidateJSON hands build the instance's input buffer in guest
// memory once it has one; a request written there reaches the guest without a copy, one
// that outgrows it is copied into a larger buffer, and the guest reads each whole.
func TestValidateJSONInPlace(t *testing.T) {
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.WATSource(t, checkEndsWAT), PluginConfig{Limits: Limits{Instances: 1, MaxInstances: 1}})
	ctx := context.Background()
	steps := []struct {
		name    string
		size    int
		last    byte
		wantDst int // the least capacity of dst (0: nil, before the first call)
		allowed bool
	}{
		{name: "first call: no buffer yet", size: 100, last: '}', wantDst: 0, allowed: true},
		{name: "fits the buffer", size: 3000, last: '}', wantDst: inputAlign, allowed: true},
		{name: "guest sees the bytes written in place", size: 200, last: 'x', wantDst: inputAlign, allowed: false},
		{name: "outgrows the buffer", size: 50_000, last: '}', wantDst: inputAlign, allowed: true},
		{name: "fits the larger buffer", size: 40_000, last: '}', wantDst: 50_000, allowed: true},
		{name: "smaller again", size: 10, last: '}', wantDst: 50_000, allowed: true},
	}
	for _, st := range steps {
		var gotCap int
		var gotNil bool
		resp, err := p.ValidateJSON(ctx, func(dst []byte, compact bool) ([]byte, error) {
			gotNil, gotCap = dst == nil, cap(dst)
			if len(dst) != 0 {
				t.Fatalf("%s: dst has %d bytes, want none", st.name, len(dst))
			}
			dst = append(dst, '{')
			dst = append(dst, strings.Repeat(" ", st.size-2)...)
			return append(dst, st.last), nil
		})
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if resp.Allowed != st.allowed {
			t.Errorf("%s: allowed %v, want %v", st.name, resp.Allowed, st.allowed)
		}
		switch {
		case st.wantDst == 0 && !gotNil:
			t.Errorf("%s: dst has capacity %d, want nil", st.name, gotCap)
		case st.wantDst > 0 && gotCap < st.wantDst:
			t.Errorf("%s: dst has capacity %d, want at least %d", st.name, gotCap, st.wantDst)
		}
	}
}
