package langs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/toolchain"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// The AssemblyScript and C twins of the Go examples label-injector, token-authenticator
// and podimage-initializer, built from source and run through the host with the requests
// and expectations of examples/plugins/go/examples_test.go (plus a few edge cases).

func TestASCLabelInjector(t *testing.T) {
	t.Parallel()
	const tol = `{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}`
	tests := []struct {
		name, op, kind, object string
		want                   []string
	}{
		{"bare pod", "CREATE", "Pod", `{"metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`,
			[]string{"add /metadata/labels {}", `add /metadata/labels/injected-by "wasm"`, `add /metadata/labels/example.com~1team "a~0b"`, "add /spec/tolerations [" + tol + "]"}},
		{"labels and tolerations present", "CREATE", "Pod", `{"metadata":{"labels":{"a":"b"}},"spec":{"tolerations":[{"key":"x","operator":"Exists"}]}}`,
			[]string{`add /metadata/labels/injected-by "wasm"`, `add /metadata/labels/example.com~1team "a~0b"`, "add /spec/tolerations/- " + tol}},
		{"already done", "UPDATE", "Pod", `{"metadata":{"labels":{"injected-by":"wasm","example.com/team":"a~0b"}},"spec":{"tolerations":[` + tol + `]}}`, nil},
		{"wrong value replaced", "CREATE", "Pod", `{"metadata":{"labels":{"injected-by":"go","example.com/team":"a~0b"}},"spec":{"tolerations":[` + tol + `]}}`,
			[]string{`add /metadata/labels/injected-by "wasm"`}},
		{"other kinds get labels only", "CREATE", "ConfigMap", `{"metadata":{"name":"cm"},"data":{}}`,
			[]string{"add /metadata/labels {}", `add /metadata/labels/injected-by "wasm"`, `add /metadata/labels/example.com~1team "a~0b"`}},
		{"delete is left alone", "DELETE", "Pod", `null`, nil},
	}
	for _, lang := range only("c", "assemblyscript") {
		t.Run(lang.Name, func(t *testing.T) {
			t.Parallel() // builds of different toolchains overlap
			mod := lang.Build(t, "label-injector")
			t.Logf("%s label-injector: %d bytes", lang.Name, len(mod))
			r := hostRuntime(t)
			if _, err := load(t, r, "label-injector", mod, `{"labels":{"a":1}}`); !errors.Is(err, wasm.ErrConfigRejected) {
				t.Fatalf("non-string label value: %v, want config-rejected", err)
			}
			p := mustLoad(t, r, "label-injector", mod, `{"labels":{"injected-by":"wasm","example.com/team":"a~0b"},"toleration":`+tol+`}`)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					resp, err := p.Mutate(context.Background(), podRequest(tt.op, tt.kind, tt.object))
					if err != nil {
						t.Fatal(err)
					}
					if got, want := patchLines(resp.Patch), strings.Join(tt.want, "\n"); !resp.Allowed || got != want {
						t.Fatalf("allowed %v patch =\n%s\nwant\n%s", resp.Allowed, got, want)
					}
				})
			}
			// The Go example's own test case: one label and the toleration.
			one := mustLoad(t, r, "label-injector", mod, `{"labels":{"injected-by":"wasm"},"toleration":`+tol+`}`)
			resp, err := one.Mutate(context.Background(), podRequest("CREATE", "Pod", `{"metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`))
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Join([]string{"add /metadata/labels {}", `add /metadata/labels/injected-by "wasm"`, "add /spec/tolerations [" + tol + "]"}, "\n")
			if got := patchLines(resp.Patch); got != want {
				t.Fatalf("patch =\n%s\nwant\n%s", got, want)
			}
			// An object the plugin cannot read is a plugin error, not a decision.
			if _, err := p.Mutate(context.Background(), podRequest("CREATE", "Pod", `[1]`)); !errors.Is(err, wasm.ErrGuest) {
				t.Fatalf("undecodable object: %v, want guest error", err)
			}
		})
	}
}

