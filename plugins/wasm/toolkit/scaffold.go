package toolkit

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/toolchain"
	"github.com/wasmplane/wasmplane/sdk"
)

// templates are the project skeletons; they use [[ ]] delimiters so that the braces of
// Go, C, Rust and JSON need no escaping.
//
//go:embed templates
var templates embed.FS

// InitOptions say what project to scaffold.
type InitOptions struct {
	// Dir is the project directory; it is created, and must be empty if it exists.
	Dir string
	// Lang is the source language.
	Lang Lang
	// Hook is the hook the plugin implements.
	Hook string
	// Repo, when set, is a wasmplane checkout whose sdk/ directory is copied into the
	// project instead of the SDK built into this binary (for work on the SDK itself).
	Repo string
	// Force allows writing into a non-empty directory (existing files are overwritten).
	Force bool
}

// VendorDir is where a scaffolded project keeps its copy of the SDK, laid out as in the
// wasmplane repository (VendorDir/sdk/ABI.md, VendorDir/sdk/go/…): the project builds
// with no checkout and no network, and the copy is committed with it.
const VendorDir = "third_party/wasmplane"

// GoVersion is the go directive of scaffolded Go projects and of their SDK copy: the
// wasmplane module's (the SDK is part of it), which the tests check.
const GoVersion = toolchain.GoMin

// ascVersion is the AssemblyScript compiler version the SDK pins in its package.json.
func ascVersion(sdkFiles fs.FS) (string, error) {
	b, err := fs.ReadFile(sdkFiles, "assemblyscript/package.json")
	if err != nil {
		return "", fmt.Errorf("reading the AssemblyScript SDK's package.json: %w", err)
	}
	var p struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("the AssemblyScript SDK's package.json: %w", err)
	}
	v := p.DevDependencies["assemblyscript"]
	if v == "" {
		return "", errors.New("the AssemblyScript SDK's package.json pins no assemblyscript compiler")
	}
	return v, nil
}

// watAnswers are the fixed answers of WAT skeletons: WAT has no JSON reader to build
// per-node arrays, so filter and score are left to hand-written modules.
func watAnswer(hook string) (string, bool) {
	switch hook {
	case "validate", "mutate":
		return `{"allowed":true}`, true
	case "authenticate":
		return `{"authenticated":false}`, true
	case "initialize":
		return `{}`, true
	}
	return "", false
}

