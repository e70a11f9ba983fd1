package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// perfPages are the pages whose figures come with the command that measured them, written
// inline (`go test … -bench …`, `go run ./tests/bench/… -nodes … -pods …`) or in a plain
// fenced block.
var perfPages = []string{"docs/performance.md", "docs/wasm-performance.md"}

// perfCommand is a `go test` or `go run` command of a page: a code span (which may wrap
// over lines) or a line of a fenced block.
var perfCommand = regexp.MustCompile("^go (test|run) ")

// codeSpan is an inline code span; a span may wrap over lines (markdown joins them).
var codeSpan = regexp.MustCompile("`([^`]+)`")

// perfCommands extracts the benchmark commands of a markdown page, whitespace normalized.
func perfCommands(md string) []string {
	var cmds []string
	var prose strings.Builder
	in := false
	sc := bufio.NewScanner(strings.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if fence.MatchString(line) {
			in = !in
			prose.WriteString("\n")
			continue
		}
		if in {
			if l := strings.Join(strings.Fields(line), " "); perfCommand.MatchString(l) {
				cmds = append(cmds, l)
			}
			continue
		}
		prose.WriteString(line + "\n")
	}
	for _, m := range codeSpan.FindAllStringSubmatch(prose.String(), -1) {
		if l := strings.Join(strings.Fields(m[1]), " "); perfCommand.MatchString(l) {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// smallValues replace the sizes of a documented command: one benchmark iteration, a
// handful of nodes and pods. The command still builds and runs the same benchmark or
// program with the same flags, so a renamed benchmark, flag or package fails; the figures
// it prints mean nothing.
var smallValues = map[string]string{
	"-benchtime":  "1x",
	"-nodes":      "20",
	"-pods":       "10",
	"-rate":       "20",
	"-scale-pods": "20",
	"-creates":    "20",
	"-ops":        "20",
	// 100,000 objects for the memory figures take minutes to store; 200 run the same code.
	"-memory-objects": "200",
	"-rounds":         "1",
	"-run":            "'^$'", // `-run XXX` in the docs: no tests, only the benchmarks
}

// boundingFlags are added to a program's command because the documented form runs at the
// program's default sizes (go run ./tests/bench/apiserver: 5,000 creates, 1,000 watchers,
// 10 s phases; ./tests/bench/scheduler: 5,000 nodes and 10,000 pods; ./tests/bench/apf:
// 10 s phases on each server). A flag given twice takes the last value, the same small
// one. `-wasmplane-bin` reuses the binary TestMain built instead of linking
// another one; -timeout bounds a stuck run.
var boundingFlags = map[string]string{
	"./tests/bench/apiserver": "-creates 20 -workers 2 -rate 20 -rate-seconds 1 -watchers 2 -watch-rate 20 -watch-seconds 1 -scale-nodes 10 -wasmplane-bin " + "$WASMPLANE_BIN",
	"./tests/bench/kubelet":   "-timeout 3m",
	"./tests/bench/scheduler": "-nodes 20 -pods 10 -timeout 3m",
	"./tests/bench/apf":       "-duration 2s -probe 1s -objects 10 -timeout 3m -wasmplane-bin $WASMPLANE_BIN",
	"./tests/bench/memory":    "-containers 100 -settle 1s -wasmplane-bin $WASMPLANE_BIN",
}

// bounded rewrites a documented command into its bounded form (see smallValues and
// boundingFlags); optional flags written `[-flag]` are passed; `[-flag VALUE]`
// placeholders are dropped. It reports the program or package run.
func bounded(cmd string) (string, string) {
	cmd = regexp.MustCompile(`\[(-[a-z-]+)\]`).ReplaceAllString(cmd, "$1")
	cmd = regexp.MustCompile(`\s*\[[^\]]*\]`).ReplaceAllString(cmd, "")
	// -benchtime=2s and -benchtime 2s alike.
	cmd = regexp.MustCompile(`(-[a-z-]+)=(\S+)`).ReplaceAllString(cmd, "$1 $2")
	f := strings.Fields(cmd)
	target := ""
	for i := 2; i < len(f); i++ {
		if v, ok := smallValues[f[i]]; ok && i+1 < len(f) {
			f[i+1] = v
			i++
			continue
		}
		if target == "" && strings.HasPrefix(f[i], "./") {
			target = f[i]
		}
	}
	out := strings.Join(f, " ")
	if f[1] == "test" {
		if !strings.Contains(out, " -benchtime ") {
			out += " -benchtime 1x"
		}
		if !strings.Contains(out, " -run ") {
			out += " -run '^$'"
		}
		out += " -count 1 -timeout 5m"
	}
	if extra, ok := boundingFlags[target]; ok {
		out += " " + extra
	}
	return out, target
}

func TestPerfCommandExtraction(t *testing.T) {
	md := "Reproduce: `go run ./tests/bench/scheduler -nodes 5000 -pods 10000 [-precreate]` and\n" +
		"`go test -run '^$' -bench 'A|B' -benchtime 20x\n./tests/bench/scheduler/`, not `wasmplane up`.\n" +
		"```\ngo test ./plugins/wasm/ -run XXX -bench . -benchtime=2s\n```\n" +
		"`go run ./tests/bench/scheduler -peer P [-peer-config FILE] [-peer-args \"…\"]`\n"
	got := perfCommands(md)
	want := []string{
		"go test ./plugins/wasm/ -run XXX -bench . -benchtime=2s",
		"go run ./tests/bench/scheduler -nodes 5000 -pods 10000 [-precreate]",
		"go test -run '^$' -bench 'A|B' -benchtime 20x ./tests/bench/scheduler/",
		"go run ./tests/bench/scheduler -peer P [-peer-config FILE] [-peer-args \"…\"]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("extracted\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	tests := []struct{ in, want string }{
		{want[0], "go test ./plugins/wasm/ -run '^$' -bench . -benchtime 1x -count 1 -timeout 5m"},
		{want[1], "go run ./tests/bench/scheduler -nodes 20 -pods 10 -precreate -nodes 20 -pods 10 -timeout 3m"},
		{want[2], "go test -run '^$' -bench 'A|B' -benchtime 1x ./tests/bench/scheduler/ -count 1 -timeout 5m"},
		{want[3], "go run ./tests/bench/scheduler -peer P -nodes 20 -pods 10 -timeout 3m"},
		{"go run ./tests/bench/scheduler -plugins compare", "go run ./tests/bench/scheduler -plugins compare -nodes 20 -pods 10 -timeout 3m"},
	}
	for _, tc := range tests {
		if b, _ := bounded(tc.in); b != tc.want {
			t.Errorf("bounded(%q)\n = %q\nwant %q", tc.in, b, tc.want)
		}
	}
}

// TestPerformanceCommands runs every benchmark command of docs/performance.md and
// docs/wasm-performance.md in a bounded form (bounded: -benchtime 1x, -nodes 20, -pods 10,
// -rate 20, small phases for the API server benchmark, core/storage's fan-out at 2
// watchers through FANOUT_WATCHERS), so a renamed benchmark, flag or package fails here.
// staticCheck verifies, without building anything, that a documented command still names
// what exists: the package or program directory, at least one Benchmark function of that
// package matching -bench, and every -flag of a `go run` program. It is what CI checks for
// every command; running them all is the long profile (WASMPLANE_PERF_COMMANDS=all).
func staticCheck(root, doc string) error {
	sh, target := bounded(doc)
	if target == "" {
		return fmt.Errorf("names no package or program")
	}
	dir := filepath.Join(root, strings.TrimSuffix(target, "/..."))
	var src strings.Builder
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("%s holds no Go files", target)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		src.Write(b)
	}
	f := strings.Fields(sh)
	switch f[1] {
	case "test":
		i := slices.Index(f, "-bench")
		if i < 0 || i+1 >= len(f) {
			return fmt.Errorf("go test without -bench")
		}
		// Only the top-level part of the pattern names a Benchmark function.
		pattern := strings.Trim(strings.SplitN(f[i+1], "/", 2)[0], "'\"")
		re, err := regexp.Compile(pattern)
		if err != nil {
			return fmt.Errorf("-bench %q: %w", pattern, err)
		}
		for _, m := range benchFunc.FindAllStringSubmatch(src.String(), -1) {
			if re.MatchString(m[1]) {
				return nil
			}
		}
		return fmt.Errorf("no Benchmark function in %s matches -bench %q", target, pattern)
	case "run":
		// A quoted value (-up-args "--flag …") belongs to the program, not to its flags.
		unquoted := regexp.MustCompile(`"[^"]*"|'[^']*'`).ReplaceAllString(sh, "")
		for _, a := range strings.Fields(unquoted)[3:] {
			name := strings.TrimLeft(a, "-")
			if !strings.HasPrefix(a, "-") || name == "" || strings.Contains(name, "=") {
				continue
			}
			if !strings.Contains(src.String(), strconv.Quote(name)) {
				return fmt.Errorf("%s defines no flag -%s", target, name)
			}
		}
	}
	return nil
}

// benchFunc finds the benchmark functions of a package's sources.
var benchFunc = regexp.MustCompile(`(?m)^func (Benchmark\w*)\(`)

// TestPerformanceCommandsExist checks every documented benchmark command statically (see
// staticCheck), in seconds.
func TestPerformanceCommandsExist(t *testing.T) {
	root := wasmtest.ModuleRoot(t)
	for _, bad := range []string{
		"go test -run XXX -bench BenchmarkNoSuchThing ./core/storage",
		"go test -bench . ./no/such/package",
		"go run ./tests/bench/apiserver -no-such-flag 3",
	} {
		if staticCheck(root, bad) == nil {
			t.Errorf("the static check passed %q", bad)
		}
	}
	for _, page := range perfPages {
		md, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range perfCommands(string(md)) {
			if err := staticCheck(root, doc); err != nil {
				t.Errorf("%s: %s: %v", page, doc, err)
			}
		}
	}
}

// runsInShortProfile says whether CI runs a documented command: only the `go run`
// programs, which nothing else builds with their documented flags. The benchmarks of test
// packages are compiled by `go test ./...` and checked statically (TestPerformanceCommandsExist);
// WASMPLANE_PERF_COMMANDS=all (scripts/perf-commands.sh) runs every command.
func runsInShortProfile(doc string) bool {
	return os.Getenv("WASMPLANE_PERF_COMMANDS") == "all" || strings.HasPrefix(doc, "go run ")
}

// A command must name something that runs: `go test -bench` matching no benchmark fails.
//
// The side-by-side run with the real kube-scheduler (`-peer PATH`) needs that binary,
// built outside this repository (/work/shared/tools/k8s-peers); when the documented path
// does not hold it, only `-h` is run and must list -peer, -peer-config and -peer-args.
func TestPerformanceCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every documented benchmark once (minutes); not in -short")
	}
	root := wasmtest.ModuleRoot(t)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "WASMPLANE_BIN="+wasmplaneBin, "FANOUT_WATCHERS=2")
	start := time.Now()
	n := 0
	// Pages quote one command many times (each set of figures says how it was taken);
	// once bounded they are the same run, which proves nothing more the second time.
	ran := map[string]string{}
	for _, page := range perfPages {
		md, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		cmds := perfCommands(string(md))
		if len(cmds) == 0 {
			t.Fatalf("%s names no benchmark command", page)
		}
		for _, doc := range cmds {
			if !runsInShortProfile(doc) {
				continue
			}
			sh, target := bounded(doc)
			if first, ok := ran[sh]; ok {
				t.Logf("%s: %s: bounded, the same run as %q: not run again", page, doc, first)
				continue
			}
			ran[sh] = doc
			n++
			if strings.Contains(doc, " -peer ") {
				peer := strings.Fields(sh)[slices.Index(strings.Fields(sh), "-peer")+1]
				if p := strings.Replace(peer, "~", home, 1); !isExecutable(p) {
					sh = fmt.Sprintf("go run %s -h 2>&1 | grep -e '-peer ' && go run %s -h 2>&1 | grep -e '-peer-config' && go run %s -h 2>&1 | grep -e '-peer-args'", target, target, target)
				}
			}
			t.Run(fmt.Sprintf("%d", n), func(t *testing.T) {
				t.Logf("%s: %s\nruns: %s", page, doc, sh)
				cmdStart := time.Now()
				out, err := run(t, root, env, 8*time.Minute, "set -e\n"+sh)
				t.Logf("took %v", time.Since(cmdStart).Round(time.Millisecond))
				if err == nil && strings.HasPrefix(doc, "go test") && !strings.Contains(out, "ns/op") && !strings.Contains(out, "--- SKIP") {
					err = fmt.Errorf("no benchmark ran (renamed?)")
				}
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				if testing.Verbose() {
					t.Log(out)
				}
			})
		}
	}
	t.Logf("%d documented benchmark commands in %v", n, time.Since(start).Round(time.Second))
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
