package toolchain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/version"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// Language is a plugin source language, spelled as the toolkit's Lang values.
type Language string

// The languages whose toolchains Doctor checks.
const (
	LangGo             Language = "go"
	LangC              Language = "c"
	LangAssemblyScript Language = "assemblyscript"
	LangRust           Language = "rust"
	LangWAT            Language = "wat"
	LangRego           Language = "rego"
)

// Languages lists the languages Doctor reports on, in its order.
func Languages() []Language {
	return []Language{LangGo, LangC, LangAssemblyScript, LangRust, LangWAT, LangRego}
}

// GoMin is the oldest Go that builds the Go SDK: the go directive of the wasmplane module,
// which scaffolded projects and their SDK copy carry too.
const GoMin = "1.26"

// ASCVersion is the AssemblyScript compiler sdk/assemblyscript/package.json pins (the
// toolkit's tests check that they agree).
const ASCVersion = "0.28.20"

// OPAVersion is the OPA whose compiler builds Rego plugins in this repository's tests
// and scripts; other OPA releases that emit WebAssembly ABI 1.2 or later work too.
const OPAVersion = "v1.22.4"

// Hint is how to install a language's toolchain on Debian or Ubuntu (the package names
// scripts/install-toolchains-langs.sh installs), or with rustup or npm.
func Hint(l Language) string {
	lines := install(l, nil)
	return "install with: " + strings.Join(lines, "\n          or: ")
}

// install returns the commands that install what is missing of l's toolchain; with
// missing nil, everything it needs.
func install(l Language, missing []string) []string {
	has := func(what string) bool {
		if missing == nil {
			return true
		}
		for _, m := range missing {
			if m == what {
				return true
			}
		}
		return false
	}
	switch l {
	case LangGo:
		return []string{"Go " + GoMin + " or newer from https://go.dev/dl/ (the golang-go package of Debian and Ubuntu may be older)"}
	case LangC:
		var pkgs []string
		if has("clang") {
			pkgs = append(pkgs, "clang", "lld")
		}
		if has("wasi-libc") {
			pkgs = append(pkgs, "wasi-libc")
		}
		if has("compiler-rt") {
			pkgs = append(pkgs, "libclang-rt-14-dev-wasm32")
		}
		return []string{"sudo apt-get install " + strings.Join(pkgs, " ") + "   (Debian 12 names; the libclang-rt-N-dev-wasm32 package matches clang N)"}
	case LangRust:
		return []string{"rustup target add wasm32-wasip1", "sudo apt-get install rustc libstd-rust-dev-wasm32"}
	case LangAssemblyScript:
		var out []string
		var pkgs []string
		if has("node") {
			pkgs = append(pkgs, "nodejs")
		}
		if has("npm") {
			pkgs = append(pkgs, "npm")
		}
		if len(pkgs) > 0 {
			out = append(out, "sudo apt-get install "+strings.Join(pkgs, " "))
		}
		return append(out, "npm install   (in the plugin project: its package.json pins assemblyscript "+ASCVersion+")")
	case LangWAT:
		return []string{"sudo apt-get install wabt"}
	case LangRego:
		return []string{"go install github.com/open-policy-agent/opa@" + OPAVersion + " (or OPA's release binary, as opa on PATH)"}
	}
	return nil
}

// Env is where toolchains are looked for. DefaultEnv is this process's.
type Env struct {
	// Path is the program search path ($PATH).
	Path string
	// Rustc is an explicit rustc ($RUSTC), tried first.
	Rustc string
	// CargoBin is where rustup installs rustc ($CARGO_HOME/bin, default ~/.cargo/bin):
	// tried after Path, since a shell that never sourced ~/.cargo/env lacks it.
	CargoBin string
	// SystemRustc is the distribution's rustc (/usr/bin/rustc), tried last.
	SystemRustc string
}

// DefaultEnv reads the environment of this process.
func DefaultEnv() Env {
	e := Env{Path: os.Getenv("PATH"), Rustc: os.Getenv("RUSTC"), SystemRustc: "/usr/bin/rustc"}
	if ch := os.Getenv("CARGO_HOME"); ch != "" {
		e.CargoBin = filepath.Join(ch, "bin")
	} else if home, err := os.UserHomeDir(); err == nil {
		e.CargoBin = filepath.Join(home, ".cargo", "bin")
	}
	return e
}

// LookPath finds an executable named name in e.Path.
func (e Env) LookPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(e.Path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

// rustcs lists the rustc candidates in the order FindRust tries them, without repeats.
func (e Env) rustcs() []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		for _, o := range out {
			if o == p {
				return
			}
		}
		out = append(out, p)
	}
	add(e.Rustc)
	if p, err := e.LookPath("rustc"); err == nil {
		add(p)
	}
	if e.CargoBin != "" {
		if p := filepath.Join(e.CargoBin, "rustc"); isExecutable(p) {
			add(p)
		}
	}
	if isExecutable(e.SystemRustc) {
		add(e.SystemRustc)
	}
	return out
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// rustTargets are the WASI targets a plugin builds for, newest name first (Rust 1.78
// renamed wasm32-wasi to wasm32-wasip1; Debian's 1.63 has only the old name).
var rustTargets = [...]string{"wasm32-wasip1", "wasm32-wasi"}

