package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

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
		resp, err := p.ValidateJSON(ctx, func(dst []byte, _ RequestForm) ([]byte, error) {
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

// TestGuestBytes checks that the instance reads its guest's memory from the buffer wazero
// runs it on: the same bytes as the module's Memory interface, the same ranges refused.
func TestGuestBytes(t *testing.T) {
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.WATSource(t, checkEndsWAT), PluginConfig{Limits: Limits{Instances: 1, MaxInstances: 1}})
	withInstance(t, p, func(in *instance) { checkGuestBytes(t, in) })
}

// withInstance runs f with one of p's instances, taken from its pool and put back.
func withInstance(t *testing.T, p *Plugin, f func(in *instance)) {
	t.Helper()
	ctx := context.Background()
	s := p.acquire()
	defer s.release(ctx)
	in, err := s.get(ctx, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer s.put(ctx, in, false)
	f(in)
}

func checkGuestBytes(t *testing.T, in *instance) {
	mem := in.mod.Memory()
	size := mem.Size()
	if !mem.WriteByte(size-1, 'z') {
		t.Fatal("cannot write the last byte")
	}
	cases := []struct{ ptr, n uint32 }{{0, 0}, {0, 16}, {100, 1}, {size - 8, 8}, {size - 1, 1}, {size, 0}, {size, 1}, {size - 4, 8}, {math.MaxUint32, 2}, {2, math.MaxUint32}}
	for _, c := range cases {
		got, ok := in.guestBytes(c.ptr, c.n)
		want, wantOK := mem.Read(c.ptr, c.n)
		switch {
		case ok != wantOK:
			t.Errorf("[%#x, +%d): in range %v, Memory says %v", c.ptr, c.n, ok, wantOK)
		case ok && (len(got) != len(want) || cap(got) != int(c.n)):
			t.Errorf("[%#x, +%d): %d bytes, capacity %d; Memory has %d", c.ptr, c.n, len(got), cap(got), len(want))
		case ok && c.n > 0 && &got[0] != &want[0]:
			t.Errorf("[%#x, +%d): not the guest's bytes", c.ptr, c.n)
		}
	}
	if b, ok := in.guestBytes(size-1, 1); !ok || b[0] != 'z' {
		t.Errorf("last byte %q, %v; want z", b, ok)
	}
}

// TestValidateObjectForm: the form in which a module's configure answer asks for objects
// (ABI §7.1) reaches ValidateJSON's build, object metadata winning over compact pods, and
// so do the request members it says it reads; reads that name no request member fail
// the load.
func TestValidateObjectForm(t *testing.T) {
	r, _ := newTestRuntime(t)
	ctx := context.Background()
	for _, tc := range []struct {
		answer  string
		want    ObjectForm
		keeps   [][]string // members the build is told are read; nil: the whole request
		drops   []string
		wantErr string
	}{
		{answer: `{}`, want: WholeObjects},
		{answer: `{"compactPods":true}`, want: CompactPods},
		{answer: `{"objectMetadata":true}`, want: ObjectMetadata},
		{answer: `{"compactPods":true,"objectMetadata":true}`, want: ObjectMetadata},
		{answer: `{"compactPods":true,"reads":["operation","object.spec.containers"]}`, want: CompactPods,
			keeps: [][]string{{"operation"}, {"object", "spec", "containers"}}, drops: []string{"uid", "userInfo", "oldObject"}},
		{answer: `{"reads":["object"]}`, want: WholeObjects, keeps: [][]string{{"object", "spec"}}, drops: []string{"operation"}},
		{answer: `{"reads":["spec.containers"]}`, wantErr: `configure answer: reads[0] "spec.containers": "spec" is not a member of a validate request`},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			// checkEndsWAT with a configure hook that answers tc.answer from its data.
			answer := strings.ReplaceAll(tc.answer, `"`, `\"`)
			src := strings.Replace(checkEndsWAT, `(data (i32.const 64)`, fmt.Sprintf(`(data (i32.const 256) "%s")
  (func (export "configure") (param i32 i32) (result i64) (i64.const %d))
  (data (i32.const 64)`, answer, 256<<32|int64(len(tc.answer))), 1)
			if tc.wantErr != "" {
				wasm := wasmtest.WATSource(t, src)
				m, err := r.Compile(ctx, wasm, Digest(wasm))
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close(ctx)
				_, err = r.Load(ctx, m, PluginConfig{Name: "bad-reads"})
				if KindOf(err) != ErrInvalidModule || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("load: %v (%v), want %v saying %q", err, KindOf(err), ErrInvalidModule, tc.wantErr)
				}
				return
			}
			p := load(t, r, wasmtest.WATSource(t, src), PluginConfig{})
			if got := p.ObjectForm(); got != tc.want {
				t.Fatalf("ObjectForm() = %v, want %v", got, tc.want)
			}
			var got RequestForm
			if _, err := p.ValidateJSON(ctx, func(dst []byte, form RequestForm) ([]byte, error) {
				got = form
				return append(dst, "{}"...), nil
			}); err != nil {
				t.Fatal(err)
			}
			if got.Objects != tc.want {
				t.Fatalf("build got %v, want %v", got.Objects, tc.want)
			}
			if tc.keeps == nil {
				if got.Members != nil {
					t.Fatalf("build got members %v for a module that declared no reads", got.Members)
				}
				return
			}
			checkKeeps(t, got.Members, tc.keeps, tc.drops)
		})
	}
}

