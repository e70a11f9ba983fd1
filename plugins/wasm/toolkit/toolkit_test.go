package toolkit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/toolchain"
	"github.com/wasmplane/wasmplane/sdk"
)

// writeFiles creates files (path -> content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseLang(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Lang
		err  bool
	}{
		{"go", Go, false}, {"Golang", Go, false}, {"c", C, false}, {"as", AssemblyScript, false},
		{"assemblyscript", AssemblyScript, false}, {"rs", Rust, false}, {"rust", Rust, false},
		{" wat ", WAT, false}, {"java", "", true}, {"", "", true},
	} {
		got, err := ParseLang(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseLang(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseHooks(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
		err  bool
	}{
		{[]string{"validate"}, []string{"validate"}, false},
		{[]string{"validate,mutate", "Score"}, []string{"validate", "mutate", "score"}, false},
		{[]string{"filter", "filter,"}, []string{"filter"}, false},
		{[]string{"configure"}, nil, true}, // the host calls configure itself
		{[]string{"nope"}, nil, true},
		{nil, nil, true},
	} {
		got, err := ParseHooks(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ParseHooks(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  Lang
	}{
		{"go module", []string{"go.mod", "main.go"}, Go},
		{"go package without go.mod", []string{"main.go", "README.md"}, Go},
		{"go module with C fixtures", []string{"go.mod", "x.c"}, Go},
		{"rust crate with a .wat", []string{"Cargo.toml", "fixture.wat"}, Rust},
		{"assemblyscript", []string{"plugin.ts"}, AssemblyScript},
		{"asconfig", []string{"asconfig.json"}, AssemblyScript},
		{"c with vendored sdk", []string{"p.c", "wasmplane.c", "wasmplane.h"}, C},
		{"wat", []string{"p.wat", "README.md"}, WAT},
		{"nothing", []string{"README.md"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{}
			for _, f := range tc.files {
				files[f] = ""
			}
			writeFiles(t, dir, files)
			got, err := Detect(dir)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("Detect = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Detect = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// fakeRepo makes a directory FindRepo accepts as a wasmplane checkout.
func fakeRepo(t *testing.T) string {
	t.Helper()
	r := t.TempDir()
	writeFiles(t, r, map[string]string{
		"go.mod":            "module " + ModulePath + "\n\ngo 1.26.8\n",
		"sdk/ABI.md":        "# ABI\n",
		"sdk/c/wasmplane.h": "/* h */\n", "sdk/c/wasmplane.c": "/* c */\n",
		"sdk/rust/src/lib.rs": "// sdk\n",
	})
	return r
}

func TestFindRepo(t *testing.T) {
	r := fakeRepo(t)
	deep := filepath.Join(r, "examples", "plugins", "c", "x")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindRepo("", t.TempDir(), deep); err != nil || got != r {
		t.Fatalf("FindRepo = %q, %v; want %q", got, err, r)
	}
	other := t.TempDir()
	writeFiles(t, other, map[string]string{"go.mod": "module example.com/other\n", "sdk/ABI.md": ""})
	if got, err := FindRepo(other); err == nil {
		t.Fatalf("FindRepo(another module) = %q, want an error", got)
	}
}

func TestPlan(t *testing.T) {
	repo := fakeRepo(t)
	for _, tc := range []struct {
		name  string
		files map[string]string
		opts  func(dir string) BuildOptions
		want  func(dir string) []Step
		err   string
	}{{
		name:  "go",
		files: map[string]string{"go.mod": "module x\n", "main.go": "package main\n"},
		want: func(dir string) []Step {
			return []Step{{Dir: dir, Env: []string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"},
				Args: []string{"go", "build", "-buildmode=c-shared", "-ldflags=-s -w", "-trimpath", "-o", filepath.Join(dir, filepath.Base(dir)+".wasm"), "."}}}
		},
	}, {
		name:  "c with the vendored sdk, explicit output",
		files: map[string]string{"p.c": "", "util.c": "", "wasmplane.c": "", "wasmplane.h": ""},
		opts:  func(dir string) BuildOptions { return BuildOptions{Dir: dir, Out: filepath.Join(dir, "out.wasm")} },
		want: func(dir string) []Step {
			return []Step{{Dir: dir, Args: []string{"clang", "--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-Wall", "-Werror", "-Wl,--strip-all",
				"-I", dir, "p.c", "util.c", filepath.Join(dir, "wasmplane.c"), "-o", filepath.Join(dir, "out.wasm")}}}
		},
	}, {
		name:  "c with the checkout's sdk",
		files: map[string]string{"p.c": ""},
		opts:  func(dir string) BuildOptions { return BuildOptions{Dir: dir, Repo: repo} },
		want: func(dir string) []Step {
			sdk := filepath.Join(repo, "sdk", "c")
			return []Step{{Dir: dir, Args: []string{"clang", "--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-Wall", "-Werror", "-Wl,--strip-all",
				"-I", sdk, "p.c", filepath.Join(sdk, "wasmplane.c"), "-o", filepath.Join(dir, filepath.Base(dir)+".wasm")}}}
		},
	}, {
		name:  "wat",
		files: map[string]string{"m.wat": "(module)"},
		want: func(dir string) []Step {
			return []Step{{Dir: dir, Args: []string{"wat2wasm", "m.wat", "-o", filepath.Join(dir, filepath.Base(dir)+".wasm")}}}
		},
	}, {
		name:  "wat, ambiguous",
		files: map[string]string{"a.wat": "", "b.wat": ""},
		err:   "several *.wat files",
	}, {
		name:  "assemblyscript",
		files: map[string]string{"p.ts": `import { call } from "../sdk/assemblyscript/assembly/index";`},
		opts:  func(dir string) BuildOptions { return BuildOptions{Dir: dir, Repo: repo, Lang: AssemblyScript} },
		want: func(dir string) []Step {
			return []Step{{Dir: dir, Args: []string{"node", filepath.Join(repo, toolchain.ASCompiler), "p.ts", "-o", filepath.Join(dir, filepath.Base(dir)+".wasm"),
				"-O3", "--noAssert", "--use", "abort=../sdk/assemblyscript/assembly/abi/abort"}}}
		},
	}, {
		name: "assemblyscript project with its own compiler",
		files: map[string]string{"package.json": "{}",
			"p.ts": `import { call } from "./third_party/wasmplane/sdk/assemblyscript/assembly/index";`},
		want: func(dir string) []Step {
			return []Step{{Dir: dir, Args: []string{"node", filepath.Join(dir, "node_modules/assemblyscript/bin/asc.js"), "p.ts", "-o", filepath.Join(dir, filepath.Base(dir)+".wasm"),
				"-O3", "--noAssert", "--use", "abort=third_party/wasmplane/sdk/assemblyscript/assembly/abi/abort"}}}
		},
	}, {
		name:  "assemblyscript without the sdk",
		files: map[string]string{"p.ts": `export function validate(): void {}`},
		opts:  func(dir string) BuildOptions { return BuildOptions{Dir: dir, Repo: repo} },
		err:   "does not import the SDK",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			opts := BuildOptions{Dir: dir}
			if tc.opts != nil {
				opts = tc.opts(dir)
			}
			_, steps, err := Plan(opts, t.TempDir())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Plan error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want(dir)
			if len(steps) != len(want) {
				t.Fatalf("steps = %v, want %v", steps, want)
			}
			for i := range want {
				if steps[i].Dir != want[i].Dir || !slices.Equal(steps[i].Env, want[i].Env) || !slices.Equal(steps[i].Args, want[i].Args) {
					t.Errorf("step %d =\n  %v in %s\nwant\n  %v in %s", i, steps[i], steps[i].Dir, want[i], want[i].Dir)
				}
			}
		})
	}
}

func TestRustArgs(t *testing.T) {
	got := toolchain.RustArgs("/usr/bin/rustc", "wasm32-wasi", "/o/p.wasm", "/w", "/sdk/src/lib.rs", "my_plugin", "/p/src/lib.rs")
	want := [][]string{
		{"/usr/bin/rustc", "--crate-type", "rlib", "--crate-name", "wasmplane", "--out-dir", "/w",
			"--edition", "2021", "--target", "wasm32-wasi", "-C", "opt-level=s", "-C", "panic=abort", "/sdk/src/lib.rs"},
		{"/usr/bin/rustc", "--crate-type", "cdylib", "--crate-name", "my_plugin", "-C", "lto", "-C", "strip=symbols", "-L", "/w",
			"--extern", "wasmplane=/w/libwasmplane.rlib", "-o", "/o/p.wasm",
			"--edition", "2021", "--target", "wasm32-wasi", "-C", "opt-level=s", "-C", "panic=abort", "/p/src/lib.rs"},
	}
	if len(got) != 2 || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
		t.Fatalf("RustArgs =\n%q\nwant\n%q", got, want)
	}
}

func TestCargoSDKPath(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Cargo.toml": "[dependencies]\nwasmplane = { path = \"../sdk/rust\" }\n"})
	if got, err := cargoSDKPath(dir); err != nil || got != filepath.Join(dir, "..", "sdk", "rust") {
		t.Fatalf("cargoSDKPath = %q, %v", got, err)
	}
	writeFiles(t, dir, map[string]string{"Cargo.toml": "[dependencies]\nserde = \"1\"\n"})
	if _, err := cargoSDKPath(dir); err == nil {
		t.Fatal("cargoSDKPath without the wasmplane dependency: want an error")
	}
}

func TestReadJSONFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
		err                 bool
	}{
		{"object", "{\n  \"a\": [1, 2]\n}\n", `{"a":[1,2]}`, false},
		{"array", `[1]`, "", true},
		{"null", `null`, "", true},
		{"garbage", `{"a":`, "", true},
		{"empty", ``, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".json")
			writeFiles(t, dir, map[string]string{tc.name + ".json": tc.content})
			got, err := ReadJSONFile(p, nil)
			if (err != nil) != tc.err || string(got) != tc.want {
				t.Fatalf("ReadJSONFile = %s, %v; want %s, error %v", got, err, tc.want, tc.err)
			}
		})
	}
	if got, err := ReadJSONFile("-", strings.NewReader(`{"x": true}`)); err != nil || string(got) != `{"x":true}` {
		t.Fatalf("ReadJSONFile(-) = %s, %v", got, err)
	}
	if _, err := ReadJSONFile(filepath.Join(dir, "missing.json"), nil); !os.IsNotExist(errorsUnwrapAll(err)) {
		t.Fatalf("missing file: %v", err)
	}
}

// errorsUnwrapAll returns the innermost error of a chain of single wraps.
func errorsUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func TestSchedulingInput(t *testing.T) {
	const req = `{"pod":{"metadata":{"name":"p","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","a":"b"}},"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":80}]}],"volumes":[{"name":"v"}]}},"nodes":[{"metadata":{"name":"a"}},{"metadata":{"name":"b","uid":"u","resourceVersion":"7"}}]}`
	in, err := schedulingInput(json.RawMessage(req), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Nodes) != 2 || in.Nodes[0].UID == "" || in.Nodes[0].UID == in.Nodes[1].UID || in.Nodes[1].ResourceVersion != "7" {
		t.Fatalf("nodes = %+v %+v", in.Nodes[0], in.Nodes[1])
	}
	// The compact pod, as the scheduler sends it; whole with fullPods.
	if want := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i","resources":{}}]}}`; string(in.Pod) != want {
		t.Errorf("compact pod %s, want %s", in.Pod, want)
	}
	full, err := schedulingInput(json.RawMessage(req), true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(full.Pod), `"volumes"`) || !strings.Contains(string(full.Pod), "last-applied") {
		t.Errorf("full pod %s lacks fields", full.Pod)
	}
	for _, bad := range []string{`{"nodes":[]}`, `{"pod":null}`, `{"pod":{},"nodes":[{}],"requested":[]}`, `{"pod":{},"nodes":{}}`, `{"pod":{"spec":7},"nodes":[]}`} {
		if _, err := schedulingInput(json.RawMessage(bad), false); err == nil {
			t.Errorf("schedulingInput(%s): want an error", bad)
		}
	}
}

// TestObjectDocument: what `wasmplane plugin test` makes of a request file's objects for a
// plugin that asked for compact pods or object metadata, as the server sends them.
func TestObjectDocument(t *testing.T) {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","generateName":"p-","labels":{"team":"a"},"annotations":{"x":"<y>"},"creationTimestamp":null},"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":80}]}],"volumes":[{"name":"v"}]}}`
	tests := []struct {
		name, in, want string
		form           wasm.ObjectForm
		wantErr        bool
	}{
		{name: "pod", form: wasm.CompactPods, in: pod,
			want: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"team":"a"},"annotations":{"x":"\u003cy\u003e"}},"spec":{"containers":[{"name":"c","image":"i","resources":{}}]}}`},
		{name: "another kind", form: wasm.CompactPods, in: `{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v"}}`, want: `{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v"}}`},
		{name: "no object", form: wasm.CompactPods, in: ``, want: ``},
		{name: "null", form: wasm.CompactPods, in: `null`, want: `null`},
		{name: "a pod that does not decode", form: wasm.CompactPods, in: `{"apiVersion":"v1","kind":"Pod","spec":7}`, wantErr: true},
		{name: "pod, metadata", form: wasm.ObjectMetadata, in: pod,
			want: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","generateName":"p-","labels":{"team":"a"},"annotations":{"x":"\u003cy\u003e"}}}`},
		{name: "another kind, metadata", form: wasm.ObjectMetadata, in: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","uid":"u"},"data":{"k":"v"}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","uid":"u"}}`},
		{name: "no object, metadata", form: wasm.ObjectMetadata, in: ``, want: ``},
		{name: "null, metadata", form: wasm.ObjectMetadata, in: `null`, want: `null`},
		{name: "not JSON, metadata", form: wasm.ObjectMetadata, in: `{"metadata":`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := objectDocument(json.RawMessage(tt.in), tt.form)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && string(got) != tt.want {
				t.Fatalf("got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want wasmv1.Rule
		err  bool
	}{
		{"pods:CREATE,UPDATE", wasmv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"pods"},
			Operations: []wasmv1.Operation{"CREATE", "UPDATE"}}, false},
		{"deployments.apps,replicasets.apps:create", wasmv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"*"},
			Resources: []string{"deployments", "replicasets"}, Operations: []wasmv1.Operation{"CREATE"}}, false},
		{"pods", wasmv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"pods"}, Operations: []wasmv1.Operation{"*"}}, false},
		{"*:DELETE", wasmv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}, Operations: []wasmv1.Operation{"DELETE"}}, false},
		{":CREATE", wasmv1.Rule{}, true},
		{"pods:EXPLODE", wasmv1.Rule{}, true},
	} {
		got, err := ParseRule(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParseRule(%q) error = %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if !tc.err && (!slices.Equal(got.APIGroups, tc.want.APIGroups) || !slices.Equal(got.APIVersions, tc.want.APIVersions) ||
			!slices.Equal(got.Resources, tc.want.Resources) || !slices.Equal(got.Operations, tc.want.Operations)) {
			t.Errorf("ParseRule(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestBuildSpec(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	spec, err := BuildSpec(SpecOptions{Digest: "sha256:" + hex, Hooks: []string{"validate,mutate"}, Rules: []string{"pods:CREATE"},
		Config: json.RawMessage(`{"label":"team"}`), FailurePolicy: "Ignore", ReinvocationPolicy: "Never", Profiles: []string{"p"}, Weight: 2})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Module.Digest != "sha256:"+hex || spec.SHA256 != hex {
		t.Errorf("digest pins = %q, %q", spec.Module.Digest, spec.SHA256)
	}
	if !slices.Equal(spec.Hooks, []wasmv1.Hook{"validate", "mutate"}) || len(spec.Rules) != 1 || string(spec.Config.Raw) != `{"label":"team"}` ||
		*spec.FailurePolicy != wasmv1.Ignore || spec.ReinvocationPolicy != wasmv1.Never || spec.Scheduler.Weight != 2 || !slices.Equal(spec.Scheduler.Profiles, []string{"p"}) {
		t.Errorf("spec = %+v", spec)
	}
	for _, bad := range []SpecOptions{
		{Digest: "sha256:abc", Hooks: []string{"validate"}},
		{Digest: "sha256:" + strings.Repeat("AB", 32), Hooks: []string{"validate"}},
		{Digest: hex, Hooks: nil},
		{Digest: hex, Hooks: []string{"validate"}, FailurePolicy: "Sometimes"},
		{Digest: hex, Hooks: []string{"mutate"}, ReinvocationPolicy: "Always"},
		{Digest: hex, Hooks: []string{"score"}, Weight: -1},
		{Digest: hex, Hooks: []string{"validate"}, Rules: []string{"pods:NOPE"}},
	} {
		if _, err := BuildSpec(bad); err == nil {
			t.Errorf("BuildSpec(%+v): want an error", bad)
		}
	}
}

func TestKubeconfigPath(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	if got := KubeconfigPath(""); got != DefaultKubeconfig {
		t.Errorf("default = %q", got)
	}
	t.Setenv("KUBECONFIG", "/k/env")
	if got := KubeconfigPath(""); got != "/k/env" {
		t.Errorf("env = %q", got)
	}
	if got := KubeconfigPath("/k/flag"); got != "/k/flag" {
		t.Errorf("flag = %q", got)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if p50, p99 := percentile(d, 50), percentile(d, 99); p50 != 50 || p99 != 99 {
		t.Errorf("p50, p99 = %v, %v", p50, p99)
	}
	if got := percentile(d[:1], 99); got != 1 {
		t.Errorf("one sample p99 = %v", got)
	}
}

func TestInitRefuses(t *testing.T) {
	repo := fakeRepo(t)
	full := t.TempDir()
	writeFiles(t, full, map[string]string{"x": ""})
	for _, tc := range []struct {
		name string
		opts InitOptions
		err  string
	}{
		{"non-empty directory", InitOptions{Dir: full, Lang: C, Hook: "validate", Repo: repo}, "not empty"},
		{"wat cannot filter", InitOptions{Dir: filepath.Join(t.TempDir(), "p"), Lang: WAT, Hook: "filter"}, "cannot do filter"},
		{"bad hook", InitOptions{Dir: filepath.Join(t.TempDir(), "p"), Lang: Go, Hook: "configure", Repo: repo}, "unknown hook"},
		{"bad name", InitOptions{Dir: filepath.Join(t.TempDir(), "My Plugin"), Lang: WAT, Hook: "validate"}, "must be lowercase"},
		{"not a checkout", InitOptions{Dir: filepath.Join(t.TempDir(), "p"), Lang: C, Hook: "validate", Repo: t.TempDir()}, "not a wasmplane checkout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Init(tc.opts); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Init error = %v, want %q", err, tc.err)
			}
		})
	}
}

// TestInitEveryTemplate renders every language and hook (without building: the
// integration test builds them) and checks the files each project needs.
func TestInitEveryTemplate(t *testing.T) {
	v := VendorDir + "/sdk/"
	need := map[Lang][]string{Go: {"go.mod", "main.go", VendorDir + "/go.mod", v + "go/validate/validate.go", v + "go/internal/guest/guest.go"},
		C: {"p.c", "wasmplane.h", "wasmplane.c"}, AssemblyScript: {"p.ts", "package.json", v + "assemblyscript/assembly/index.ts"},
		Rust: {"Cargo.toml", "src/lib.rs", v + "rust/Cargo.toml", v + "rust/src/lib.rs"}, WAT: {"p.wat"}, Rego: {"p.rego"}}
	for _, lang := range Langs() {
		for _, hook := range PluginHooks() {
			t.Run(string(lang)+"/"+hook, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "p")
				_, err := Init(InitOptions{Dir: dir, Lang: lang, Hook: hook})
				if lang == WAT && (hook == "filter" || hook == "score") || lang == Rego && hook != "validate" {
					if err == nil {
						t.Fatal("want an error")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range append(need[lang], "README.md", "request.json", "config.json", v+"ABI.md") {
					b, err := os.ReadFile(filepath.Join(dir, f))
					if err != nil {
						t.Fatal(err)
					}
					if strings.Contains(string(b), "[[") || strings.Contains(string(b), "<no value>") {
						t.Errorf("%s: unrendered template text", f)
					}
					// A project to commit: nothing points outside it.
					if strings.Contains(string(b), filepath.Dir(dir)) {
						t.Errorf("%s names the directory the project is in", f)
					}
				}
				if _, err := os.Stat(filepath.Join(dir, v+"go/score/score_test.go")); err == nil {
					t.Error("the SDK's tests were copied")
				}
				if _, err := os.Stat(filepath.Join(dir, v+"go/jsonview/testdata")); err == nil {
					t.Error("the SDK's test data were copied")
				}
				if got, err := Detect(dir); err != nil || got != lang {
					t.Errorf("Detect(scaffold) = %q, %v", got, err)
				}
			})
		}
	}
}

// TestPinnedVersions: what scaffolded projects pin agrees with the repository: the go
// directive of the wasmplane module (the Go SDK is part of it) and the asc the
// AssemblyScript SDK pins.
func TestPinnedVersions(t *testing.T) {
	gover, err := goModDirective(filepath.Join("..", "..", "..", "go.mod"), "go")
	if err != nil {
		t.Fatal(err)
	}
	if GoVersion != gover && !strings.HasPrefix(gover, GoVersion+".") {
		t.Errorf("GoVersion %s, the module's go directive %s", GoVersion, gover)
	}
	asc, err := ascVersion(sdk.Files())
	if err != nil || asc != toolchain.ASCVersion {
		t.Errorf("the SDK pins asc %q (%v); toolchain.ASCVersion is %q", asc, err, toolchain.ASCVersion)
	}
	script, err := os.ReadFile(filepath.Join("..", "..", "..", "scripts", "install-toolchains-langs.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "\nopa_version="+toolchain.OPAVersion+"\n") {
		t.Errorf("scripts/install-toolchains-langs.sh does not install OPA %s (toolchain.OPAVersion)", toolchain.OPAVersion)
	}
}