func TestASCTokenAuthenticator(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers map[string][]string
		user    string // the JSON the user must round-trip to, "" for unauthenticated
		message string
	}{
		{"known token", map[string][]string{"Authorization": {"Bearer s3cret"}}, `{"username":"alice","uid":"42","groups":["dev"]}`, ""},
		{"scheme case and spaces", map[string][]string{"Authorization": {"bearer   s3cret "}}, `{"username":"alice","uid":"42","groups":["dev"]}`, ""},
		{"extra round-trips", map[string][]string{"Authorization": {"Bearer t\"2"}}, `{"username":"bob \"b\"","extra":{"scopes":["a","b"]}}`, ""},
		{"unknown token", map[string][]string{"Authorization": {"Bearer nope"}}, "", "unknown bearer token"},
		{"basic auth is not ours", map[string][]string{"Authorization": {"Basic YTpi"}}, "", ""},
		{"first bearer value decides", map[string][]string{"Authorization": {"Basic YTpi", "Bearer s3cret"}}, `{"username":"alice","uid":"42","groups":["dev"]}`, ""},
		{"no credentials", nil, "", ""},
	}
	for _, lang := range only("c", "assemblyscript") {
		t.Run(lang.Name, func(t *testing.T) {
			t.Parallel() // builds of different toolchains overlap
			mod := lang.Build(t, "token-authenticator")
			t.Logf("%s token-authenticator: %d bytes", lang.Name, len(mod))
			r := hostRuntime(t)
			for _, bad := range []string{`{"tokens":{}}`, `{}`, `{"tokens":{"x":{"uid":"1"}}}`, `{"tokens":{"":{"username":"a"}}}`, `{"tokens":{"x":{"username":"a","groups":"dev"}}}`} {
				if _, err := load(t, r, "token-authenticator", mod, bad); !errors.Is(err, wasm.ErrConfigRejected) {
					t.Fatalf("config %s: %v, want config-rejected", bad, err)
				}
			}
			p := mustLoad(t, r, "token-authenticator", mod, `{"tokens":{"s3cret":{"username":"alice","uid":"42","groups":["dev"]},"t\"2":{"username":"bob \"b\"","extra":{"scopes":["a","b"]}}}}`)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					resp, err := p.Authenticate(context.Background(), &abi.AuthenticateRequest{Method: "GET", Path: "/api", Headers: tt.headers})
					if err != nil {
						t.Fatal(err)
					}
					if tt.user != "" {
						got, _ := json.Marshal(resp.User)
						if !resp.Authenticated || string(got) != tt.user {
							t.Fatalf("resp = %+v user %s, want user %s", resp, got, tt.user)
						}
						return
					}
					if resp.Authenticated || resp.Message != tt.message {
						t.Fatalf("resp = %+v, want unauthenticated with message %q", resp, tt.message)
					}
				})
			}
		})
	}
}

