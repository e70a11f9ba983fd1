package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// crictlPath finds crictl: on PATH, else where scripts/critest.sh leaves it
// ($WASMPLANE_TOOLS_CACHE, default ~/.cache/wasmplane-tools). Without it the test is
// skipped, unless CI is set: then it is built there as critest.sh builds it (critest.sh,
// run later by .ci/run, reuses it).
func crictlPath(t *testing.T, root string) string {
	t.Helper()
	if p, err := exec.LookPath("crictl"); err == nil {
		return p
	}
	cache := os.Getenv("WASMPLANE_TOOLS_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, ".cache", "wasmplane-tools")
	}
	p := filepath.Join(cache, "crictl")
	if isExecutable(p) {
		return p
	}
	if os.Getenv("CI") == "" {
		t.Skipf("crictl is not installed (scripts/critest.sh builds it into %s)", cache)
	}
	cmd := exec.Command("go", "build", "-o", p, "sigs.k8s.io/cri-tools/cmd/crictl")
	cmd.Dir, cmd.Env = filepath.Join(root, "tools", "critest"), append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building crictl as scripts/critest.sh does: %v\n%s", err, out)
	}
	return p
}

// TestCRIPage runs the "Running it" section of docs/cri-conformance.md — `wasmplane
// runtime` alone, image import, and the crictl walk-through — as written, except that
// /tmp/wp (the page's scratch directory) is a temp dir. Its "critest" section is run by
// .ci/run (scripts/critest.sh); TestRuntimePagesNameWhatTestsRun checks that.
func TestCRIPage(t *testing.T) {
	root := wasmtest.ModuleRoot(t)
	crictl := crictlPath(t, root)
	md, err := os.ReadFile(filepath.Join(root, "docs", "cri-conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	sh, blocks, err := script(string(md), "Running it")
	if err != nil || blocks < 2 {
		t.Fatalf("docs/cri-conformance.md: %d sh blocks in \"Running it\", %v", blocks, err)
	}
	// A short path: unix socket paths are limited to 108 bytes.
	scratch, err := os.MkdirTemp("", "wp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(scratch) })
	sh = strings.ReplaceAll(sh, "/tmp/wp", scratch)
	ws := workspace(t, root)
	env := environment(t, ws)
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + filepath.Dir(crictl) + string(os.PathListSeparator) + strings.TrimPrefix(kv, "PATH=")
		}
	}
	start := time.Now()
	out, err := run(t, ws, env, 4*time.Minute, "set -e\n"+sh)
	t.Logf("docs/cri-conformance.md: %d sh blocks in %v", blocks, time.Since(start).Round(time.Millisecond))
	if err != nil || testing.Verbose() {
		t.Logf("output:\n%s", out)
	}
	if err != nil {
		t.Fatalf("a command failed: %v (the script:\n%s)", err, sh)
	}
}

// runnerFiles are what runs the sh blocks that TestDocs and TestCRIPage do not: the pages
// that need root and containerd (docs/containerd.md) and the long conformance run
// (docs/cri-conformance.md's critest section). Each of their commands must be one these
// files run — the same program, subcommands and flags (values, paths and comments differ:
// the tests use temp dirs).
var runnerFiles = map[string][]string{
	"docs/containerd.md":      {"tests/e2e/containerd_test.go", "tests/e2e/harness_test.go", "scripts/install-toolchains.sh"},
	"docs/cri-conformance.md": {".ci/run", "scripts/critest.sh"},
}

// wordRE is a subcommand or flag of a command line; other words are values (paths,
// names, URLs, variables).
var wordRE = regexp.MustCompile(`^(-{1,2}[a-z][a-z-]*|[a-z][a-z-]*)$`)

// TestRuntimePagesNameWhatTestsRun checks that every command of docs/containerd.md (all
// its sh blocks need root and containerd: tests/e2e's TestContainerd runs them with a
// config of its own, and scripts/install-toolchains.sh installs containerd in CI) and of
// docs/cri-conformance.md's critest section (scripts/critest.sh, run by .ci/run) is one
// those files run. A scripts/… command must exist and be run by one of them; for any
// other command, its program and each subcommand and flag must appear quoted ("images",
// "--all-platforms") in them.
func TestRuntimePagesNameWhatTestsRun(t *testing.T) {
	root := wasmtest.ModuleRoot(t)
	for page, runners := range runnerFiles {
		md, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		section := ""
		if page == "docs/cri-conformance.md" {
			section = "critest" // "Running it" is run by TestCRIPage
		}
		sh, blocks, err := script(string(md), section)
		if err != nil || blocks == 0 {
			t.Fatalf("%s: %d sh blocks, %v", page, blocks, err)
		}
		var src strings.Builder
		for _, f := range runners {
			b, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
		text := src.String()
		for _, line := range strings.Split(sh, "\n") {
			if i := strings.Index(line, "#"); i >= 0 {
				line = line[:i]
			}
			words := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), "&"))
			// Leading VAR=value assignments are the environment of the command.
			for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
				if name := strings.SplitN(words[0], "=", 2)[0]; !strings.Contains(text, name) {
					t.Errorf("%s: %q: %s is read by none of %v", page, line, name, runners)
				}
				words = words[1:]
			}
			if len(words) == 0 {
				continue
			}
			if words[0] == "bash" && len(words) > 1 {
				words = words[1:]
			}
			if strings.HasPrefix(words[0], "scripts/") {
				if _, err := os.Stat(filepath.Join(root, words[0])); err != nil {
					t.Errorf("%s: %q: %v", page, line, err)
				}
				if base := filepath.Base(words[0]); !strings.Contains(text, base) {
					t.Errorf("%s: %q: none of %v runs %s", page, line, runners, base)
				}
				continue
			}
			for i, w := range words {
				w = strings.SplitN(w, "=", 2)[0]
				if i > 0 && !wordRE.MatchString(w) {
					continue // a value
				}
				if i == 0 && w == "wasmplane" {
					continue // the harness runs the binary it built
				}
				if !strings.Contains(text, `"`+w+`"`) && !strings.Contains(text, `"`+w+`=`) {
					t.Errorf("%s: %q: %q appears in none of %v, so no test runs this command", page, line, w, runners)
				}
			}
		}
	}
}
