package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagUsagesHaveNoBackquotes guards `--help`: pflag takes a backquoted word of a usage
// string as the flag's value name, so "run `wasmplane agent` elsewhere" on a bool flag
// printed `--disable-kubelet wasmplane agent`.
func TestFlagUsagesHaveNoBackquotes(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				name, _ := pflag.UnquoteUsage(f)
				t.Errorf("%s --%s: usage %q has backquotes (help shows the value name %q)", c.CommandPath(), f.Name, f.Usage, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}

// TestUpRejectsBadMemoryLimit: a --memory-limit that is not a positive quantity stops
// `up` before anything starts.
func TestUpRejectsBadMemoryLimit(t *testing.T) {
	for _, v := range []string{"bogus", "0", "-1Gi"} {
		cmd := newUp()
		cmd.SetArgs([]string{"--memory-limit", v, "--data-dir", t.TempDir()})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--memory-limit") {
			t.Errorf("--memory-limit %s: got %v, want an error naming the flag", v, err)
		}
	}
}

// TestUpRejectsBadTLSFlags: an unknown TLS version or cipher suite name stops `up` before
// anything starts, with kube-apiserver's wording and the flag's name.
func TestUpRejectsBadTLSFlags(t *testing.T) {
	for _, c := range []struct{ flag, value, want string }{
		{"--tls-min-version", "VersionTLS99", `--tls-min-version: unknown tls version "VersionTLS99"`},
		{"--tls-cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_BOGUS", "--tls-cipher-suites: Cipher suite TLS_BOGUS not supported or doesn't exist"},
	} {
		cmd := newUp()
		cmd.SetArgs([]string{c.flag, c.value, "--data-dir", t.TempDir(), "--port", "0", "--disable-kubelet"})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err == nil || err.Error() != c.want {
			t.Errorf("%s %s: got %v, want %q", c.flag, c.value, err, c.want)
		}
	}
}

// TestCallBoundFlags: both processes that run plugins, `up` and the standalone
// `scheduler`, take the WASM host's call bounds.
func TestCallBoundFlags(t *testing.T) {
	for _, cmd := range []*cobra.Command{newUp(), newScheduler()} {
		f := cmd.Flags()
		if err := f.Parse([]string{"--wasm-max-concurrent-calls", "3", "--wasm-max-concurrent-calls-per-plugin", "2", "--wasm-suspend-after", "-1"}); err != nil {
			t.Errorf("%s: %v", cmd.Name(), err)
			continue
		}
		for name, want := range map[string]string{"wasm-max-concurrent-calls": "3", "wasm-max-concurrent-calls-per-plugin": "2", "wasm-suspend-after": "-1",
			"wasm-suspend-for": "2s", "wasm-max-suspension": "1m0s"} {
			if got := f.Lookup(name); got == nil || got.Value.String() != want {
				t.Errorf("%s --%s = %v, want %s", cmd.Name(), name, got, want)
			}
		}
	}
}
