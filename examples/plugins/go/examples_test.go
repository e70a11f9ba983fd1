// Tests of the Go example plugins: each is built from source for GOOS=wasip1 and run
// through the host, as the server runs it.
package examples_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

func TestMain(m *testing.M) { wasmtest.MainUnlessShort(m, "builds every Go example for wasip1") }

var examples = []string{
	"examples/plugins/go/token-authenticator",
	"examples/plugins/go/label-injector",
	"examples/plugins/go/owner-annotator",
	"examples/plugins/go/require-labels",
	"examples/plugins/go/podimage-initializer",
	"examples/plugins/go/node-label-filter",
	"examples/plugins/go/label-score",
}

// runtime returns a host runtime sharing the binary's compilation cache.
func runtime(tb testing.TB) *wasm.Runtime {
	tb.Helper()
	r, err := wasm.NewRuntime(context.Background(), wasm.RuntimeConfig{
		CacheDir: wasmtest.CacheDir(tb),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// plugin builds an example (all of them at once, in parallel, on first use) and loads it.
func plugin(tb testing.TB, r *wasm.Runtime, name, config string) (*wasm.Plugin, error) {
	tb.Helper()
	return pluginWith(tb, r, name, config, wasm.Limits{Instances: 1, MaxInstances: 4})
}

func pluginWith(tb testing.TB, r *wasm.Runtime, name, config string, limits wasm.Limits) (*wasm.Plugin, error) {
	tb.Helper()
	wasmBytes := wasmtest.GoAll(tb, examples...)["examples/plugins/go/"+name]
	ctx := context.Background()
	m, err := r.Compile(ctx, wasmBytes, wasm.Digest(wasmBytes))
	if err != nil {
		tb.Fatal(err)
	}
	defer m.Close(ctx)
	p, err := r.Load(ctx, m, wasm.PluginConfig{Name: name, Config: json.RawMessage(config), Limits: limits})
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	return p, nil
}

func mustPlugin(tb testing.TB, r *wasm.Runtime, name, config string) *wasm.Plugin {
	tb.Helper()
	p, err := plugin(tb, r, name, config)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func podRequest(op string, pod string) *abi.AdmissionRequest {
	return &abi.AdmissionRequest{
		UID: "u1", Operation: op, Namespace: "default", Name: "web",
		Kind:     abi.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: abi.GroupVersionResource{Version: "v1", Resource: "pods"},
		UserInfo: abi.UserInfo{Username: "alice"},
		Object:   json.RawMessage(pod),
	}
}

func TestTokenAuthenticator(t *testing.T) {
	r := runtime(t)
	if _, err := plugin(t, r, "token-authenticator", `{"tokens":{}}`); !errors.Is(err, wasm.ErrConfigRejected) {
		t.Fatalf("empty token list: %v, want config-rejected", err)
	}
	p := mustPlugin(t, r, "token-authenticator", `{"tokens":{"s3cret":{"username":"alice","uid":"42","groups":["dev"]}}}`)
	tests := []struct {
		name    string
		headers map[string][]string
		user    string
		message string
	}{
		{"known token", map[string][]string{"Authorization": {"Bearer s3cret"}}, "alice", ""},
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
				if !resp.Authenticated || resp.User.Username != tt.user || resp.User.Groups[0] != "dev" {
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

func TestLabelInjector(t *testing.T) {
	r := runtime(t)
	p := mustPlugin(t, r, "label-injector", `{"labels":{"injected-by":"wasm"},"toleration":{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}}`)
	tests := []struct {
		name, pod string
		want      []string
	}{
		{"bare pod", `{"metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`,
			[]string{"add /metadata/labels {}", `add /metadata/labels/injected-by "wasm"`, `add /spec/tolerations [{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}]`}},
		{"labels and tolerations present", `{"metadata":{"labels":{"a":"b"}},"spec":{"tolerations":[{"key":"x","operator":"Exists"}]}}`,
			[]string{`add /metadata/labels/injected-by "wasm"`, `add /spec/tolerations/- {"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}`}},
		{"already done", `{"metadata":{"labels":{"injected-by":"wasm"}},"spec":{"tolerations":[{"key":"dedicated","operator":"Equal","value":"wasm","effect":"NoSchedule"}]}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := p.Mutate(context.Background(), podRequest("CREATE", tt.pod))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, op := range resp.Patch {
				got = append(got, fmt.Sprintf("%s %s %s", op.Op, op.Path, op.Value))
			}
			if !resp.Allowed || strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("patch =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestOwnerAnnotator(t *testing.T) {
	r := runtime(t)
	if _, err := plugin(t, r, "owner-annotator", `{"label":"team"}`); !errors.Is(err, wasm.ErrConfigRejected) {
		t.Fatalf("no annotation: %v, want config-rejected", err)
	}
	p := mustPlugin(t, r, "owner-annotator", `{"label":"team","annotation":"example.com/owner"}`)
	tests := []struct {
		name, pod string
		patch     []string
		warnings  []string
		audit     map[string]string
	}{
		{"no label: warning", `{"metadata":{"name":"web"},"spec":{}}`, nil,
			[]string{`pod "web" has no "team" label: annotation example.com/owner not set`}, nil},
		{"label, no annotations", `{"metadata":{"labels":{"team":"blue"}}}`,
			[]string{"add /metadata/annotations {}", `add /metadata/annotations/example.com~1owner "blue"`}, nil, map[string]string{"owner": "blue"}},
		{"other annotations", `{"metadata":{"labels":{"team":"blue"},"annotations":{"a":"b"}}}`,
			[]string{`add /metadata/annotations/example.com~1owner "blue"`}, nil, map[string]string{"owner": "blue"}},
		{"already annotated: idempotent", `{"metadata":{"labels":{"team":"blue"},"annotations":{"example.com/owner":"blue"}}}`,
			nil, nil, map[string]string{"owner": "blue"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := p.Mutate(context.Background(), podRequest("CREATE", tt.pod))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, op := range resp.Patch {
				got = append(got, fmt.Sprintf("%s %s %s", op.Op, op.Path, op.Value))
			}
			if !resp.Allowed || strings.Join(got, "\n") != strings.Join(tt.patch, "\n") {
				t.Fatalf("patch =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.patch, "\n"))
			}
			if fmt.Sprintf("%q", resp.Warnings) != fmt.Sprintf("%q", tt.warnings) || fmt.Sprint(resp.AuditAnnotations) != fmt.Sprint(tt.audit) {
				t.Fatalf("warnings %q audit %v, want %q %v", resp.Warnings, resp.AuditAnnotations, tt.warnings, tt.audit)
			}
		})
	}
}

func TestRequireLabels(t *testing.T) {
	r := runtime(t)
	p := mustPlugin(t, r, "require-labels", `{"labels":["team"]}`)
	tests := []struct {
		name, pod string
		allowed   bool
		message   string
	}{
		{"ok", `{"metadata":{"labels":{"team":"a"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`, true, ""},
		{"missing label", `{"metadata":{},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`, false, `label "team" is required`},
		{"latest", `{"metadata":{"labels":{"team":"a"}},"spec":{"containers":[{"name":"c","image":"nginx:latest"}]}}`, false, "must be pinned"},
		{"untagged", `{"metadata":{"labels":{"team":"a"}},"spec":{"containers":[{"name":"c","image":"registry:5000/nginx"}]}}`, false, "must be pinned"},
		{"digest", `{"metadata":{"labels":{"team":"a"}},"spec":{"containers":[{"name":"c","image":"nginx@sha256:abcd"}]}}`, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := p.Validate(context.Background(), podRequest("CREATE", tt.pod))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Allowed != tt.allowed || !strings.Contains(resp.Message, tt.message) {
				t.Fatalf("resp = %+v, want allowed=%v message ~ %q", resp, tt.allowed, tt.message)
			}
			if !resp.Allowed && resp.Code != 403 {
				t.Errorf("code = %d, want 403", resp.Code)
			}
		})
	}
	// A request the plugin cannot decode is a plugin error, not a decision.
	if _, err := p.Validate(context.Background(), podRequest("CREATE", `[1]`)); !errors.Is(err, wasm.ErrGuest) {
		t.Fatalf("undecodable object: %v, want guest error", err)
	}
}

func TestPodImageInitializer(t *testing.T) {
	r := runtime(t)
	if _, err := plugin(t, r, "podimage-initializer", `{}`); !errors.Is(err, wasm.ErrConfigRejected) {
		t.Fatalf("no mirror: %v, want config-rejected", err)
	}
	p := mustPlugin(t, r, "podimage-initializer", `{"mirror":"mirror.example.com"}`)
	resp, err := p.Initialize(context.Background(), &abi.InitializeRequest{
		Kind: abi.GroupVersionKind{Version: "v1", Kind: "Pod"}, Name: "web", Namespace: "default",
		Object: json.RawMessage(`{"spec":{"initContainers":[{"name":"i","image":"busybox"}],"containers":[{"name":"a","image":"nginx:1.27"},{"name":"b","image":"quay.io/org/app:v2"},{"name":"c","image":"mirror.example.com/x:1"}]}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range resp.Patch {
		got = append(got, fmt.Sprintf("%s %s %s", op.Op, op.Path, op.Value))
	}
	want := []string{
		`replace /spec/initContainers/0/image "mirror.example.com/library/busybox"`,
		`replace /spec/containers/0/image "mirror.example.com/library/nginx:1.27"`,
		`replace /spec/containers/1/image "mirror.example.com/org/app:v2"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("patch =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func node(i int, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-" + strconv.Itoa(i), UID: types.UID("uid-" + strconv.Itoa(i)), ResourceVersion: "1", Labels: labels},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectPreferNoSchedule}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func docs(t testing.TB, c *wasm.NodeCache, nodes []*corev1.Node) []*wasm.NodeDocument {
	t.Helper()
	out := make([]*wasm.NodeDocument, len(nodes))
	for i, n := range nodes {
		d, err := c.Document(n)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = d
	}
	return out
}

const podJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default"},"spec":{"containers":[{"name":"c","image":"nginx:1.27","resources":{"requests":{"cpu":"100m"}}}]}}`

func TestNodeLabelFilter(t *testing.T) {
	r := runtime(t)
	p := mustPlugin(t, r, "node-label-filter", `{"label":"pool","values":["blue","green"]}`)
	cache := wasm.NewNodeCache()
	nodes := []*corev1.Node{node(0, map[string]string{"pool": "blue"}), node(1, nil), node(2, map[string]string{"pool": "red"}), node(3, map[string]string{"pool": "green"})}
	want := []bool{true, false, false, true}
	// Twice: the second call sends node-table keys only.
	for round := range 2 {
		resp, err := p.Filter(context.Background(), &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(t, cache, nodes)})
		if err != nil {
			t.Fatal(err)
		}
		for i, ok := range resp.Pass {
			if ok != want[i] {
				t.Errorf("round %d node %d: pass = %v, want %v (reason %q)", round, i, ok, want[i], resp.Reasons[i])
			}
		}
		if !strings.Contains(resp.Reasons[1], "lacks label") {
			t.Errorf("reason for node 1 = %q", resp.Reasons[1])
		}
	}
	// A changed node (new resourceVersion) is sent again and judged anew.
	nodes[1] = node(1, map[string]string{"pool": "green"})
	nodes[1].ResourceVersion = "2"
	resp, err := p.Filter(context.Background(), &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(t, cache, nodes)})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Pass[1] {
		t.Errorf("node 1 after relabelling: pass = false (%q)", resp.Reasons[1])
	}
}

func TestLabelScore(t *testing.T) {
	r := runtime(t)
	p := mustPlugin(t, r, "label-score", `{"label":"example.com/priority"}`)
	cache := wasm.NewNodeCache()
	values := []string{"10", "", "abc", "250", "99"}
	var nodes []*corev1.Node
	for i, v := range values {
		l := map[string]string{}
		if v != "" {
			l["example.com/priority"] = v
		}
		nodes = append(nodes, node(i, l))
	}
	for range 2 {
		scores, err := p.Score(context.Background(), &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(t, cache, nodes)})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(scores) != "[10 0 0 100 99]" {
			t.Fatalf("scores = %v", scores)
		}
	}
}
