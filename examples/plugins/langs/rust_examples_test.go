package langs_test

// The Rust twins of the Go examples (examples/plugins/go): built from source with rustc
// and the Rust SDK, run through the host with the requests and expectations of
// examples/plugins/go/examples_test.go, plus the cases the C and AssemblyScript tests add.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// rustExamples lists the Rust examples with a valid config and one request each, for the
// size report and the benchmark.
var rustExamples = []struct {
	name, config string
	call         func(context.Context, *wasm.Plugin) error
}{
	{"require-labels", `{"labels":["team"]}`, func(ctx context.Context, p *wasm.Plugin) error {
		_, err := p.Validate(ctx, podRequest("CREATE", "Pod", `{"metadata":{"name":"web","labels":{"team":"a"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`))
		return err
	}},
	{"label-injector", injectorConfig, func(ctx context.Context, p *wasm.Plugin) error {
		_, err := p.Mutate(ctx, podRequest("CREATE", "Pod", `{"metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`))
		return err
	}},
	{"token-authenticator", tokensConfig, func(ctx context.Context, p *wasm.Plugin) error {
		_, err := p.Authenticate(ctx, &abi.AuthenticateRequest{Method: "GET", Path: "/api", Headers: map[string][]string{"Authorization": {"Bearer s3cret"}}})
		return err
	}},
	{"podimage-initializer", `{"mirror":"mirror.example.com"}`, func(ctx context.Context, p *wasm.Plugin) error {
		_, err := p.Initialize(ctx, &abi.InitializeRequest{Kind: abi.GroupVersionKind{Version: "v1", Kind: "Pod"}, Name: "web", Namespace: "default", Object: json.RawMessage(podJSON)})
		return err
	}},
	{"node-label-filter", `{"label":"pool","values":["blue","green"]}`, nil},
	{"label-score", `{"label":"example.com/priority"}`, nil},
}

const (
	injectorConfig = `{"labels":{"injected-by":"wasm"},"toleration":{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}}`
	tokensConfig   = `{"tokens":{"s3cret":{"username":"alice","uid":"42","groups":["dev"]}}}`
)

// patchLines shows a patch one operation a line, as the Go examples' tests compare them.
func patchLines(patch []abi.PatchOperation) string {
	var got []string
	for _, op := range patch {
		got = append(got, fmt.Sprintf("%s %s %s", op.Op, op.Path, op.Value))
	}
	return strings.Join(got, "\n")
}

