package toolkit

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/template"
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
	// Repo is the wasmplane checkout whose SDK the project uses (default: FindRepo from
	// DefaultRepoStarts). WAT projects need none.
	Repo string
	// Force allows writing into a non-empty directory (existing files are overwritten).
	Force bool
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

	data := map[string]any{"Name": name, "Hook": hook, "Lang": string(lang), "ABIDoc": "sdk/ABI.md"}
	var repo string
	if lang != WAT {
		repo = opts.Repo
		if repo == "" {
			repo, err = FindRepo(DefaultRepoStarts(dir)...)
		} else if !isRepo(repo) {
			err = fmt.Errorf("%s is not a wasmplane checkout (no go.mod of %s with sdk/)", repo, ModulePath)
		}
		if err != nil {
			return nil, err
		}
		if repo, err = filepath.Abs(repo); err != nil {
			return nil, fmt.Errorf("wasmplane checkout: %w", err)
		}
		data["ABIDoc"] = filepath.Join(repo, "sdk", "ABI.md")
	}

	files := map[string][]byte{} // path in the project -> content
	render := func(tmpl, to string) error {
		b, err := renderTemplate(tmpl, data)
		if err != nil {
			return err
		}
		files[to] = b
		return nil
	}
	switch lang {
	case Go:
		gover, err := goModDirective(filepath.Join(repo, "go.mod"), "go")
		if err != nil {
			return nil, err
		}
		data["GoVersion"], data["Replace"], data["ModuleName"] = gover, repo, "wasmplane.plugin/"+name
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
	case C:
		if err := render("c/plugin.c.tmpl", name+".c"); err != nil {
			return nil, err
		}
		for _, f := range []string{"wasmplane.h", "wasmplane.c"} {
			b, err := os.ReadFile(filepath.Join(repo, "sdk", "c", f))
			if err != nil {
				return nil, fmt.Errorf("vendoring the C SDK: %w", err)
			}
			files[f] = b
		}
	case AssemblyScript:
		rel, err := filepath.Rel(dir, filepath.Join(repo, "sdk", "assemblyscript", "assembly", "index"))
		if err != nil {
			return nil, fmt.Errorf("assemblyscript SDK path: %w", err)
		}
		rel = filepath.ToSlash(rel)
		if !strings.HasPrefix(rel, ".") {
			rel = "./" + rel
		}
		data["ASImport"] = rel
		if err := render("assemblyscript/plugin.ts.tmpl", name+".ts"); err != nil {
			return nil, err
		}
	case Rust:
		data["RustSDK"] = filepath.ToSlash(filepath.Join(repo, "sdk", "rust"))
		if err := render("rust/Cargo.toml.tmpl", "Cargo.toml"); err != nil {
			return nil, err
		}
		if err := render("rust/lib.rs.tmpl", filepath.Join("src", "lib.rs")); err != nil {
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
	files[".gitignore"] = []byte("*.wasm\n")

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
