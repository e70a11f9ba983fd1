package toolkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/regoinput"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/toolchain"
)

// ErrToolchainMissing is wrapped by Build when a compiler or SDK it needs is not
// installed (scripts/install-toolchains.sh installs them all).
var ErrToolchainMissing = errors.New("toolchain missing")

// Step is one toolchain command of a build.
type Step struct {
	// Dir is the working directory.
	Dir string
	// Env is added to the environment of the wasmplane process.
	Env []string
	// Args is the command line; Args[0] is the program.
	Args []string
	// Out, when set, is the module file to take out of the bundle the step writes (OPA
	// writes a bundle holding /policy.wasm rather than a module).
	Out string
	// Rego lists the policy files (relative to Dir) whose reads of input Build records
	// in the module taken out of the bundle (regoinput), so that the host writes the
	// policy only the parts of a request it may read.
	Rego []string
}

// String renders the step as a shell line, for --verbose output and errors.
func (s Step) String() string {
	return strings.TrimSpace(strings.Join(s.Env, " ") + " " + strings.Join(s.Args, " "))
}

// BuildOptions say what to build.
type BuildOptions struct {
	// Dir is the project directory.
	Dir string
	// Out is the module to write (default Dir/<base of Dir>.wasm).
	Out string
	// Lang overrides language detection.
	Lang Lang
	// Repo is the wasmplane checkout holding sdk/ (default: FindRepo from
	// DefaultRepoStarts); Go and C projects made by Init do not need it.
	Repo string
}

// Result describes a built module.
type Result struct {
	// Lang is the language built.
	Lang Lang
	// Path is the module file written.
	Path string
	// Size is its length in bytes.
	Size int
	// SHA256 is its digest, lowercase hex (what a plugin object pins).
	SHA256 string
	// Input is, for a Rego policy, what the module records it reads of its input.
	Input *regoinput.Paths
}

// DefaultOut is where Build writes the module of dir when no output is given.
func DefaultOut(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("output path: %w", err)
	}
	return filepath.Join(abs, filepath.Base(abs)+".wasm"), nil
}

// Plan returns the commands that build the project (work is a scratch directory for
// intermediate files).
func Plan(opts BuildOptions, work string) (Lang, []Step, error) {
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return "", nil, fmt.Errorf("project directory: %w", err)
	}
	lang := opts.Lang
	if lang == "" {
		if lang, err = Detect(dir); err != nil {
			return "", nil, err
		}
	}
	out := opts.Out
	if out == "" {
		if out, err = DefaultOut(dir); err != nil {
			return "", nil, err
		}
	} else if out, err = filepath.Abs(out); err != nil {
		return "", nil, fmt.Errorf("output path: %w", err)
	}
	repo := func() (string, error) {
		if opts.Repo != "" {
			return filepath.Abs(opts.Repo)
		}
		return FindRepo(DefaultRepoStarts(dir)...)
	}
	switch lang {
	case Go:
		return lang, []Step{{Dir: dir, Env: toolchain.GoEnv(), Args: toolchain.GoArgs(out, ".")}}, nil
	case C:
		srcs, err := sourcesIn(dir, ".c")
		if err != nil {
			return "", nil, err
		}
		sdk := dir // Init vendors the small C SDK into the project.
		if _, err := os.Stat(filepath.Join(dir, "wasmplane.h")); err != nil {
			r, err := repo()
			if err != nil {
				return "", nil, err
			}
			sdk = filepath.Join(r, "sdk", "c")
		}
		var user []string
		for _, s := range srcs {
			if sdk == dir && s == "wasmplane.c" {
				continue
			}
			user = append(user, s)
		}
		if len(user) == 0 {
			return "", nil, fmt.Errorf("no plugin *.c file in %s", dir)
		}
		return lang, []Step{{Dir: dir, Args: toolchain.CArgs(out, sdk, user...)}}, nil
	case AssemblyScript:
		src, err := mainSource(dir, ".ts")
		if err != nil {
			return "", nil, err
		}
		// asc names modules by their path relative to its working directory, and --use
		// must name the SDK's abort the same way: run it in the project and reuse the
		// prefix the source imports the SDK with.
		prefix, r := asSDKImport(filepath.Join(dir, src))
		if prefix == "" {
			return "", nil, fmt.Errorf("%s does not import the SDK (…/sdk/assemblyscript/assembly/index)", src)
		}
		// The compiler: the project's own (npm install with the package.json Init
		// writes), else the one a wasmplane checkout pins in sdk/assemblyscript.
		asc := filepath.Join(dir, filepath.FromSlash(toolchain.ASProjectCompiler))
		if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
			if r == "" {
				if r, err = repo(); err != nil {
					return "", nil, err
				}
			}
			asc = filepath.Join(r, filepath.FromSlash(toolchain.ASCompiler))
		}
		// asc drops a leading ./ from the names of the modules it compiles.
		abort := path.Clean(prefix + "/" + toolchain.ASAbort)
		return lang, []Step{{Dir: dir, Args: toolchain.ASArgs(asc, out, src, abort)}}, nil
	case Rust:
		rustc, target, err := toolchain.Rust()
		if err != nil {
			return "", nil, fmt.Errorf("%w: %w\n%s", ErrToolchainMissing, err, toolchain.Hint(toolchain.LangRust))
		}
		sdk, err := cargoSDKPath(dir)
		if err != nil {
			return "", nil, err
		}
		name := strings.ReplaceAll(filepath.Base(dir), "-", "_")
		var steps []Step
		for _, a := range toolchain.RustArgs(rustc, target, out, work, filepath.Join(sdk, "src", "lib.rs"), name, filepath.Join(dir, "src", "lib.rs")) {
			steps = append(steps, Step{Dir: dir, Args: a})
		}
		return lang, steps, nil
	case WAT:
		src, err := mainSource(dir, ".wat")
		if err != nil {
			return "", nil, err
		}
		return lang, []Step{{Dir: dir, Args: toolchain.WATArgs(out, src)}}, nil
	case Rego:
		srcs, err := sourcesIn(dir, ".rego")
		if err != nil {
			return "", nil, err
		}
		var policies []string
		for _, s := range srcs {
			if !strings.HasSuffix(s, "_test.rego") {
				policies = append(policies, s)
			}
		}
		if len(policies) == 0 {
			return "", nil, fmt.Errorf("no policy *.rego file in %s", dir)
		}
		ep, err := regoEntrypoint(dir, policies)
		if err != nil {
			return "", nil, err
		}
		// OPA writes a bundle; Build takes policy.wasm out of it.
		return lang, []Step{{Dir: dir, Args: toolchain.RegoArgs(filepath.Join(work, regoBundle), ep, policies...), Out: out, Rego: policies}}, nil
	}
	return "", nil, fmt.Errorf("unknown language %q", lang)
}