// TestRegoShapedRequest: a recorded Rego policy that reads only what the object metadata
// document holds is asked for a request of just the members it reads (RequestForm), and
// the host passes what build wrote to the policy as it is, without projecting it again.
func TestRegoShapedRequest(t *testing.T) {
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.Rego(t, "require-labels"), PluginConfig{Config: json.RawMessage(`{"labels":["team"]}`), Limits: Limits{Instances: 1, MaxInstances: 1}})
	ctx := context.Background()
	for _, tc := range []struct {
		req     string
		allowed bool
	}{
		{`{"object":{"metadata":{"labels":{"team":"a"}}}}`, true},
		{`{"object":{"metadata":{"labels":{"owner":"a"}}}}`, false},
		{`{"object":{"metadata":{}}}`, false},
	} {
		var form RequestForm
		resp, err := p.ValidateJSON(ctx, func(dst []byte, f RequestForm) ([]byte, error) {
			form = f
			return append(dst, tc.req...), nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.req, err)
		}
		if resp.Allowed != tc.allowed {
			t.Errorf("%s: allowed %v, want %v", tc.req, resp.Allowed, tc.allowed)
		}
		if form.Objects != ObjectMetadata {
			t.Errorf("objects asked as %v, want %v", form.Objects, ObjectMetadata)
		}
		obj, ok := form.Members.Member("object")
		meta, _ := obj.Member("metadata")
		if !ok || form.Members.Keeps("spec") || form.Members.Keeps("userInfo") || !meta.Keeps("labels") || meta.Keeps("name") {
			t.Errorf("members asked %+v: want object.metadata.labels alone", form.Members)
		}
	}
	projected := func() (b []byte) {
		withInstance(t, p, func(in *instance) { b = in.opa.projected })
		return b
	}
	if b := projected(); len(b) != 0 {
		t.Errorf("the host projected a request written in the policy's shape: %s", b)
	}
	// A request the host gets whole (Call) is projected as before.
	if resp := validate(t, p, podRequest("CREATE", map[string]string{"team": "a"})); !resp.Allowed {
		t.Errorf("whole request refused: %+v", resp)
	}
	if b := projected(); string(b) != `{"object":{"metadata":{"labels":{"team":"a"}}}}` {
		t.Errorf("whole request projected to %s", b)
	}
}
