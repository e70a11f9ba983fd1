package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/server"
)

// run executes the wasmplane command line in process and returns its standard output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		t.Logf("wasmplane %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("wasmplane %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// TestPluginCommands drives every `wasmplane plugin` subcommand with a WAT plugin (the
// toolchain that builds in milliseconds; plugins/wasm/toolkit's tests cover the other
// languages) against an in-process server.
func TestPluginCommands(t *testing.T) {
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("wat2wasm is not installed (run scripts/install-toolchains.sh)")
		}
		t.Skip("wat2wasm is not installed (run scripts/install-toolchains.sh)")
	}
	dir := filepath.Join(t.TempDir(), "allow-all")
	cache := t.TempDir()
	mustRun(t, "plugin", "init", dir, "--lang", "wat", "--hook", "validate")
	if _, err := run(t, "plugin", "init", dir, "--lang", "wat", "--hook", "validate"); err == nil {
		t.Error("init into a non-empty directory: want an error")
	}
	out := mustRun(t, "plugin", "build", dir)
	module := filepath.Join(dir, "allow-all.wasm")
	if !strings.HasPrefix(out, module+"\t") || !strings.Contains(out, "sha256:") {
		t.Fatalf("build printed %q", out)
	}
	req, cfg := filepath.Join(dir, "request.json"), filepath.Join(dir, "config.json")
	out = mustRun(t, "plugin", "test", module, "--hook", "validate", "--request", req, "--config", cfg, "--cache-dir", cache)
	if out != "{\n  \"allowed\": true\n}\n" {
		t.Errorf("test printed %q", out)
	}
	_, err := run(t, "plugin", "test", module, "--hook", "mutate", "--request", req, "--cache-dir", cache)
	if err == nil || !strings.HasPrefix(err.Error(), "[not-implemented]") {
		t.Errorf("test of a missing hook: %v, want the kind not-implemented first", err)
	}
	out = mustRun(t, "plugin", "bench", module, "--hook", "validate", "--request", req, "-n", "200", "-c", "2", "--cache-dir", cache)
	if !strings.HasPrefix(out, "200 calls in ") || !strings.Contains(out, "calls/s") || !strings.Contains(out, "p99") {
		t.Errorf("bench printed %q", out)
	}

	inst, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), Port: 0,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Close)
	t.Setenv("KUBECONFIG", inst.KubeconfigPath())
	digest := strings.TrimSpace(mustRun(t, "plugin", "push", module))
	if !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 {
		t.Fatalf("push printed %q", digest)
	}
	out = mustRun(t, "plugin", "apply", "allow-all", "--module", module, "--hooks", "validate", "--rules", "pods:CREATE",
		"--config", cfg, "--failure-policy", "Ignore")
	if !strings.Contains(out, "wasmplugin.wasmplane.io/allow-all created ("+digest+")") {
		t.Errorf("apply printed %q", out)
	}
	out = mustRun(t, "plugin", "apply", "allow-all-cluster", "--digest", digest, "--hooks", "validate,authenticate", "--cluster")
	if !strings.Contains(out, "clusterwasmplugin.wasmplane.io/allow-all-cluster created") {
		t.Errorf("apply --cluster printed %q", out)
	}
	if _, err := run(t, "plugin", "apply", "x", "--hooks", "validate"); err == nil {
		t.Error("apply without --module or --digest: want an error")
	}
}
