package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"github.com/wasmplane/wasmplane/core/admission/plugins"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The flags of the ceilings whose values are byte quantities.
const (
	flagCeilingMemory = "namespaced-plugin-max-memory"
	flagCeilingInput  = "namespaced-plugin-max-input-bytes"
	flagCeilingOutput = "namespaced-plugin-max-output-bytes"
)

// addCeilingFlags registers the cluster's ceilings for namespaced WasmPlugins; the byte
// quantities are read by parseCeilingFlags.
func addCeilingFlags(f *pflag.FlagSet, c *plugins.PluginCeilings) {
	const note = " of a namespaced WasmPlugin (-1: no ceiling)"
	f.DurationVar(&c.Timeout, "namespaced-plugin-max-timeout", plugins.DefaultCeilingTimeout, "largest spec.limits.timeout of a namespaced WasmPlugin (-1s: no ceiling)")
	f.Int32Var(&c.MaxInstances, "namespaced-plugin-max-instances", plugins.DefaultCeilingMaxInstances, "largest spec.limits.maxInstances"+note)
	f.IntVar(&c.PluginsPerNamespace, "namespaced-plugins-per-namespace", plugins.DefaultCeilingPlugins, "most WasmPlugins one namespace may hold (-1: no ceiling)")
	f.String(flagCeilingMemory, quantity(plugins.DefaultCeilingMemoryBytes), "largest memory per instance (spec.limits.memoryPages × 64Ki)"+note)
	f.String(flagCeilingInput, quantity(plugins.DefaultCeilingMaxInputBytes), "largest spec.limits.maxInputBytes"+note)
	f.String(flagCeilingOutput, quantity(plugins.DefaultCeilingMaxOutputBytes), "largest spec.limits.maxOutputBytes"+note)
}

// addCallBoundFlags registers the WASM host's protections against its guests.
func addCallBoundFlags(f *pflag.FlagSet, b *wasm.CallBounds) {
	f.IntVar(&b.MaxConcurrentCalls, "wasm-max-concurrent-calls", 0, "plugin calls running guest code at once, across all plugins (0: GOMAXPROCS)")
	f.IntVar(&b.MaxConcurrentCallsPerPlugin, "wasm-max-concurrent-calls-per-plugin", 0, "calls of one plugin running guest code at once (0: the above minus one, at least 1, for admission plugins; the above for scheduling plugins, which run one at a time)")
	f.IntVar(&b.SuspendAfter, "wasm-suspend-after", wasm.DefaultSuspendAfter, "calls of a plugin in a row that may run out of time or memory before its calls are suspended (-1: never)")
	f.DurationVar(&b.SuspendFor, "wasm-suspend-for", wasm.DefaultSuspendFor, "first suspension of such a plugin; doubled after each failed probe")
	f.DurationVar(&b.MaxSuspension, "wasm-max-suspension", wasm.DefaultMaxSuspension, "longest suspension")
}

func quantity(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// parseCeilingFlags reads the byte-quantity ceilings into c.
func parseCeilingFlags(f *pflag.FlagSet, c *plugins.PluginCeilings) error {
	for _, b := range []struct {
		flag string
		into *int64
	}{{flagCeilingMemory, &c.MemoryBytes}, {flagCeilingInput, &c.MaxInputBytes}, {flagCeilingOutput, &c.MaxOutputBytes}} {
		v, err := f.GetString(b.flag)
		if err != nil {
			return err
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("--%s %q: want a quantity such as 64Mi, or -1: %w", b.flag, v, err)
		}
		if *b.into = q.Value(); *b.into == 0 {
			return fmt.Errorf("--%s: 0 would refuse every plugin; give -1 for no ceiling", b.flag)
		}
	}
	return nil
}
