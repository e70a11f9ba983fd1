package wasm

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// TestCompiledCodeOnHugePages: a module whose machine code spans huge pages (a
// standard-Go guest: ≈ 13 MB) has it backed by transparent huge pages once compiled.
func TestCompiledCodeOnHugePages(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a standard-Go plugin")
	}
	thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || bytes.Contains(thp, []byte("[never]")) {
		t.Skipf("transparent huge pages are off on this kernel (%q, %v)", thp, err)
	}
	r, _ := newTestRuntime(t)
	before := codeMappings()
	load(t, r, wasmtest.Go(t, "examples/plugins/go/require-labels"), PluginConfig{Limits: Limits{Instances: 1}})
	var huge int
	for start, kib := range anonHugeKiB(t) {
		if _, old := before[start]; !old {
			huge += kib
		}
	}
	if huge == 0 {
		t.Fatalf("no huge page backs the compiled code (before: %d code mappings, after: %d)", len(before), len(codeMappings()))
	}
	t.Logf("compiled code on huge pages: %d KiB", huge)
}

// anonHugeKiB returns AnonHugePages of each anonymous executable mapping, by start.
func anonHugeKiB(t *testing.T) map[uintptr]int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[uintptr]int{}
	var cur uintptr
	code := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			lo, _, _ := strings.Cut(fields[0], "-")
			start, _ := strconv.ParseUint(lo, 16, 64)
			cur, code = uintptr(start), len(fields) == 5 && fields[1] == "r-xp"
			continue
		}
		if code && len(fields) == 3 && fields[0] == "AnonHugePages:" {
			kib, _ := strconv.Atoi(fields[1])
			out[cur] = kib
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