var validName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// Init writes a buildable plugin project and returns the paths of the files it wrote.
func Init(opts InitOptions) ([]string, error) {
	hook, err := ParseHook(opts.Hook)
	if err != nil {
		return nil, err
	}
	lang, err := ParseLang(string(opts.Lang))
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("project directory: %w", err)
	}
	name := filepath.Base(dir)
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("project name %q (the directory's name) must be lowercase letters, digits and dashes", name)
	}
	if lang == Rego && hook != "validate" {
		return nil, fmt.Errorf("a Rego plugin implements the validate hook only (OPA policies decide; they do not patch or score)")
	}
	if lang == WAT {
		if _, ok := watAnswer(hook); !ok {
			return nil, fmt.Errorf("the WAT skeleton answers a fixed document and cannot do %s (one answer per node); see examples/plugins/wat or pick another language", hook)
		}
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 && !opts.Force {
		return nil, fmt.Errorf("%s is not empty (use --force to write into it)", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("project directory: %w", err)
	}

	sdkFiles := sdk.Files()
	if opts.Repo != "" {
		if !isRepo(opts.Repo) {
			return nil, fmt.Errorf("%s is not a wasmplane checkout (no go.mod of %s with sdk/)", opts.Repo, ModulePath)
		}
		sdkFiles = os.DirFS(filepath.Join(opts.Repo, "sdk"))
	}
	data := map[string]any{"Name": name, "Hook": hook, "Lang": string(lang), "ABIDoc": VendorDir + "/sdk/ABI.md", "Vendor": VendorDir}
	files := map[string][]byte{} // path in the project -> content
	render := func(tmpl, to string) error {
		b, err := renderTemplate(tmpl, data)
		if err != nil {
			return err
		}
		files[to] = b
		return nil
	}
	// vendor copies the SDK directory from (relative to sdk/) into the project's
	// VendorDir, leaving out tests and their data.
	vendor := func(from string) error {
		return fs.WalkDir(sdkFiles, from, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && d.Name() == "testdata" {
				return fs.SkipDir
			}
			if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := fs.ReadFile(sdkFiles, p)
			if err != nil {
				return err
			}
			files[filepath.Join(VendorDir, "sdk", filepath.FromSlash(p))] = b
			return nil
		})
	}
	if err := vendor("ABI.md"); err != nil {
		return nil, fmt.Errorf("copying the ABI: %w", err)
	}
	switch lang {
	case Go:
		data["GoVersion"], data["ModuleName"] = GoVersion, "wasmplane.plugin/"+name
		if err := render("go/main.go.tmpl", "main.go"); err != nil {
			return nil, err
		}
		// The hook switches in the template leave blank-line noise; gofmt is the judge.
		if files["main.go"], err = format.Source(files["main.go"]); err != nil {
			return nil, fmt.Errorf("formatting main.go: %w", err)
		}
		if err := render("go/go.mod.tmpl", "go.mod"); err != nil {
			return nil, err
		}
		if err := render("go/sdk.go.mod.tmpl", filepath.Join(VendorDir, "go.mod")); err != nil {
			return nil, err
		}
		if err := vendor("go"); err != nil {
			return nil, fmt.Errorf("copying the Go SDK: %w", err)
		}
	case C:
		if err := render("c/plugin.c.tmpl", name+".c"); err != nil {
			return nil, err
		}
		// The C SDK is two files next to the plugin, where `plugin build` looks.
		for _, f := range []string{"wasmplane.h", "wasmplane.c"} {
			b, err := fs.ReadFile(sdkFiles, "c/"+f)
			if err != nil {
				return nil, fmt.Errorf("copying the C SDK: %w", err)
			}
			files[f] = b
		}
	case AssemblyScript:
		asc, err := ascVersion(sdkFiles)
		if err != nil {
			return nil, err
		}
		data["ASImport"], data["ASCVersion"] = "./"+VendorDir+"/sdk/assemblyscript/assembly/index", asc
		if err := render("assemblyscript/plugin.ts.tmpl", name+".ts"); err != nil {
			return nil, err
		}
		if err := render("assemblyscript/package.json.tmpl", "package.json"); err != nil {
			return nil, err
		}
		if err := vendor("assemblyscript/assembly"); err != nil {
			return nil, fmt.Errorf("copying the AssemblyScript SDK: %w", err)
		}
	case Rust:
		data["RustSDK"] = VendorDir + "/sdk/rust"
		if err := render("rust/Cargo.toml.tmpl", "Cargo.toml"); err != nil {
			return nil, err
		}
		if err := render("rust/lib.rs.tmpl", filepath.Join("src", "lib.rs")); err != nil {
			return nil, err
		}
		if err := vendor("rust/src"); err != nil {
			return nil, fmt.Errorf("copying the Rust SDK: %w", err)
		}
		if err := vendor("rust/Cargo.toml"); err != nil {
			return nil, fmt.Errorf("copying the Rust SDK: %w", err)
		}
	case Rego:
		data["Package"], data["OPAVersion"] = strings.ReplaceAll(name, "-", "_"), toolchain.OPAVersion
		if err := render("rego/policy.rego.tmpl", name+".rego"); err != nil {
			return nil, err
		}
	case WAT:
		ans, _ := watAnswer(hook)
		data["WATAnswer"], data["WATAnswerLen"] = strconv.Quote(ans), len(ans)
		if err := render("wat/plugin.wat.tmpl", name+".wat"); err != nil {
			return nil, err
		}
	}
	if err := render("README.md.tmpl", "README.md"); err != nil {
		return nil, err
	}
	req, err := templates.ReadFile("templates/requests/" + hook + ".json")
	if err != nil {
		return nil, fmt.Errorf("sample request: %w", err)
	}
	files["request.json"] = req
	if files["config.json"], err = templates.ReadFile("templates/config.json"); err != nil {
		return nil, fmt.Errorf("sample config: %w", err)
	}
	files[".gitignore"] = []byte("*.wasm\n/target/\nnode_modules/\n")

	var wrote []string
	for _, rel := range sortedKeys(files) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return wrote, fmt.Errorf("scaffolding: %w", err)
		}
		if err := os.WriteFile(p, files[rel], 0o644); err != nil {
			return wrote, fmt.Errorf("scaffolding: %w", err)
		}
		wrote = append(wrote, p)
	}
	return wrote, nil
}

func renderTemplate(name string, data map[string]any) ([]byte, error) {
	src, err := templates.ReadFile("templates/" + name)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	t, err := template.New(name).Delims("[[", "]]").Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return b.Bytes(), nil
}
