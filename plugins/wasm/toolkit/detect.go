package toolkit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// ModulePath is the Go module path of the wasmplane repository, whose sdk/ directory
// holds the SDKs that scaffolded projects build against.
const ModulePath = "github.com/wasmplane/wasmplane"

// Detect tells the language of the plugin project in dir from the files it holds. Build
// files win over sources (a Go module may carry C test fixtures, a Rust crate a .wat).
func Detect(dir string) (Lang, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("detecting the language of %s: %w", dir, err)
	}
	has := map[string]bool{}
	exts := map[string]bool{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		has[e.Name()] = true
		exts[filepath.Ext(e.Name())] = true
	}
	switch {
	case has["go.mod"]:
		return Go, nil
	case has["Cargo.toml"]:
		return Rust, nil
	case has["asconfig.json"] || exts[".ts"]:
		return AssemblyScript, nil
	case exts[".c"]:
		return C, nil
	case exts[".wat"]:
		return WAT, nil
	case exts[".rego"]:
		return Rego, nil
	case exts[".go"]:
		return Go, nil
	}
	return "", fmt.Errorf("cannot tell the language of %s: no go.mod, Cargo.toml, *.ts, *.c, *.wat, *.rego or *.go file", dir)
}

// FindRepo returns the root of a wasmplane checkout (the directory whose go.mod declares
// ModulePath), searching each start directory and its parents in turn; the SDKs live in
// its sdk/ directory.
func FindRepo(starts ...string) (string, error) {
	for _, s := range starts {
		if s == "" {
			continue
		}
		d, err := filepath.Abs(s)
		if err != nil {
			continue
		}
		for {
			if isRepo(d) {
				return d, nil
			}
			up := filepath.Dir(d)
			if up == d {
				break
			}
			d = up
		}
	}
	return "", errors.New("cannot find a wasmplane checkout (a go.mod of " + ModulePath + " with sdk/): pass --sdk DIR")
}

// DefaultRepoStarts are where FindRepo looks when nothing is given: $WASMPLANE_SDK, the
// project itself, the working directory and the directory of the running wasmplane
// binary (a binary built inside a checkout finds it).
func DefaultRepoStarts(dir string) []string {
	starts := []string{os.Getenv("WASMPLANE_SDK"), dir}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	return starts
}

func isRepo(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "sdk", "ABI.md")); err != nil {
		return false
	}
	mod, err := goModDirective(filepath.Join(dir, "go.mod"), "module")
	return err == nil && mod == ModulePath
}

// goModDirective returns the argument of the first line of a go.mod starting with word.
func goModDirective(path, word string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == word {
			return strings.Trim(fields[1], `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no %s directive", path, word)
}

// sourcesIn lists the files of dir with extension ext, sorted.
func sourcesIn(dir, ext string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && filepath.Ext(e.Name()) == ext {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// mainSource picks the one source of a single-file project: the only file with ext, or
// the one named after the directory.
func mainSource(dir, ext string) (string, error) {
	files, err := sourcesIn(dir, ext)
	if err != nil {
		return "", err
	}
	switch len(files) {
	case 0:
		return "", fmt.Errorf("no *%s file in %s", ext, dir)
	case 1:
		return files[0], nil
	}
	abs, _ := filepath.Abs(dir)
	want := filepath.Base(abs) + ext
	for _, f := range files {
		if f == want {
			return f, nil
		}
	}
	return "", fmt.Errorf("several *%s files in %s and none named %s", ext, dir, want)
}

// cargoSDKPath reads the path of the wasmplane dependency from a Cargo.toml
// (`wasmplane = { path = "…" }`), relative to the crate.
func cargoSDKPath(crate string) (string, error) {
	b, err := os.ReadFile(filepath.Join(crate, "Cargo.toml"))
	if err != nil {
		return "", err
	}
	m := cargoDep.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s: no `wasmplane = { path = \"…\" }` dependency", filepath.Join(crate, "Cargo.toml"))
	}
	p := string(m[1])
	if !filepath.IsAbs(p) {
		p = filepath.Join(crate, p)
	}
	return p, nil
}

var cargoDep = regexp.MustCompile(`(?m)^\s*wasmplane\s*=\s*\{[^}]*path\s*=\s*"([^"]+)"`)

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
