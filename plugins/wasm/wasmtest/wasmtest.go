// Package wasmtest builds plugin modules from source for tests: standard-Go plugins with
// GOOS=wasip1 and WAT with wabt's wat2wasm. Each module is built once per test binary.
// A missing toolchain skips the test locally and fails it when the CI variable is set,
// because CI installs every toolchain (scripts/install-toolchains.sh).
package wasmtest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/toolchain"
)

// builds caches outputs by key for the life of the test binary.
type builds struct {
	mu   sync.Mutex
	done map[string]*build
}

type build struct {
	once sync.Once
	wasm []byte
	err  error
}

func (b *builds) get(key string, make func() ([]byte, error)) ([]byte, error) {
	b.mu.Lock()
	if b.done == nil {
		b.done = map[string]*build{}
	}
	e := b.done[key]
	if e == nil {
		e = &build{}
		b.done[key] = e
	}
	b.mu.Unlock()
	e.once.Do(func() { e.wasm, e.err = make() })
	return e.wasm, e.err
}

var (
	cache   builds
	tmpOnce sync.Once
	tmpDir  string
	tmpErr  error
)

// Main runs the tests of a package and removes the shared temporary directory.
func Main(m *testing.M) {
	code := m.Run()
	RemoveTemp()
	os.Exit(code)
}

// MainUnlessShort is Main, except that under -short it runs no test and prints why (a
// package whose every test builds plugins with their toolchains: minutes).
func MainUnlessShort(m *testing.M, why string) {
	flag.Parse()
	if testing.Short() {
		fmt.Printf("-short: skipped (slow: %s; runs without -short)\n", why)
		return
	}
	Main(m)
}

// RemoveTemp removes the shared temporary directory, for a TestMain that runs its tests
// otherwise than through Main.
func RemoveTemp() {
	if tmpDir != "" {
		_ = os.RemoveAll(tmpDir)
	}
}

// TempDir returns a directory shared by all tests of the binary (build outputs and the
// compilation cache); Main removes it.
func TempDir(tb testing.TB) string {
	tb.Helper()
	tmpOnce.Do(func() { tmpDir, tmpErr = os.MkdirTemp("", "wasmtest-") })
	if tmpErr != nil {
		tb.Fatalf("wasmtest: %v", tmpErr)
	}
	return tmpDir
}

// CacheDir returns the compilation cache directory shared by the tests of the binary.
func CacheDir(tb testing.TB) string {
	tb.Helper()
	d := filepath.Join(TempDir(tb), "compilation-cache")
	if err := os.MkdirAll(d, 0o755); err != nil {
		tb.Fatalf("wasmtest: %v", err)
	}
	return d
}

// RequireTool returns the path of a command, or skips the test (fails it under CI).
func RequireTool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("wasmtest: %s is not installed (run scripts/install-toolchains.sh)", name)
	}
	tb.Skipf("wasmtest: %s is not installed (run scripts/install-toolchains.sh)", name)
	return ""
}

// ModuleRoot returns the directory of the wasmplane go.mod.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("wasmtest: go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		tb.Fatalf("wasmtest: not inside the wasmplane module")
	}
	return filepath.Dir(mod)
}

// Go builds a standard-Go plugin (a main package, path relative to the module root, e.g.
// "examples/plugins/go/validating") as a wasip1 reactor module and returns its bytes.
func Go(tb testing.TB, pkg string) []byte {
	tb.Helper()
	return GoAll(tb, pkg)[pkg]
}

// GoAll builds several Go plugins in parallel (each still once per binary).
func GoAll(tb testing.TB, pkgs ...string) map[string][]byte {
	tb.Helper()
	RequireTool(tb, "go")
	root, tmp := ModuleRoot(tb), TempDir(tb)
	var wg sync.WaitGroup
	out := make([][]byte, len(pkgs))
	errs := make([]error, len(pkgs))
	for i, pkg := range pkgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = cache.get("go:"+pkg, func() ([]byte, error) { return buildGo(root, tmp, pkg) })
		}()
	}
	wg.Wait()
	m := map[string][]byte{}
	for i, pkg := range pkgs {
		if errs[i] != nil {
			tb.Fatalf("wasmtest: %v", errs[i])
		}
		m[pkg] = out[i]
	}
	var fresh []string
	for _, pkg := range pkgs {
		if precompiled.claim(pkg) {
			fresh = append(fresh, goOutput(tmp, pkg))
		}
	}
	if len(fresh) > 0 {
		if err := precompile(root, CacheDir(tb), fresh); err != nil {
			tb.Fatalf("wasmtest: %v", err)
		}
	}
	return m
}

// precompiled records which Go modules are already in the compilation cache.
var precompiled claims

type claims struct {
	mu   sync.Mutex
	done map[string]bool
}

func (c *claims) claim(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done[key] {
		return false
	}
	if c.done == nil {
		c.done = map[string]bool{}
	}
	c.done[key] = true
	return true
}

// precompile compiles modules into the shared cache in a separate process built without
// the race detector: wazero's compiler under -race takes about a minute per standard-Go
// module, from the cache it loads in well under a second.
func precompile(root, cacheDir string, files []string) error {
	cmd := exec.Command("go", "test", "-count=1", "-run=^TestPrecompile$", "./plugins/wasm/wasmtest/precompile")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "WASMTEST_PRECOMPILE_CACHE="+cacheDir, "WASMTEST_PRECOMPILE_FILES="+strings.Join(files, string(os.PathListSeparator)))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("precompile: %v\n%s", err, b)
	}
	return nil
}

func goOutput(tmp, pkg string) string {
	return filepath.Join(tmp, strings.ReplaceAll(pkg, "/", "_")+".wasm")
}

func buildGo(root, tmp, pkg string) ([]byte, error) {
	out := goOutput(tmp, pkg)
	// The same command line as `wasmplane plugin build`.
	args := toolchain.GoArgs(out, "./"+pkg)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), toolchain.GoEnv()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, stderr.String())
	}
	return os.ReadFile(out)
}

// WAT assembles examples/plugins/wat/<name>.wat.
func WAT(tb testing.TB, name string) []byte {
	tb.Helper()
	src, err := os.ReadFile(filepath.Join(ModuleRoot(tb), "examples", "plugins", "wat", name+".wat"))
	if err != nil {
		tb.Fatalf("wasmtest: %v", err)
	}
	return WATSource(tb, string(src))
}

// WATSource assembles WAT text.
func WATSource(tb testing.TB, src string) []byte {
	tb.Helper()
	tool := RequireTool(tb, "wat2wasm")
	wasm, err := cache.get("wat:"+src, func() ([]byte, error) {
		dir, err := os.MkdirTemp(TempDir(tb), "wat-")
		if err != nil {
			return nil, err
		}
		in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
		if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
			return nil, err
		}
		if b, err := exec.Command(tool, toolchain.WATArgs(out, in)[1:]...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("wat2wasm: %v\n%s", err, b)
		}
		return os.ReadFile(out)
	})
	if err != nil {
		tb.Fatalf("wasmtest: %v", err)
	}
	return wasm
}
