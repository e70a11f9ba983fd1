package langs_test

import (
	"context"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm"
)

// sizes lists every example each language has, for the size report and the benchmarks.
var sizes = map[string][]string{
	"c":              {"require-labels", "label-score", "node-label-filter"},
	"assemblyscript": {"require-labels", "label-score", "node-label-filter"},
	"rust":           {"require-labels"},
	"wat":            {"require-labels"},
}

// TestModuleSizes reports (go test -v) the size of every example module and the time to
// instantiate it, _initialize it, check its version and configure it.
func TestModuleSizes(t *testing.T) {
	t.Parallel()
	for _, lang := range languages {
		t.Run(lang.Name, func(t *testing.T) {
			t.Parallel()
			r := hostRuntime(t)
			for _, ex := range sizes[lang.Name] {
				mod := lang.Build(t, ex)
				m, err := r.Compile(context.Background(), mod, "")
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				const n = 20
				for range n {
					p, err := r.Load(context.Background(), m, wasm.PluginConfig{Name: ex, Config: []byte(configs[ex]), Limits: wasm.Limits{Instances: 1}})
					if err != nil {
						t.Fatal(err)
					}
					_ = p.Close(context.Background())
				}
				t.Logf("%-15s %-18s %7d bytes, load (instantiate+configure) %v", lang.Name, ex, len(mod), time.Since(start)/n)
				_ = m.Close(context.Background())
			}
		})
	}
}

// configs are valid configurations of the examples.
var configs = map[string]string{
	"require-labels":    `{"labels":["team"]}`,
	"label-score":       `{"label":"example.com/priority"}`,
	"node-label-filter": `{"label":"pool"}`,
}

// BenchmarkLoad measures creating one configured instance of require-labels per language
// (what the pool pays for each instance it adds).
func BenchmarkLoad(b *testing.B) {
	for _, lang := range languages {
		b.Run(lang.Name, func(b *testing.B) {
			mod := lang.Build(b, "require-labels")
			r := hostRuntime(b)
			m, err := r.Compile(context.Background(), mod, "")
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close(context.Background())
			b.ReportMetric(float64(len(mod)), "module-bytes")
			for b.Loop() {
				p, err := r.Load(context.Background(), m, wasm.PluginConfig{Name: "bench", Config: []byte(configs["require-labels"]), Limits: wasm.Limits{Instances: 1}})
				if err != nil {
					b.Fatal(err)
				}
				_ = p.Close(context.Background())
			}
		})
	}
}

// BenchmarkValidate measures one validate round trip of a small pod per language.
func BenchmarkValidate(b *testing.B) {
	req := podRequest("CREATE", "Pod", `{"metadata":{"name":"web","labels":{"team":"a"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`)
	for _, lang := range languages {
		b.Run(lang.Name, func(b *testing.B) {
			p := mustLoad(b, hostRuntime(b), "bench", lang.Build(b, "require-labels"), configs["require-labels"])
			for b.Loop() {
				if resp, err := p.Validate(context.Background(), req); err != nil || !resp.Allowed {
					b.Fatal(resp, err)
				}
			}
		})
	}
}
