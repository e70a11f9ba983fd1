package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/toolchain"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// slowBuild are the languages whose `plugin build` compiles the SDK with the program
// (standard Go for wasip1, cargo, the AssemblyScript compiler under node): -short leaves
// them out; C, WAT and Rego build in seconds.
var slowBuild = map[toolkit.Lang]bool{toolkit.Go: true, toolkit.Rust: true, toolkit.AssemblyScript: true}

// TestPluginInitAnywhere is what a user does with the binary alone: in an empty directory
// outside any wasmplane checkout, `plugin init`, `plugin build`, `plugin test`, in every
// language whose toolchain is installed (`plugin doctor` says which). Go always runs.
func TestPluginInitAnywhere(t *testing.T) {
	root, work := wasmtest.ModuleRoot(t), t.TempDir()
	t.Chdir(work)
	t.Setenv("WASMPLANE_SDK", "")
	if strings.HasPrefix(work, root+string(filepath.Separator)) {
		t.Fatalf("the temp dir %s is inside the checkout %s", work, root)
	}
	status := map[toolchain.Language]toolchain.Status{}
	for _, st := range toolchain.DefaultEnv().Doctor(context.Background()) {
		status[st.Lang] = st
	}
	denied := "{\n  \"allowed\": false,\n  \"code\": 403,\n  \"reason\": \"Forbidden\",\n  \"message\": \"label \\\"team\\\" is required\"\n}\n"
	for _, lang := range toolkit.Langs() {
		t.Run(string(lang), func(t *testing.T) {
			if testing.Short() && slowBuild[lang] {
				t.Skip("slow: compiles the plugin and its SDK with the " + string(lang) + " toolchain (a minute on 2 cores); runs without -short")
			}
			if st := status[toolchain.Language(lang)]; !st.OK {
				if lang == toolkit.Go {
					t.Fatalf("go: %s missing", strings.Join(st.Missing, ", "))
				}
				wasmtest.Need(t, false, string(lang)+" toolchain ("+strings.Join(st.Missing, ", ")+"; see wasmplane plugin doctor)")
			}
			name := "team-" + string(lang)
			mustRun(t, "plugin", "init", name, "--lang", string(lang), "--hook", "validate")
			if lang == toolkit.AssemblyScript {
				wasmtest.LinkASCompiler(t, root, name)
			}
			out := mustRun(t, "plugin", "build", name)
			module := filepath.Join(work, name, name+".wasm")
			if !strings.HasPrefix(out, module+"\t") {
				t.Fatalf("build printed %q", out)
			}
			out = mustRun(t, "plugin", "test", module, "--hook", "validate", "--request", filepath.Join(name, "request.json"),
				"--config", filepath.Join(name, "config.json"), "--cache-dir", "")
			want := denied
			if lang == toolkit.WAT {
				want = "{\n  \"allowed\": true\n}\n" // the WAT skeleton answers a fixed document
			}
			if out != want {
				t.Errorf("test printed %q, want %q", out, want)
			}
			if b, err := os.ReadFile(filepath.Join(name, "go.mod")); err == nil && !strings.Contains(string(b), "=> ./"+toolkit.VendorDir) {
				t.Errorf("go.mod does not use the SDK copied into the project:\n%s", b)
			}
		})
	}
}
