// Package toolchain holds the compiler command lines that turn plugin sources into
// wasmplane modules, one function per language. It is the single source of these flags
// for `wasmplane plugin build` (plugins/wasm/toolkit) and the test suite
// (plugins/wasm/wasmtest), and imports only the standard library so that test helpers
// of the host itself can use it without an import cycle.
package toolchain

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// GoEnv is the environment of a standard-Go plugin build: a wasip1 module without cgo.
func GoEnv() []string { return []string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"} }

// GoArgs builds the Go main package pkg as a reactor (-buildmode=c-shared, so the module
// exports _initialize and never runs main), stripped and reproducible.
func GoArgs(out, pkg string) []string {
	return []string{"go", "build", "-buildmode=c-shared", "-ldflags=-s -w", "-trimpath", "-o", out, pkg}
}

// CArgs compiles C sources with the C SDK (sdkDir holds wasmplane.h and wasmplane.c) into
// a WASI reactor, warnings as errors.
func CArgs(out, sdkDir string, sources ...string) []string {
	args := []string{"clang", "--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-Wall", "-Werror", "-Wl,--strip-all", "-I", sdkDir}
	args = append(args, sources...)
	return append(args, filepath.Join(sdkDir, "wasmplane.c"), "-o", out)
}

// ASArgs compiles an AssemblyScript entry file with asc (the one sdk/assemblyscript
// pins); abort names the SDK's abort as asc sees it from its working directory.
func ASArgs(asc, out, entry, abort string) []string {
	return []string{"node", asc, entry, "-o", out, "-O3", "--noAssert", "--use", "abort=" + abort}
}

// The AssemblyScript SDK's files, relative to the repository root: the asc that
// sdk/assemblyscript pins (npm ci there) and the module whose abort plugins use; and the
// asc of a project made by `wasmplane plugin init` (npm install there), relative to it.
const (
	ASCompiler        = "sdk/assemblyscript/node_modules/assemblyscript/bin/asc.js"
	ASAbort           = "sdk/assemblyscript/assembly/abi/abort"
	ASProjectCompiler = "node_modules/assemblyscript/bin/asc.js"
)

// RustArgs are the two rustc invocations that do what `cargo build --release` does with a
// scaffolded Cargo.toml, without cargo: the SDK crate as an rlib into work, then the
// plugin as a cdylib linked against it.
func RustArgs(rustc, target, out, work, sdkLib, crateName, crateLib string) [][]string {
	opt := []string{"--edition", "2021", "--target", target, "-C", "opt-level=s", "-C", "panic=abort"}
	sdk := append([]string{rustc, "--crate-type", "rlib", "--crate-name", "wasmplane", "--out-dir", work}, opt...)
	plugin := append([]string{rustc, "--crate-type", "cdylib", "--crate-name", crateName,
		"-C", "lto", "-C", "strip=symbols", "-L", work, "--extern", "wasmplane=" + filepath.Join(work, "libwasmplane.rlib"), "-o", out}, opt...)
	return [][]string{append(sdk, sdkLib), append(plugin, crateLib)}
}

// WATArgs assembles hand-written WebAssembly text with wabt.
func WATArgs(out, src string) []string { return []string{"wat2wasm", src, "-o", out} }

// Rust returns a rustc that has a WASI standard library and the target name it uses,
// searched as Env.FindRust does in this process's environment.
func Rust() (rustc, target string, err error) {
	return DefaultEnv().FindRust(context.Background())
}

// RegoArgs compiles a Rego policy with OPA into a bundle holding /policy.wasm, with one
// entrypoint (package path with slashes, then the rule).
func RegoArgs(bundle, entrypoint string, sources ...string) []string {
	return append([]string{"opa", "build", "-t", "wasm", "-e", entrypoint, "-o", bundle}, sources...)
}

// Unbundle writes the /policy.wasm of an OPA bundle (a gzipped tar) to out.
func Unbundle(bundle, out string) error {
	f, err := os.Open(bundle)
	if err != nil {
		return fmt.Errorf("opening OPA's bundle: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("reading OPA's bundle: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return errors.New("OPA's bundle holds no /policy.wasm")
		}
		if err != nil {
			return fmt.Errorf("reading OPA's bundle: %w", err)
		}
		if strings.TrimPrefix(h.Name, "/") != "policy.wasm" {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, 256<<20))
		if err != nil {
			return fmt.Errorf("reading policy.wasm from OPA's bundle: %w", err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", out, err)
		}
		return nil
	}
}

var (
	regoPackage = regexp.MustCompile(`(?m)^package\s+([A-Za-z0-9_.]+)`)
	regoRule    = regexp.MustCompile(`(?m)^(violation|deny|allow)\b`)
)

// RegoEntrypoint names the rule a Rego plugin evaluates, as `opa build -e` wants it
// (package path with slashes, then the rule): violation (as Gatekeeper's templates name
// it), else deny (as OPA's Kubernetes examples do), else allow, in the package of the
// first source that has one.
func RegoEntrypoint(srcs ...[]byte) (string, bool) {
	for _, want := range []string{"violation", "deny", "allow"} {
		for _, b := range srcs {
			pkg := regoPackage.FindSubmatch(b)
			if pkg == nil {
				continue
			}
			for _, m := range regoRule.FindAllSubmatch(b, -1) {
				if string(m[1]) == want {
					return strings.ReplaceAll(string(pkg[1]), ".", "/") + "/" + want, true
				}
			}
		}
	}
	return "", false
}
