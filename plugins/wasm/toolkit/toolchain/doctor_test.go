package toolchain

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTools writes shell scripts standing for toolchain programs into a new directory:
// name -> script body. A rustc script may refer to $SYSROOT, set to sysroot.
func fakeTools(t *testing.T, sysroot string, tools map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range tools {
		body = strings.ReplaceAll(body, "$SYSROOT", sysroot)
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeSysroot makes a rustc sysroot holding the standard libraries of targets.
func fakeSysroot(t *testing.T, targets ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, tgt := range targets {
		if err := os.MkdirAll(filepath.Join(root, "lib", "rustlib", tgt, "lib"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestDoctor(t *testing.T) {
	// A clang whose WASI files exist: crt1-reactor.o and the builtins archive.
	wasi := t.TempDir()
	for _, f := range []string{"crt1-reactor.o", "libclang_rt.builtins-wasm32.a"} {
		if err := os.WriteFile(filepath.Join(wasi, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	clang := `case "$*" in
*--version*) echo "clang version 14.0.6"; echo "Target: x86_64";;
*-print-file-name=crt1-reactor.o*) echo ` + wasi + `/crt1-reactor.o;;
*-print-libgcc-file-name*) echo ` + wasi + `/libclang_rt.builtins-wasm32.a;;
esac`
	bareClang := `case "$*" in
*--version*) echo "clang version 16.0.0";;
*-print-file-name=*) echo crt1-reactor.o;;
*-print-libgcc-file-name*) echo /nonexistent/libclang_rt.builtins-wasm32.a;;
esac`
	rustc := func(version string) string {
		return `case "$*" in
*sysroot*) echo $SYSROOT;;
*--version*) echo "rustc ` + version + `";;
esac`
	}
	goTool := func(v string) string { return `echo "go version ` + v + ` linux/amd64"` }
	withTarget, without := fakeSysroot(t, "wasm32-wasip1"), fakeSysroot(t, "x86_64-unknown-linux-gnu")

	type want struct {
		ok      bool
		version string
		missing string
		install string
	}
	for _, tc := range []struct {
		name string
		env  func(t *testing.T) Env
		want map[Language]want
	}{{
		name: "everything installed",
		env: func(t *testing.T) Env {
			return Env{Path: fakeTools(t, withTarget, map[string]string{"go": goTool("go1.26.8"), "clang": clang, "node": "echo v20.1.0", "npm": "true",
				"rustc": rustc("1.95.0"), "wat2wasm": "echo 1.0.32"})}
		},
		want: map[Language]want{
			LangGo: {ok: true, version: "go1.26.8"}, LangC: {ok: true, version: "clang version 14.0.6"},
			LangAssemblyScript: {ok: true, version: "v20.1.0"}, LangRust: {ok: true, version: "rustc 1.95.0 (target wasm32-wasip1)"},
			LangWAT: {ok: true, version: "1.0.32"},
		},
	}, {
		name: "nothing installed",
		env:  func(t *testing.T) Env { return Env{Path: t.TempDir()} },
		want: map[Language]want{
			LangGo:             {missing: "go", install: "https://go.dev/dl/"},
			LangC:              {missing: "clang, wasi-libc, compiler-rt", install: "sudo apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32"},
			LangAssemblyScript: {missing: "node, npm", install: "sudo apt-get install nodejs npm"},
			LangRust:           {missing: "rustc", install: "rustup target add wasm32-wasip1|sudo apt-get install rustc libstd-rust-dev-wasm32"},
			LangWAT:            {missing: "wat2wasm", install: "sudo apt-get install wabt"},
		},
	}, {
		name: "old go, clang without wasi-libc, rustup without the target",
		env: func(t *testing.T) Env {
			return Env{Path: fakeTools(t, without, map[string]string{"go": goTool("go1.22.2"), "clang": bareClang, "node": "echo v18.0.0", "rustc": rustc("1.95.0")})}
		},
		want: map[Language]want{
			LangGo:             {version: "go1.22.2", missing: "go1.26 or newer"},
			LangC:              {version: "clang version 16.0.0", missing: "wasi-libc, compiler-rt", install: "sudo apt-get install wasi-libc libclang-rt-14-dev-wasm32"},
			LangAssemblyScript: {version: "v18.0.0", missing: "npm", install: "sudo apt-get install npm"},
			LangRust:           {version: "rustc 1.95.0", missing: "wasm32-wasip1 standard library", install: "rustup target add wasm32-wasip1"},
			LangWAT:            {missing: "wat2wasm"},
		},
	}, {
		// The rustup rustc is in ~/.cargo/bin, which this PATH lacks; the distribution's
		// rustc has no WASI library and is passed over.
		name: "rustup rustc off the path",
		env: func(t *testing.T) Env {
			cargo := fakeTools(t, withTarget, map[string]string{"rustc": rustc("1.95.0")})
			system := fakeTools(t, without, map[string]string{"rustc": rustc("1.63.0")})
			return Env{Path: t.TempDir(), CargoBin: cargo, SystemRustc: filepath.Join(system, "rustc")}
		},
		want: map[Language]want{
			LangRust: {ok: true, version: "rustc 1.95.0 (target wasm32-wasip1)"},
		},
	}, {
		name: "debian rustc with the old target name",
		env: func(t *testing.T) Env {
			system := fakeTools(t, fakeSysroot(t, "wasm32-wasi"), map[string]string{"rustc": rustc("1.63.0")})
			return Env{Path: t.TempDir(), SystemRustc: filepath.Join(system, "rustc")}
		},
		want: map[Language]want{
			LangRust: {ok: true, version: "rustc 1.63.0 (target wasm32-wasi)"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sts := tc.env(t).Doctor(context.Background())
			if len(sts) != len(Languages()) {
				t.Fatalf("%d statuses, want one per language", len(sts))
			}
			for _, st := range sts {
				w, ok := tc.want[st.Lang]
				if !ok {
					continue
				}
				if st.OK != w.ok || (w.version != "" && st.Version != w.version) || strings.Join(st.Missing, ", ") != w.missing {
					t.Errorf("%s: ok %v, version %q, missing %q; want %v, %q, %q", st.Lang, st.OK, st.Version, strings.Join(st.Missing, ", "), w.ok, w.version, w.missing)
				}
				if got := strings.Join(st.Install, "|"); !strings.Contains(got, w.install) || (w.ok && got != "") {
					t.Errorf("%s: install %q, want %q", st.Lang, got, w.install)
				}
			}
			var b bytes.Buffer
			if err := WriteReport(&b, sts); err != nil {
				t.Fatal(err)
			}
			for _, st := range sts {
				if !st.OK && !strings.Contains(b.String(), st.Install[0]) {
					t.Errorf("report lacks the install command of %s:\n%s", st.Lang, b.String())
				}
			}
		})
	}
}

// TestHint checks that `plugin build`'s error for each language names an install command.
func TestHint(t *testing.T) {
	for l, want := range map[Language]string{LangC: "apt-get install clang lld wasi-libc", LangRust: "rustup target add wasm32-wasip1",
		LangAssemblyScript: "npm install", LangWAT: "apt-get install wabt", LangGo: "go.dev/dl"} {
		if got := Hint(l); !strings.HasPrefix(got, "install with: ") || !strings.Contains(got, want) {
			t.Errorf("Hint(%s) = %q, want %q in it", l, got, want)
		}
	}
}