// Build runs the toolchain for the project and describes the module it wrote.
func Build(ctx context.Context, opts BuildOptions) (*Result, error) {
	work, err := os.MkdirTemp("", "wasmplane-build-")
	if err != nil {
		return nil, fmt.Errorf("build scratch directory: %w", err)
	}
	defer os.RemoveAll(work)
	lang, steps, err := Plan(opts, work)
	if err != nil {
		return nil, err
	}
	if lang == AssemblyScript {
		if _, err := os.Stat(steps[0].Args[1]); err != nil {
			where := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(steps[0].Args[1])))) // …/node_modules/assemblyscript/bin/asc.js
			return nil, fmt.Errorf("%w: the AssemblyScript compiler: run `npm install` in %s (%w)\n%s", ErrToolchainMissing, where, err, toolchain.Hint(toolchain.LangAssemblyScript))
		}
	}
	var out string
	var input *regoinput.Paths
	for _, s := range steps {
		if _, err := exec.LookPath(s.Args[0]); err != nil {
			return nil, fmt.Errorf("%w: %s: %w\n%s", ErrToolchainMissing, s.Args[0], err, toolchain.Hint(toolchain.Language(lang)))
		}
		if i := indexOf(s.Args, "-o"); i >= 0 && i+1 < len(s.Args) {
			out = s.Args[i+1]
		}
		cmd := exec.CommandContext(ctx, s.Args[0], s.Args[1:]...)
		cmd.Dir = s.Dir
		cmd.Env = append(os.Environ(), s.Env...)
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", s, err, log.String())
		}
		if s.Out != "" {
			if err := toolchain.Unbundle(out, s.Out); err != nil {
				return nil, err
			}
			out = s.Out
		}
		if len(s.Rego) > 0 {
			srcs := make([]string, len(s.Rego))
			for i, f := range s.Rego {
				srcs[i] = filepath.Join(s.Dir, f)
			}
			p, err := regoinput.RecordFile(out, srcs...)
			if err != nil {
				return nil, err
			}
			input = &p
		}
	}
	res, err := Describe(lang, out)
	if err != nil {
		return nil, err
	}
	res.Input = input
	return res, nil
}

// Describe reads a module file and returns its size and sha256.
func Describe(lang Lang, path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the module: %w", err)
	}
	sum := sha256.Sum256(b)
	return &Result{Lang: lang, Path: path, Size: len(b), SHA256: hex.EncodeToString(sum[:])}, nil
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

var asImport = regexp.MustCompile(`from\s+"([^"]*)/sdk/assemblyscript/assembly/index"`)

// asSDKImport returns the path prefix an AssemblyScript source imports the SDK with and,
// if that prefix is a wasmplane checkout, its directory.
func asSDKImport(path string) (prefix, repo string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", ""
	}
	m := asImport.FindSubmatch(b)
	if m == nil {
		return "", ""
	}
	prefix = string(m[1])
	r := filepath.Join(filepath.Dir(path), filepath.FromSlash(prefix))
	if !isRepo(r) {
		return prefix, ""
	}
	return prefix, r
}

// regoBundle is the file OPA writes in the build's scratch directory.
const regoBundle = "bundle.tar.gz"

// regoEntrypoint names the rule a Rego project's plugin evaluates
// (toolchain.RegoEntrypoint), looking at each policy file in turn for the first kind of
// rule before the next.
func regoEntrypoint(dir string, files []string) (string, error) {
	srcs := make([][]byte, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		srcs = append(srcs, b)
	}
	if ep, ok := toolchain.RegoEntrypoint(srcs...); ok {
		return ep, nil
	}
	return "", fmt.Errorf("no violation, deny or allow rule in %s: the plugin evaluates one of them", strings.Join(files, ", "))
}