func TestASCPodImageInitializer(t *testing.T) {
	t.Parallel()
	for _, lang := range only("c", "assemblyscript") {
		t.Run(lang.Name, func(t *testing.T) {
			t.Parallel() // builds of different toolchains overlap
			mod := lang.Build(t, "podimage-initializer")
			t.Logf("%s podimage-initializer: %d bytes", lang.Name, len(mod))
			r := hostRuntime(t)
			for _, bad := range []string{`{}`, `{"mirror":""}`, `{"mirror":"/"}`, `{"mirror":3}`} {
				if _, err := load(t, r, "podimage-initializer", mod, bad); !errors.Is(err, wasm.ErrConfigRejected) {
					t.Fatalf("config %s: %v, want config-rejected", bad, err)
				}
			}
			// A trailing slash is dropped, as the Go twin does.
			p := mustLoad(t, r, "podimage-initializer", mod, `{"mirror":"mirror.example.com/"}`)
			initialize := func(kind, object string) *abi.InitializeResponse {
				t.Helper()
				resp, err := p.Initialize(context.Background(), &abi.InitializeRequest{
					Kind: abi.GroupVersionKind{Version: "v1", Kind: kind}, Name: "web", Namespace: "default",
					Object: json.RawMessage(object),
				})
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			resp := initialize("Pod", `{"spec":{"initContainers":[{"name":"i","image":"busybox"}],"containers":[{"name":"a","image":"nginx:1.27"},{"name":"b","image":"quay.io/org/app:v2"},{"name":"c","image":"mirror.example.com/x:1"},{"name":"d","image":"localhost/app"},{"name":"e","image":"team/app:3"},{"name":"f","image":"localhost:5000/app"}]}}`)
			want := strings.Join([]string{
				`replace /spec/initContainers/0/image "mirror.example.com/library/busybox"`,
				`replace /spec/containers/0/image "mirror.example.com/library/nginx:1.27"`,
				`replace /spec/containers/1/image "mirror.example.com/org/app:v2"`,
				`replace /spec/containers/3/image "mirror.example.com/app"`,
				`replace /spec/containers/4/image "mirror.example.com/team/app:3"`,
				`replace /spec/containers/5/image "mirror.example.com/app"`,
			}, "\n")
			if got := patchLines(resp.Patch); got != want || resp.Rejected || resp.Object != nil {
				t.Fatalf("patch =\n%s\nwant\n%s", got, want)
			}
			if resp := initialize("Pod", `{"spec":{"containers":[{"name":"a","image":"mirror.example.com/library/nginx:1.27"}]}}`); len(resp.Patch) != 0 || resp.Rejected {
				t.Fatalf("mirrored pod: %+v, want nothing to change", resp)
			}
			if resp := initialize("ConfigMap", `{"data":{"image":"nginx"}}`); len(resp.Patch) != 0 || resp.Rejected {
				t.Fatalf("config map: %+v, want nothing to change", resp)
			}
			if _, err := p.Initialize(context.Background(), &abi.InitializeRequest{Kind: abi.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: json.RawMessage(`"x"`)}); !errors.Is(err, wasm.ErrGuest) {
				t.Fatalf("undecodable object: %v, want guest error", err)
			}
		})
	}
}

// TestASCOwnerAnnotator covers the SDKs' warnings and audit annotations (ABI §7.3).
func TestASCOwnerAnnotator(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, op, object string
		patch            []string
		warnings         []string
		audit            map[string]string
	}{
		{"no label: warning", "CREATE", `{"metadata":{"name":"web"},"spec":{}}`, nil,
			[]string{`pod "web" has no "team" label: annotation example.com/owner not set`}, nil},
		{"empty label: warning", "CREATE", `{"metadata":{"labels":{"team":""}}}`, nil,
			[]string{`pod "web" has no "team" label: annotation example.com/owner not set`}, nil},
		{"label, no annotations", "CREATE", `{"metadata":{"labels":{"team":"blue"}}}`,
			[]string{"add /metadata/annotations {}", `add /metadata/annotations/example.com~1owner "blue"`}, nil, map[string]string{"owner": "blue"}},
		{"other annotations", "UPDATE", `{"metadata":{"labels":{"team":"blue \"b\""},"annotations":{"a":"b"}}}`,
			[]string{`add /metadata/annotations/example.com~1owner "blue \"b\""`}, nil, map[string]string{"owner": `blue "b"`}},
		{"already annotated: idempotent", "CREATE", `{"metadata":{"labels":{"team":"blue"},"annotations":{"example.com/owner":"blue"}}}`,
			nil, nil, map[string]string{"owner": "blue"}},
		{"delete is left alone", "DELETE", `null`, nil, nil, nil},
	}
	for _, lang := range only("c", "assemblyscript") {
		t.Run(lang.Name, func(t *testing.T) {
			t.Parallel() // builds of different toolchains overlap
			mod := lang.Build(t, "owner-annotator")
			t.Logf("%s owner-annotator: %d bytes", lang.Name, len(mod))
			r := hostRuntime(t)
			if _, err := load(t, r, "owner-annotator", mod, `{"label":"team"}`); !errors.Is(err, wasm.ErrConfigRejected) {
				t.Fatalf("no annotation: %v, want config-rejected", err)
			}
			p := mustLoad(t, r, "owner-annotator", mod, `{"label":"team","annotation":"example.com/owner"}`)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					resp, err := p.Mutate(context.Background(), podRequest(tt.op, "Pod", tt.object))
					if err != nil {
						t.Fatal(err)
					}
					if got, want := patchLines(resp.Patch), strings.Join(tt.patch, "\n"); !resp.Allowed || got != want {
						t.Fatalf("allowed %v patch =\n%s\nwant\n%s", resp.Allowed, got, want)
					}
					if fmt.Sprintf("%q", resp.Warnings) != fmt.Sprintf("%q", tt.warnings) || fmt.Sprint(resp.AuditAnnotations) != fmt.Sprint(tt.audit) {
						t.Fatalf("warnings %q audit %v, want %q %v", resp.Warnings, resp.AuditAnnotations, tt.warnings, tt.audit)
					}
				})
			}
		})
	}
}

