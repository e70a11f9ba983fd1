// Package docs runs the commands of the user documentation against a real `wasmplane up`,
// so that the docs cannot rot.
//
// The convention, for README.md's "Try it" section and every page listed in pages:
//
//   - A fenced block tagged ```sh is run. The blocks of one page are joined, in order,
//     into one bash script run with `set -e` (no pipefail: `cmd 2>&1 | grep MSG` checks
//     that cmd failed with MSG, as a reader would look for MSG).
//   - Blocks tagged ```console, ```text, ```yaml, ```go and so on are shown, not run
//     (output, file contents, and commands that need another machine or tool).
//   - The test itself starts the server a page assumes, as `wasmplane up --data-dir
//     .wasmplane`, but on a free port, and puts the `wasmplane` it built first on PATH
//     (and as ./wasmplane). So these lines of a sh block are skipped: building the binary
//     (`go build -o wasmplane ./cmd/wasmplane`), starting that server (`wasmplane up
//     --data-dir .wasmplane &`, also as ./wasmplane) and `export
//     KUBECONFIG=[$PWD/].wasmplane/admin.kubeconfig` (set to the server's admin kubeconfig;
//     an export of another kubeconfig, a tenant's, runs). Every other line runs as
//     written, other servers too.
//   - A page may name "## " sections that are left out because another test runs them
//     (see pages).
//
// The pages run one after another in one scratch directory that links the checkout's
// top-level entries (so `./examples/…` and `sdk/` resolve) and holds the data dir
// `.wasmplane` and whatever the pages write. Background processes a page starts (`… &`)
// are killed when the page ends.
//
// The other pages with commands are run by the other tests here: TestCRIPage (the crictl
// walk-through of docs/cri-conformance.md), TestRuntimePagesNameWhatTestsRun (the
// commands that need root and containerd, or critest, must be what tests/e2e and
// scripts/critest.sh run), TestPerformanceCommandsExist (every benchmark command of
// docs/performance.md and docs/wasm-performance.md names a package, benchmark and flags that
// exist) and TestPerformanceCommands (runs them at small sizes: a slice in CI, all of them
// with WASMPLANE_PERF_COMMANDS=all). docs/architecture.md
// has no commands.
package docs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
)

// wasmplaneBin is the binary TestMain builds once.
var wasmplaneBin string

func TestMain(m *testing.M) {
	os.Exit(testserver.RunWithBinary(m, "github.com/wasmplane/wasmplane/cmd/wasmplane", &wasmplaneBin))
}

// page is a document whose sh blocks run; section limits it to one "## " section (README.md),
// exclude leaves out sections a test of their own runs.
type page struct {
	path, section string
	exclude       []string
	timeout       time.Duration
}

// pages are run in this order on one server.
var pages = []page{
	{path: "README.md", section: "Try it", timeout: 3 * time.Minute},
	{path: "docs/plugins/README.md", timeout: time.Minute},
	{path: "docs/plugins/go.md", timeout: 2 * time.Minute},
	{path: "docs/plugins/c.md", timeout: time.Minute},
	{path: "docs/plugins/assemblyscript.md", timeout: 2 * time.Minute},
	{path: "docs/plugins/rust.md", timeout: 2 * time.Minute},
	// tests/e2e's TestDistributed runs the HA recipe (fixed ports, many processes).
	{path: "docs/operations.md", exclude: []string{"High availability on one machine"}, timeout: 2 * time.Minute},
	{path: "docs/troubleshooting.md", timeout: 2 * time.Minute},
	{path: "docs/security.md", timeout: time.Minute},
	{path: "docs/multi-tenancy.md", timeout: 2 * time.Minute},
	{path: "docs/services.md", timeout: time.Minute},
}

// skipped are the lines the test performs itself (see the package comment).
var skipped = []*regexp.Regexp{
	regexp.MustCompile(`^go build -o wasmplane \./cmd/wasmplane\s*(#.*)?$`),
	regexp.MustCompile(`^(\./)?wasmplane up --data-dir \.wasmplane\s*&\s*(#.*)?$`),
	regexp.MustCompile(`^export KUBECONFIG=(\$PWD/)?\.wasmplane/admin\.kubeconfig(\s|$)`),
}

