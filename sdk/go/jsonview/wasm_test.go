//go:build !wasm

package jsonview_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// TestUnderWebAssembly runs this package's tests built for GOOS=wasip1, as plugins are
// built, under wazero: there the scanners are WebAssembly (scan_wasm.s), and
// TestScannersAgainstGo compares them with the Go ones.
func TestUnderWebAssembly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package's tests for WebAssembly")
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "jsonview.test.wasm")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c for wasip1: %v\n%s", err, out)
	}
	mod, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	defer func() { _ = r.Close(ctx) }()
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	var out bytes.Buffer
	cfg := wazero.NewModuleConfig().WithArgs("jsonview.test", "-test.v").WithEnv("PWD", dir).
		WithStdout(&out).WithStderr(&out).WithSysNanotime().WithSysWalltime().
		WithFSConfig(wazero.NewFSConfig().WithReadOnlyDirMount(dir, dir))
	_, err = r.InstantiateWithConfig(ctx, mod, cfg)
	var exit *sys.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 0) {
		t.Fatalf("the tests in WebAssembly: %v\n%s", err, out.Bytes())
	}
	if !bytes.Contains(out.Bytes(), []byte("--- PASS: TestScannersAgainstGo")) {
		t.Fatalf("TestScannersAgainstGo did not run in WebAssembly:\n%s", out.Bytes())
	}
}