// ascConfigs are valid configurations of the examples the C and AssemblyScript SDKs add
// beside require-labels, label-score and node-label-filter (TestModuleSizes has those).
var ascConfigs = map[string]string{
	"label-injector":       `{"labels":{"injected-by":"wasm"},"toleration":{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}}`,
	"token-authenticator":  `{"tokens":{"s3cret":{"username":"alice","uid":"42","groups":["dev"]}}}`,
	"podimage-initializer": `{"mirror":"mirror.example.com"}`,
	"owner-annotator":      `{"label":"team","annotation":"example.com/owner"}`,
}

// TestASCModuleSizes reports (go test -v) the size of each of those modules and the time
// to create one configured instance (instantiate, _initialize, version check, configure).
func TestASCModuleSizes(t *testing.T) {
	t.Parallel()
	for _, lang := range only("c", "assemblyscript") {
		t.Run(lang.Name, func(t *testing.T) {
			t.Parallel() // builds of different toolchains overlap
			r := hostRuntime(t)
			for _, ex := range []string{"label-injector", "token-authenticator", "podimage-initializer", "owner-annotator"} {
				mod := lang.Build(t, ex)
				m, err := r.Compile(context.Background(), mod, "")
				if err != nil {
					t.Fatal(err)
				}
				const n = 20
				start := time.Now()
				for range n {
					p, err := r.Load(context.Background(), m, wasm.PluginConfig{Name: ex, Config: []byte(ascConfigs[ex]), Limits: wasm.Limits{Instances: 1}})
					if err != nil {
						t.Fatal(err)
					}
					_ = p.Close(context.Background())
				}
				t.Logf("%-15s %-21s %6d bytes, load (instantiate+configure) %v", lang.Name, ex, len(mod), time.Since(start)/n)
				_ = m.Close(context.Background())
			}
		})
	}
}

// ascAnswersC and ascAnswersAS exercise the answer builders no example uses: a denial
// with warnings and audit annotations, and a rejected initialization.
const ascAnswersC = `#include "wasmplane.h"
static void validate(wp_json req) {
  wp_admission a = {0};
  wp_admission_warn(&a, "first \"w\"");
  wp_admission_warn(&a, "second");
  wp_admission_audit(&a, "why", "test");
  if (wp_json_eq(wp_json_get(req, "name"), "deny")) {
    wp_out_deny(&a, 409, "Conflict", "no \"way\"");
  } else if (wp_json_eq(wp_json_get(req, "name"), "default")) {
    wp_out_deny(NULL, 0, NULL, "refused");
  } else {
    wp_out_allow(&a);
  }
  wp_admission_free(&a);
}
static void initialize(wp_json req) {
  if (wp_json_eq(wp_json_get(req, "name"), "reject")) {
    wp_out_initialize_rejected(0, NULL, "bad image");
  } else {
    wp_patch p = {0};
    wp_out_initialized(&p);
  }
}
WASMPLANE_HOOK(validate, validate)
WASMPLANE_HOOK(initialize, initialize)
`

const ascAnswersAS = `import { Admission, Patch, Value, Writer, call, initialized, initializeRejected } from "SDK";
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free } from "SDK";
function onValidate(req: Value, w: Writer): void {
  const a = new Admission();
  a.warn('first "w"');
  a.warn("second");
  a.annotate("why", "test");
  const name = req.get("name").str();
  if (name == "deny") a.deny(w, 'no "way"', 409, "Conflict");
  else if (name == "default") new Admission().deny(w, "refused");
  else a.allow(w);
}
function onInitialize(req: Value, w: Writer): void {
  if (req.get("name").str() == "reject") initializeRejected(w, "bad image");
  else initialized(w, new Patch());
}
export function validate(ptr: usize, len: i32): u64 {
  return call(ptr, len, onValidate);
}
export function initialize(ptr: usize, len: i32): u64 {
  return call(ptr, len, onInitialize);
}
`