// FindRust returns the first rustc that has a WASI standard library (its sysroot's
// lib/rustlib/<target>/lib) and that target's name. It tries $RUSTC, the rustc on the
// path, rustup's (~/.cargo/bin) and the distribution's (/usr/bin/rustc, with Debian's
// libstd-rust-dev-wasm32): a rustup rustc without the target is skipped, not fatal.
func (e Env) FindRust(ctx context.Context) (rustc, target string, err error) {
	cands := e.rustcs()
	for _, c := range cands {
		out, err := exec.CommandContext(ctx, c, "--print", "sysroot").Output()
		if err != nil {
			continue
		}
		sysroot := strings.TrimSpace(string(out))
		for _, tgt := range rustTargets {
			if st, err := os.Stat(filepath.Join(sysroot, "lib", "rustlib", tgt, "lib")); err == nil && st.IsDir() {
				return c, tgt, nil
			}
		}
	}
	if len(cands) == 0 {
		return "", "", errors.New("no rustc found (on the path, in ~/.cargo/bin or /usr/bin)")
	}
	return "", "", fmt.Errorf("no rustc with the wasm32-wasip1 standard library (tried %s)", strings.Join(cands, ", "))
}

// Status is what Doctor found for one language.
type Status struct {
	// Lang is the language.
	Lang Language
	// OK is true when `wasmplane plugin build` can build the language's projects.
	OK bool
	// Tool is the main program found (a path), Version its version.
	Tool, Version string
	// Missing names what is absent (programs, libraries, targets).
	Missing []string
	// Install are the commands that install what is missing, alternatives one per line.
	Install []string
	// Note is extra advice that applies even when OK.
	Note string
}

// Doctor reports, per language, whether its toolchain is installed.
func (e Env) Doctor(ctx context.Context) []Status {
	out := make([]Status, 0, len(Languages()))
	for _, l := range Languages() {
		st := Status{Lang: l}
		switch l {
		case LangGo:
			e.checkGo(ctx, &st)
		case LangC:
			e.checkC(ctx, &st)
		case LangAssemblyScript:
			e.checkAS(ctx, &st)
		case LangRust:
			e.checkRust(ctx, &st)
		case LangRego:
			if p, err := e.LookPath("opa"); err != nil {
				st.Missing = append(st.Missing, "opa")
			} else {
				st.Tool = p
			}
		case LangWAT:
			if p, err := e.LookPath("wat2wasm"); err != nil {
				st.Missing = append(st.Missing, "wat2wasm")
			} else {
				st.Tool, st.Version = p, firstLine(run(ctx, p, "--version"))
			}
		}
		st.OK = len(st.Missing) == 0
		if !st.OK {
			st.Install = install(l, st.Missing)
		}
		out = append(out, st)
	}
	return out
}

func (e Env) checkGo(ctx context.Context, st *Status) {
	p, err := e.LookPath("go")
	if err != nil {
		st.Missing = append(st.Missing, "go")
		return
	}
	st.Tool = p
	// "go version go1.26.8 linux/amd64"
	fields := strings.Fields(run(ctx, p, "version"))
	if len(fields) >= 3 {
		st.Version = fields[2]
	}
	if !version.IsValid(st.Version) || version.Compare(st.Version, "go"+GoMin) < 0 {
		st.Missing = append(st.Missing, "go"+GoMin+" or newer")
	}
}

func (e Env) checkC(ctx context.Context, st *Status) {
	p, err := e.LookPath("clang")
	if err != nil {
		st.Missing = append(st.Missing, "clang", "wasi-libc", "compiler-rt")
		return
	}
	st.Tool, st.Version = p, firstLine(run(ctx, p, "--version"))
	// clang prints the bare name when it cannot find a file in its search paths.
	if f := strings.TrimSpace(run(ctx, p, "--target=wasm32-wasi", "-print-file-name=crt1-reactor.o")); !filepath.IsAbs(f) || !exists(f) {
		st.Missing = append(st.Missing, "wasi-libc")
	}
	if f := strings.TrimSpace(run(ctx, p, "--target=wasm32-wasi", "-print-libgcc-file-name")); !exists(f) {
		st.Missing = append(st.Missing, "compiler-rt")
	}
}

func (e Env) checkAS(ctx context.Context, st *Status) {
	p, err := e.LookPath("node")
	if err != nil {
		st.Missing = append(st.Missing, "node")
	} else {
		st.Tool, st.Version = p, firstLine(run(ctx, p, "--version"))
	}
	if _, err := e.LookPath("npm"); err != nil {
		st.Missing = append(st.Missing, "npm")
	}
	st.Note = "each project installs its compiler: npm install (package.json pins assemblyscript " + ASCVersion + ")"
}

func (e Env) checkRust(ctx context.Context, st *Status) {
	rustc, target, err := e.FindRust(ctx)
	if err != nil {
		cands := e.rustcs()
		if len(cands) == 0 {
			st.Missing = append(st.Missing, "rustc")
			return
		}
		st.Tool, st.Version = cands[0], firstLine(run(ctx, cands[0], "--version"))
		st.Missing = append(st.Missing, "wasm32-wasip1 standard library")
		return
	}
	st.Tool, st.Version = rustc, firstLine(run(ctx, rustc, "--version"))+" (target "+target+")"
}

// run returns a command's standard output, or "" when it fails.
func run(ctx context.Context, name string, args ...string) string {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return ""
	}
	return out.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// WriteReport writes Doctor's statuses as `wasmplane plugin doctor` prints them: one
// line per language, then what is missing and the commands that install it.
func WriteReport(w io.Writer, sts []Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LANGUAGE\tSTATUS\tVERSION\tTOOL")
	for _, st := range sts {
		state := "ok"
		if !st.OK {
			state = "missing"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", st.Lang, state, dash(st.Version), dash(st.Tool))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, st := range sts {
		if st.OK && st.Note == "" {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", st.Lang)
		if !st.OK {
			fmt.Fprintf(w, "  missing: %s\n", strings.Join(st.Missing, ", "))
			for i, c := range st.Install {
				lead := "  install: "
				if i > 0 {
					lead = "       or: "
				}
				fmt.Fprintf(w, "%s%s\n", lead, c)
			}
		}
		if st.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", st.Note)
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