var fence = regexp.MustCompile("^\\s*```+\\s*([A-Za-z0-9_-]*)")

// script extracts the sh blocks of a markdown text (of one "## " section when section is
// set, without the "## " sections in exclude) as one script, and reports how many blocks
// it found.
func script(md, section string, exclude ...string) (string, int, error) {
	var out strings.Builder
	blocks := 0
	in, inSection, run := false, section == "", false
	sc := bufio.NewScanner(strings.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := fence.FindStringSubmatch(line); m != nil {
			if !in {
				in, run = true, m[1] == "sh" && inSection
				if run {
					blocks++
					fmt.Fprintf(&out, "# --- line %d\n", n)
				}
			} else {
				in = false
			}
			continue
		}
		if in {
			if run {
				if skip(line) {
					line = ": skipped by the doc test: " + strconv.Quote(line)
				}
				out.WriteString(line + "\n")
			}
			continue
		}
		if strings.HasPrefix(line, "## ") {
			title := strings.TrimSpace(strings.TrimPrefix(line, "## "))
			inSection = (section == "" || title == section) && !slices.Contains(exclude, title)
		}
	}
	if in {
		return "", 0, fmt.Errorf("an unclosed code block")
	}
	return out.String(), blocks, sc.Err()
}

func skip(line string) bool {
	l := strings.TrimSpace(line)
	for _, re := range skipped {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// TestDocs runs the sh blocks of every page against one `wasmplane up`.
func TestDocs(t *testing.T) {
	root := wasmtest.ModuleRoot(t)
	ws := workspace(t, root)
	env := environment(t, ws)
	startUp(t, ws, env)
	// The node must be Ready before the first pod, as a reader would see in up's output.
	if out, err := run(t, ws, env, time.Minute, "wasmplane kubectl wait --for=condition=Ready node --all --timeout=60s"); err != nil {
		t.Fatalf("waiting for the node: %v\n%s", err, out)
	}
	for _, p := range pages {
		ok := t.Run(strings.ReplaceAll(p.path, "/", "_"), func(t *testing.T) {
			md, err := os.ReadFile(filepath.Join(root, p.path))
			if err != nil {
				t.Fatal(err)
			}
			sh, blocks, err := script(string(md), p.section, p.exclude...)
			if err != nil {
				t.Fatalf("%s: %v", p.path, err)
			}
			if blocks == 0 {
				t.Fatalf("%s has no ```sh block to run", p.path)
			}
			start := time.Now()
			out, err := run(t, ws, env, p.timeout, "set -e\n"+sh)
			t.Logf("%s: %d sh blocks in %v", p.path, blocks, time.Since(start).Round(time.Millisecond))
			if err != nil || testing.Verbose() {
				t.Logf("output of %s:\n%s", p.path, out)
			}
			if err != nil {
				t.Fatalf("%s: a command failed: %v (the last line of the output above is the command's; the script:\n%s)", p.path, err, sh)
			}
		})
		if !ok {
			break // later pages build on earlier ones
		}
	}
}

func TestScriptExtraction(t *testing.T) {
	md := "# T\n```sh\necho top\n```\n## Try it\ntext\n```sh\ngo build -o wasmplane ./cmd/wasmplane\n./wasmplane up --data-dir .wasmplane &   # start\n" +
		"export KUBECONFIG=$PWD/.wasmplane/admin.kubeconfig\necho one\n```\n```console\necho no\n```\n## Other\n```sh\necho other\n```\n"
	sh, n, err := script(md, "Try it")
	if err != nil || n != 1 {
		t.Fatalf("script: %d blocks, %v", n, err)
	}
	if !strings.Contains(sh, "echo one") || strings.Contains(sh, "echo no") || strings.Contains(sh, "echo other") || strings.Contains(sh, "echo top") {
		t.Fatalf("wrong lines:\n%s", sh)
	}
	for _, l := range strings.Split(sh, "\n") {
		if strings.HasPrefix(l, "go build") || strings.HasPrefix(l, "./wasmplane up") || strings.HasPrefix(l, "export KUBECONFIG") {
			t.Fatalf("not skipped: %q", l)
		}
	}
	sh, n, _ = script(md, "")
	if n != 3 || !strings.Contains(sh, "echo top") || !strings.Contains(sh, "echo other") {
		t.Fatalf("whole page: %d blocks:\n%s", n, sh)
	}
	sh, n, _ = script(md, "", "Other")
	if n != 2 || strings.Contains(sh, "echo other") {
		t.Fatalf("page without Other: %d blocks:\n%s", n, sh)
	}
	if skip("wasmplane up --data-dir demo --port 0 &") || !skip("./wasmplane up --data-dir .wasmplane &   # start") {
		t.Fatal("only the server the test starts is skipped")
	}
	if skip("export KUBECONFIG=alice.kubeconfig") || !skip("export KUBECONFIG=.wasmplane/admin.kubeconfig   # admin") {
		t.Fatal("only the export of the admin kubeconfig is skipped")
	}
}

// workspace makes the scratch directory: links to the checkout's top-level entries (not
// hidden ones, not a built binary or a data dir) and ./wasmplane.
func workspace(t *testing.T, root string) string {
	t.Helper()
	ws := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.Name() == "wasmplane" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(ws, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(wasmplaneBin, filepath.Join(ws, "wasmplane")); err != nil {
		t.Fatal(err)
	}
	return ws
}

// environment is the pages' environment: wasmplane on PATH, KUBECONFIG at the data dir, a
// HOME of their own (kubectl's cache) but the user's Go caches (so builds stay warm).
func environment(t *testing.T, ws string) []string {
	t.Helper()
	home := filepath.Join(ws, ".home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	goenv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	vals := strings.Split(strings.TrimSpace(string(goenv)), "\n")
	if len(vals) != 3 {
		t.Fatalf("go env printed %q", goenv)
	}
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "HOME", "PATH", "KUBECONFIG", "GOCACHE", "GOMODCACHE", "GOPATH", "PWD", "WASMPLANE_SDK":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"HOME="+home, "PWD="+ws,
		"PATH="+ws+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+filepath.Join(ws, ".wasmplane", "admin.kubeconfig"),
		"GOCACHE="+vals[0], "GOMODCACHE="+vals[1], "GOPATH="+vals[2])
}

// startUp runs `wasmplane up --data-dir .wasmplane` in the workspace on free ports and
// waits until it prints its URL; it is stopped when the test ends.
func startUp(t *testing.T, ws string, env []string) {
	t.Helper()
	logPath := filepath.Join(ws, "up.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(wasmplaneBin, "up", "--data-dir", ".wasmplane", "--port", "0", "--kubelet-port", "-1", "--log-level", "warn")
	cmd.Dir, cmd.Env, cmd.Stderr = ws, env, logFile
	// Killed with the test binary too (a timeout, ^C), not left serving.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	urls := testserver.UpURLs(stdout)
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("last lines of wasmplane up's log:\n%s", strings.Join(lines, "\n"))
		}
	})
	select {
	case u := <-urls:
		t.Logf("wasmplane up at %s", u)
	case <-done:
		t.Fatalf("wasmplane up exited: %v", cmd.ProcessState)
	case <-time.After(90 * time.Second):
		t.Fatal("wasmplane up did not print its URL within 90s")
	}
}

// run runs a bash script in the workspace, in a process group of its own that is killed
// when the script ends (its background jobs) or times out; it returns stdout and stderr.
func run(t *testing.T, ws string, env []string, timeout time.Duration, sh string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", sh)
	cmd.Dir, cmd.Env = ws, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Background jobs keep the output pipes open: wait for bash alone, not for them.
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // bash succeeded; a background job still held the output
	}
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", timeout, err)
	}
	return out.String(), err
}