// buildASCSource compiles a one-file plugin written in the test with lang's toolchain and
// SDK, with the command lines of plugins/wasm/toolkit/toolchain.
func buildASCSource(t *testing.T, lang string) []byte {
	t.Helper()
	if lang != "c" {
		return buildASSource(t, "answers", ascAnswersAS)
	}
	root := wasmtest.ModuleRoot(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "plugin.wasm")
	clang := wasmtest.RequireTool(t, "clang")
	wasmtest.RequireTool(t, "wasm-ld")
	src := filepath.Join(dir, "answers.c")
	if err := os.WriteFile(src, []byte(ascAnswersC), 0o644); err != nil {
		t.Fatal(err)
	}
	args := toolchain.CArgs(out, "sdk/c", src)
	return runBuild(t, exec.Command(clang, args[1:]...), root, out)
}

// buildASSource compiles an AssemblyScript plugin whose source imports the SDK from
// "SDK", as the examples are compiled.
func buildASSource(t *testing.T, name, source string) []byte {
	t.Helper()
	root := wasmtest.ModuleRoot(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "plugin.wasm")
	node := wasmtest.RequireTool(t, "node")
	wasmtest.Need(t, fileExists(filepath.Join(root, toolchain.ASCompiler)), "assemblyscript (npm ci in sdk/assemblyscript)")
	sdk, err := filepath.Rel(dir, filepath.Join(root, "sdk/assemblyscript/assembly/index"))
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, name+".ts")
	if err := os.WriteFile(src, []byte(strings.ReplaceAll(source, `"SDK"`, strconv.Quote(filepath.ToSlash(sdk)))), 0o644); err != nil {
		t.Fatal(err)
	}
	// asc names a file by the path it was reached by, joined lexically from the entry
	// (given relative to the root); --use abort= must name the SDK's abi file that way.
	entry, err := filepath.Rel(root, src)
	if err != nil {
		t.Fatal(err)
	}
	entry = filepath.ToSlash(entry)
	abort := path.Join(path.Dir(path.Join(path.Dir(entry), filepath.ToSlash(sdk))), "abi/abort")
	args := toolchain.ASArgs(toolchain.ASCompiler, out, entry, abort)
	return runBuild(t, exec.Command(node, args[1:]...), root, out)
}

// runBuild runs a compiler in the repository root and returns the module it wrote.
func runBuild(t *testing.T, cmd *exec.Cmd, root, out string) []byte {
	t.Helper()
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, b)
	}
	mod, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestASCSDKAnswers checks the SDKs' denial and rejection answers through the host.
func TestASCSDKAnswers(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"c", "assemblyscript"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel() // builds of different toolchains overlap
			p := mustLoad(t, hostRuntime(t), "answers", buildASCSource(t, lang), `{}`)
			ctx := context.Background()
			req := func(name string) *abi.AdmissionRequest {
				r := podRequest("CREATE", "Pod", `{}`)
				r.Name = name
				return r
			}
			warnings := `["first \"w\"" "second"]`
			resp, err := p.Validate(ctx, req("deny"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Allowed || resp.Code != 409 || resp.Reason != "Conflict" || resp.Message != `no "way"` ||
				fmt.Sprintf("%q", resp.Warnings) != warnings || fmt.Sprint(resp.AuditAnnotations) != "map[why:test]" {
				t.Fatalf("deny: %+v", resp)
			}
			if resp, err = p.Validate(ctx, req("default")); err != nil || resp.Allowed || resp.Code != 403 || resp.Reason != "Forbidden" || resp.Message != "refused" || resp.Warnings != nil {
				t.Fatalf("default deny: %+v, %v", resp, err)
			}
			if resp, err = p.Validate(ctx, req("ok")); err != nil || !resp.Allowed || fmt.Sprintf("%q", resp.Warnings) != warnings {
				t.Fatalf("allow: %+v, %v", resp, err)
			}
			ir, err := p.Initialize(ctx, &abi.InitializeRequest{Kind: abi.GroupVersionKind{Version: "v1", Kind: "Pod"}, Name: "reject", Object: json.RawMessage(`{}`)})
			if err != nil || !ir.Rejected || ir.Code != 422 || ir.Reason != "Invalid" || ir.Message != "bad image" {
				t.Fatalf("reject: %+v, %v", ir, err)
			}
			ir, err = p.Initialize(ctx, &abi.InitializeRequest{Kind: abi.GroupVersionKind{Version: "v1", Kind: "Pod"}, Name: "ok", Object: json.RawMessage(`{}`)})
			if err != nil || ir.Rejected || ir.Patch != nil || ir.Object != nil {
				t.Fatalf("nothing to change: %+v, %v", ir, err)
			}
		})
	}
}
