package wasm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

var admission = &abi.AdmissionRequest{
	UID: "1", Operation: "CREATE",
	Kind:     abi.GroupVersionKind{Version: "v1", Kind: "Pod"},
	Resource: abi.GroupVersionResource{Version: "v1", Resource: "pods"},
	Object:   []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`),
}

// TestFaultyPluginsAreContained runs every faulty WAT plugin: the one call fails with
// the right kind within its deadline, and the same plugin then serves 1,000 good calls.
func TestFaultyPluginsAreContained(t *testing.T) {
	const memLimit = 16 << 20
	tests := []struct {
		name string
		kind Kind
		want string // in the message
		// deadline of the call: short for the loop, generous for the others so that a
		// loaded machine (or -race) cannot turn their fault into a timeout
		deadline time.Duration
	}{
		{"loop", ErrTimeout, "deadline", 300 * time.Millisecond},
		{"membomb", ErrOutOfMemory, "memory limit", 2 * time.Second},
		{"trap", ErrTrap, "unreachable", 2 * time.Second},
		{"exit", ErrTrap, "exit_code(3)", 2 * time.Second},
		{"garbage", ErrBadOutput, "not a JSON object", 2 * time.Second},
		{"oob", ErrBadOutput, "outside memory", 2 * time.Second},
		{"huge", ErrOutputTooLarge, "limit", 2 * time.Second},
	}
	r, _ := newTestRuntime(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := load(t, r, wasmtest.WAT(t, tt.name), PluginConfig{Limits: Limits{Timeout: tt.deadline, MemoryBytes: memLimit, Instances: 1, MaxInstances: 2}})
			// The plugin's own limit must end the call, well before the caller's deadline
			// (how closely a timeout follows its deadline is BenchmarkLoopTermination's).
			callCtx, cancel := context.WithTimeout(context.Background(), tt.deadline+5*time.Second)
			defer cancel()
			start := time.Now()
			_, err := p.Validate(callCtx, admission)
			if !errors.Is(err, tt.kind) || callCtx.Err() != nil {
				t.Fatalf("err = %v (caller's deadline: %v), want kind %s before the caller's deadline", err, callCtx.Err(), tt.kind)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
			// Never early: a timeout comes at its deadline, not before.
			if elapsed := time.Since(start); tt.kind == ErrTimeout && elapsed < tt.deadline-50*time.Millisecond {
				t.Errorf("timed out after %v, before its deadline %v", elapsed, tt.deadline)
			}
			// The discarded instances are replaced ahead of need, in the background.
			waitIdle(t, p, 1)
			for i := range 1000 {
				resp, err := p.Authenticate(context.Background(), &abi.AuthenticateRequest{Method: "GET", Path: "/"})
				if err != nil || resp.Authenticated {
					t.Fatalf("good call %d after the fault: %+v, %v", i, resp, err)
				}
			}
		})
	}
}

func TestMemoryBombStopsAtLimit(t *testing.T) {
	r, _ := newTestRuntime(t)
	const limit = 8 << 20
	p := load(t, r, wasmtest.WAT(t, "membomb"), PluginConfig{Limits: Limits{MemoryBytes: limit, Instances: 1}})
	s := p.acquire()
	defer s.release(context.Background())
	deadline := time.Now().Add(time.Minute)
	in, err := s.get(context.Background(), deadline)
	if err != nil {
		t.Fatal(err)
	}
	err = in.call(context.Background(), deadline, abi.HookValidate, []byte(`{}`), func([]byte) error { return nil })
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("err = %v, want out-of-memory", err)
	}
	if got := in.mem.size(); got > limit || got < limit-(1<<20) {
		t.Errorf("memory at failure = %d bytes, want within 1 MiB under the %d limit", got, limit)
	}
	s.put(context.Background(), in, true)
}

func TestLoadRefusals(t *testing.T) {
	r, _ := newTestRuntime(t)
	ctx := context.Background()
	good := wasmtest.WAT(t, "good")
	tests := []struct {
		name   string
		wasm   []byte
		digest string
		kind   Kind
	}{
		{"wrong ABI version", wasmtest.WAT(t, "badversion"), "", ErrABIVersion},
		{"digest mismatch", good, strings.Repeat("0", 64), ErrInvalidModule},
		{"not wasm", []byte("hello"), "", ErrInvalidModule},
		{"no version export", wasmtest.WATSource(t, `(module (memory (export "memory") 1))`), "", ErrABIVersion},
		{"command module", wasmtest.WATSource(t, `(module (memory (export "memory") 1) (func (export "_start")))`), "", ErrInvalidModule},
		{"foreign import", wasmtest.WATSource(t, `(module (import "env" "f" (func)) (memory (export "memory") 1))`), "", ErrInvalidModule},
		{"bad hook signature", wasmtest.WATSource(t, `(module (memory (export "memory") 1)
			(func (export "wasmplane_abi_version") (result i32) i32.const 1)
			(func (export "wasmplane_alloc") (param i32) (result i32) i32.const 8)
			(func (export "validate") (param i32 i32) (result i32) i32.const 0))`), "", ErrInvalidModule},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := r.Compile(ctx, tt.wasm, tt.digest)
			if err == nil {
				defer m.Close(ctx)
				var p *Plugin
				p, err = r.Load(ctx, m, PluginConfig{Name: "x", Limits: Limits{Instances: 1}})
				if err == nil {
					_ = p.Close(ctx)
				}
			}
			if !errors.Is(err, tt.kind) {
				t.Fatalf("err = %v, want kind %s", err, tt.kind)
			}
			t.Log(err)
		})
	}
}

func TestNotImplementedAndClosed(t *testing.T) {
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.WAT(t, "good"), PluginConfig{Limits: Limits{Instances: 1}})
	if _, err := p.Mutate(context.Background(), admission); !errors.Is(err, ErrNotImplemented) {
		t.Fatalf("mutate: %v, want not-implemented", err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Validate(context.Background(), admission); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v, want closed", err)
	}
}

// waitIdle waits, with a deadline, until p's current instance set has n idle instances
// without any call asking for them.
func waitIdle(t *testing.T, p *Plugin, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		set := p.cur.Load()
		if set != nil && set.idleInstances() >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle instances after 10 s, want %d", set.idleInstances(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
