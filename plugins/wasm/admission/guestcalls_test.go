package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	wasmadmission "github.com/wasmplane/wasmplane/plugins/wasm/admission"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// BenchmarkGuestCalls counts the guest's function calls in one validating call on a pod
// create (the require-labels example in C, standard Go, Rust, AssemblyScript and Rego, as
// the server calls it): guest-calls/op is every call, guest-funcs the distinct functions run.
// With the caches cold, as in the API server, what a call costs follows how much guest
// code it runs, so this is the guest's side of BenchmarkValidateShares' cold figures,
// counted instead of timed. The module is compiled with a function listener (no
// compilation cache), which makes its calls slower: only the counts are reported.
func BenchmarkGuestCalls(b *testing.B) {
	for _, m := range []struct {
		lang  string
		build func(tb testing.TB) []byte
	}{
		{"c", func(tb testing.TB) []byte { return wasmtest.C(tb, "require-labels") }},
		{"go", func(tb testing.TB) []byte { return wasmtest.Go(tb, "examples/plugins/go/require-labels") }},
		{"rust", func(tb testing.TB) []byte { return wasmtest.Rust(tb, "require-labels") }},
		{"assemblyscript", func(tb testing.TB) []byte { return wasmtest.AssemblyScript(tb, "require-labels") }},
		{"rego", func(tb testing.TB) []byte { return wasmtest.Rego(tb, "require-labels") }},
	} {
		b.Run(m.lang, func(b *testing.B) {
			c := &callCounter{funcs: map[uint32]bool{}}
			ctx := experimental.WithFunctionListenerFactory(context.Background(), c)
			r, err := wasm.NewRuntime(ctx, wasm.RuntimeConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = r.Close(ctx) }()
			mod := m.build(b)
			cm, err := r.Compile(ctx, mod, wasm.Digest(mod))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = cm.Close(ctx) }()
			wp, err := r.Load(ctx, cm, wasm.PluginConfig{Name: "calls", Config: json.RawMessage(`{"labels":["team"]}`), Limits: wasm.Limits{Instances: 1, MaxInstances: 1}})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = wp.Close(ctx) }()
			p := &wasmadmission.Plugin{PluginName: "ns/calls", Caller: wp}
			a := serverPodAttrs()
			if err := p.Validate(ctx, a); err != nil { // the first call allocates the input buffer
				b.Fatal(err)
			}
			c.count(true)
			b.ResetTimer()
			for range b.N {
				if err := p.Validate(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
			calls, funcs := c.count(false)
			b.Logf("%s: calls per function over %d validating calls: %s", m.lang, b.N, c.byName())
			b.ReportMetric(float64(calls)/float64(b.N), "guest-calls/op")
			b.ReportMetric(float64(funcs), "guest-funcs")
		})
	}
}

// callCounter is a function listener that counts the calls of guest functions while on.
type callCounter struct {
	mu    sync.Mutex
	on    bool
	calls int
	funcs map[uint32]bool
	names map[string]int // calls per function name, for -v
}

// count turns counting on or off and returns the calls and distinct functions so far.
func (c *callCounter) count(on bool) (calls, funcs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = on
	return c.calls, len(c.funcs)
}

// byName lists the functions called while counting, the most called first.
func (c *callCounter) byName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.names))
	for n := range c.names {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if c.names[names[i]] != c.names[names[j]] {
			return c.names[names[i]] > c.names[names[j]]
		}
		return names[i] < names[j]
	})
	var sb strings.Builder
	for _, n := range names {
		fmt.Fprintf(&sb, "\n\t%6d %s", c.names[n], n)
	}
	return sb.String()
}

func (c *callCounter) NewFunctionListener(api.FunctionDefinition) experimental.FunctionListener {
	return c
}

func (c *callCounter) Before(_ context.Context, _ api.Module, def api.FunctionDefinition, _ []uint64, _ experimental.StackIterator) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on && def.GoFunction() == nil { // guest code only, not the host's functions
		c.calls++
		c.funcs[def.Index()] = true
		if c.names == nil {
			c.names = map[string]int{}
		}
		c.names[def.DebugName()]++
	}
}

func (c *callCounter) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}

func (c *callCounter) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}