func TestRustLabelInjector(t *testing.T) {
	t.Parallel()
	r := hostRuntime(t)
	mod := wasmtest.Rust(t, "label-injector")
	if _, err := load(t, r, "label-injector", mod, `{"labels":["a"]}`); !errors.Is(err, wasm.ErrConfigRejected) {
		t.Fatalf("labels as a list: %v, want config-rejected", err)
	}
	p := mustLoad(t, r, "label-injector", mod, injectorConfig)
	tests := []struct {
		name, op, kind, object string
		want                   []string
	}{
		// The cases of examples/plugins/go/examples_test.go.
		{"bare pod", "CREATE", "Pod", `{"metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`,
			[]string{"add /metadata/labels {}", `add /metadata/labels/injected-by "wasm"`, `add /spec/tolerations [{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}]`}},
		{"labels and tolerations present", "CREATE", "Pod", `{"metadata":{"labels":{"a":"b"}},"spec":{"tolerations":[{"key":"x","operator":"Exists"}]}}`,
			[]string{`add /metadata/labels/injected-by "wasm"`, `add /spec/tolerations/- {"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}`}},
		{"already done", "CREATE", "Pod", `{"metadata":{"labels":{"injected-by":"wasm"}},"spec":{"tolerations":[{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}]}}`, nil},
		// And what the Go twin does besides.
		{"other value is replaced by add", "UPDATE", "Pod", `{"metadata":{"labels":{"injected-by":"other"}},"spec":{"tolerations":[{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}]}}`,
			[]string{`add /metadata/labels/injected-by "wasm"`}},
		{"no toleration for other kinds", "CREATE", "ConfigMap", `{"metadata":{}}`,
			[]string{"add /metadata/labels {}", `add /metadata/labels/injected-by "wasm"`}},
		{"delete is left alone", "DELETE", "Pod", `null`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := p.Mutate(context.Background(), podRequest(tt.op, tt.kind, tt.object))
			if err != nil {
				t.Fatal(err)
			}
			if got := patchLines(resp.Patch); !resp.Allowed || got != strings.Join(tt.want, "\n") {
				t.Fatalf("allowed %v patch =\n%s\nwant\n%s", resp.Allowed, got, strings.Join(tt.want, "\n"))
			}
		})
	}
	// A label key with a slash is escaped in the patch path (RFC 6901).
	q := mustLoad(t, r, "label-injector", mod, `{"labels":{"example.com/team":"a~b"}}`)
	resp, err := q.Mutate(context.Background(), podRequest("CREATE", "Pod", `{"metadata":{"labels":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := patchLines(resp.Patch), `add /metadata/labels/example.com~1team "a~b"`; got != want {
		t.Fatalf("patch %s, want %s", got, want)
	}
	if _, err := p.Mutate(context.Background(), podRequest("CREATE", "Pod", `[1]`)); !errors.Is(err, wasm.ErrGuest) {
		t.Fatalf("undecodable object: %v, want guest error", err)
	}
}

func TestRustTokenAuthenticator(t *testing.T) {
	t.Parallel()
	r := hostRuntime(t)
	mod := wasmtest.Rust(t, "token-authenticator")
	for _, bad := range []string{`{"tokens":{}}`, `{}`, `{"tokens":{"t":{"uid":"1"}}}`, `{"tokens":{"t":{"username":"a","groups":"dev"}}}`} {
		if _, err := load(t, r, "token-authenticator", mod, bad); !errors.Is(err, wasm.ErrConfigRejected) {
			t.Fatalf("config %s: %v, want config-rejected", bad, err)
		}
	}
	p := mustLoad(t, r, "token-authenticator", mod, tokensConfig)
	tests := []struct {
		name    string
		headers map[string][]string
		user    string
		message string
	}{
		{"known token", map[string][]string{"Authorization": {"Bearer s3cret"}}, "alice", ""},
		{"scheme in any case, token trimmed", map[string][]string{"Authorization": {"Basic YTpi", "bearer  s3cret "}}, "alice", ""},
		{"unknown token", map[string][]string{"Authorization": {"Bearer nope"}}, "", "unknown bearer token"},
		{"basic auth is not ours", map[string][]string{"Authorization": {"Basic YTpi"}}, "", ""},
		{"no credentials", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := p.Authenticate(context.Background(), &abi.AuthenticateRequest{Method: "GET", Path: "/api", Headers: tt.headers})
			if err != nil {
				t.Fatal(err)
			}
			if tt.user != "" {
				if !resp.Authenticated || resp.User.Username != tt.user || resp.User.UID != "42" || fmt.Sprint(resp.User.Groups) != "[dev]" {
					t.Fatalf("resp = %+v, want user %s", resp, tt.user)
				}
				return
			}
			if resp.Authenticated || resp.Message != tt.message {
				t.Fatalf("resp = %+v, want unauthenticated with message %q", resp, tt.message)
			}
		})
	}
}

func TestRustPodImageInitializer(t *testing.T) {
	t.Parallel()
	r := hostRuntime(t)
	mod := wasmtest.Rust(t, "podimage-initializer")
	if _, err := load(t, r, "podimage-initializer", mod, `{}`); !errors.Is(err, wasm.ErrConfigRejected) {
		t.Fatalf("no mirror: %v, want config-rejected", err)
	}
	p := mustLoad(t, r, "podimage-initializer", mod, `{"mirror":"mirror.example.com/"}`)
	init := func(kind, object string) *abi.InitializeResponse {
		t.Helper()
		resp, err := p.Initialize(context.Background(), &abi.InitializeRequest{
			Kind: abi.GroupVersionKind{Version: "v1", Kind: kind}, Name: "web", Namespace: "default", Object: json.RawMessage(object)})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := init("Pod", `{"spec":{"initContainers":[{"name":"i","image":"busybox"}],"containers":[{"name":"a","image":"nginx:1.27"},{"name":"b","image":"quay.io/org/app:v2"},{"name":"c","image":"mirror.example.com/x:1"},{"name":"d","image":"localhost/app"},{"name":"e","image":"library/redis"}]}}`)
	want := strings.Join([]string{
		`replace /spec/initContainers/0/image "mirror.example.com/library/busybox"`,
		`replace /spec/containers/0/image "mirror.example.com/library/nginx:1.27"`,
		`replace /spec/containers/1/image "mirror.example.com/org/app:v2"`,
		`replace /spec/containers/3/image "mirror.example.com/app"`,
		`replace /spec/containers/4/image "mirror.example.com/library/redis"`,
	}, "\n")
	if got := patchLines(resp.Patch); got != want {
		t.Fatalf("patch =\n%s\nwant\n%s", got, want)
	}
	// Nothing to do: the answer is {} (no patch, no object, not rejected).
	for _, tt := range []struct{ kind, object string }{{"Pod", `{"spec":{"containers":[{"name":"c","image":"mirror.example.com/x:1"}]}}`}, {"ConfigMap", `{"data":{}}`}} {
		if resp := init(tt.kind, tt.object); len(resp.Patch) != 0 || resp.Object != nil || resp.Rejected {
			t.Fatalf("%s: %+v, want no change", tt.kind, resp)
		}
	}
}

// rustNodes makes nodes node-0, node-1, … with the given labels.
func rustNodes(labels ...map[string]string) []*corev1.Node {
	var nodes []*corev1.Node
	for i, l := range labels {
		nodes = append(nodes, node(i, l))
	}
	return nodes
}

func TestRustNodeLabelFilter(t *testing.T) {
	t.Parallel()
	r := hostRuntime(t)
	mod := wasmtest.Rust(t, "node-label-filter")
	for _, bad := range []string{`{}`, `{"label":""}`, `{"label":"pool","values":"blue"}`} {
		if _, err := load(t, r, "node-label-filter", mod, bad); !errors.Is(err, wasm.ErrConfigRejected) {
			t.Fatalf("config %s: %v, want config-rejected", bad, err)
		}
	}
	p := mustLoad(t, r, "node-label-filter", mod, `{"label":"pool","values":["blue","green"]}`)
	ctx := context.Background()
	// One cache for every request to these plugins, as a scheduler has: node-table keys
	// are unique within a cache only, so documents of a second cache would collide with
	// keys the instances already hold.
	cache := wasm.NewNodeCache()

	t.Run("a changed node is judged anew", func(t *testing.T) {
		// The Go example's test.
		nodes := rustNodes(map[string]string{"pool": "blue"}, nil, map[string]string{"pool": "red"}, map[string]string{"pool": "green"})
		for range 2 {
			resp, err := p.Filter(ctx, &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(t, cache, nodes)})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(resp.Pass) != "[true false false true]" || !strings.Contains(resp.Reasons[1], "lacks label") {
				t.Fatalf("pass %v reasons %q", resp.Pass, resp.Reasons)
			}
		}
		nodes[1] = node(1, map[string]string{"pool": "green"})
		nodes[1].ResourceVersion = "2"
		resp, err := p.Filter(ctx, &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(t, cache, nodes)})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Pass[1] {
			t.Fatalf("node 1 after relabelling: pass = false (%q)", resp.Reasons[1])
		}
	})

	t.Run("node table protocol", func(t *testing.T) {
		// Raw requests on a plugin of its own, so the host's record of this instance's
		// keys (which raw calls bypass) is never used.
		raw := mustLoad(t, r, "node-label-filter", mod, `{"label":"pool"}`, wasm.Limits{Instances: 1, MaxInstances: 1})
		steps := []struct{ req, want string }{
			{`{"pod":{},"reset":true,"define":[{"key":1,"node":{"metadata":{"labels":{"pool":"x"}}}},{"key":2,"node":{"metadata":{"name":"b"}}}],"nodes":[1,2]}`, "[true false]"},
			{`{"pod":{},"nodes":[2,1,1]}`, "[false true true]"},
			{`{"pod":{},"forget":[1],"define":[{"key":3,"node":{"metadata":{"labels":{"pool":"y"}}}}],"nodes":[3,2]}`, "[true false]"},
			{`{"pod":{},"nodes":[1]}`, "guest"},
			{`{"pod":{},"reset":true,"nodes":[3]}`, "guest"},
			{`{"pod":{},"nodes":[{"metadata":{"labels":{"pool":"z"}}},{"metadata":{}}]}`, "[true false]"},
		}
		for i, s := range steps {
			out, err := raw.Call(ctx, "filter", []byte(s.req))
			if s.want == "guest" {
				if !errors.Is(err, wasm.ErrGuest) || !strings.Contains(err.Error(), "not defined") {
					t.Fatalf("step %d: %v, want a guest error about an undefined key", i, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			var resp abi.FilterResponse
			if err := json.Unmarshal(out, &resp); err != nil || fmt.Sprint(resp.Pass) != s.want {
				t.Fatalf("step %d: %s (%v), want pass %s", i, out, err, s.want)
			}
		}
	})
}

// TestRustModuleSizes reports (go test -v) each Rust example's size, its size after
// wasm-opt -Oz when binaryen is installed (the build does not run it), and the time to
// create one configured instance.
func TestRustModuleSizes(t *testing.T) {
	t.Parallel()
	r := hostRuntime(t)
	wasmOpt, _ := exec.LookPath("wasm-opt")
	for _, ex := range rustExamples {
		mod := wasmtest.Rust(t, ex.name)
		opt := "-"
		if wasmOpt != "" {
			in := filepath.Join(t.TempDir(), "in.wasm")
			out := in + ".opt"
			if err := os.WriteFile(in, mod, 0o644); err != nil {
				t.Fatal(err)
			}
			if b, err := exec.Command(wasmOpt, "-Oz", "--enable-bulk-memory", "--enable-sign-ext", "--enable-mutable-globals", in, "-o", out).CombinedOutput(); err != nil {
				t.Fatalf("wasm-opt: %v\n%s", err, b)
			}
			st, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			opt = strconv.FormatInt(st.Size(), 10)
		}
		m, err := r.Compile(context.Background(), mod, "")
		if err != nil {
			t.Fatal(err)
		}
		const n = 20
		start := time.Now()
		for range n {
			p, err := r.Load(context.Background(), m, wasm.PluginConfig{Name: ex.name, Config: []byte(ex.config), Limits: wasm.Limits{Instances: 1}})
			if err != nil {
				t.Fatal(err)
			}
			_ = p.Close(context.Background())
		}
		t.Logf("rust %-20s %6d bytes (wasm-opt -Oz: %s), load (instantiate+configure) %v", ex.name, len(mod), opt, time.Since(start)/n)
		_ = m.Close(context.Background())
	}
}

// BenchmarkRustExamples measures one hook call of each Rust example through the host,
// beside its Go twin (examples/plugins/go) with the same config and request; filter and
// score get a batch of 100 nodes already in the instance's node table (both use it).
// -bench 'RustExamples/.*/rust' skips building the Go twins.
func BenchmarkRustExamples(b *testing.B) {
	cache := wasm.NewNodeCache()
	var nodes []*corev1.Node
	for i := range 100 {
		nodes = append(nodes, node(i, map[string]string{"pool": []string{"blue", "red"}[i%2], "example.com/priority": strconv.Itoa(i)}))
	}
	in := &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(b, cache, nodes)}
	var twins []string
	for _, ex := range rustExamples {
		twins = append(twins, "examples/plugins/go/"+ex.name)
	}
	for _, ex := range rustExamples {
		call := ex.call
		switch ex.name {
		case "node-label-filter":
			call = func(ctx context.Context, p *wasm.Plugin) error { _, err := p.Filter(ctx, in); return err }
		case "label-score":
			call = func(ctx context.Context, p *wasm.Plugin) error { _, err := p.Score(ctx, in); return err }
		}
		b.Run(ex.name, func(b *testing.B) {
			for _, lang := range []string{"rust", "go"} {
				b.Run(lang, func(b *testing.B) {
					ctx := context.Background()
					var mod []byte
					if lang == "rust" {
						mod = wasmtest.Rust(b, ex.name)
					} else {
						mod = wasmtest.GoAll(b, twins...)["examples/plugins/go/"+ex.name]
					}
					p := mustLoad(b, hostRuntime(b), ex.name, mod, ex.config, wasm.Limits{Instances: 1, MaxInstances: 1})
					if err := call(ctx, p); err != nil {
						b.Fatal(err)
					}
					c0 := rustCPUTime(b)
					for b.Loop() {
						if err := call(ctx, p); err != nil {
							b.Fatal(err)
						}
					}
					// CPU time beside the wall time: on a shared machine the wall time
					// also measures the other processes.
					b.ReportMetric(float64(rustCPUTime(b)-c0)/float64(b.N), "cpu-ns/op")
				})
			}
		})
	}
}

// rustCPUTime is the process's user and system CPU time so far.
func rustCPUTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
