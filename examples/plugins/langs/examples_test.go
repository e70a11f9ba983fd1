package langs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// only returns the languages with the given names, in the order of languages.
func only(names ...string) []language {
	var out []language
	for _, l := range languages {
		for _, n := range names {
			if l.Name == n {
				out = append(out, l)
			}
		}
	}
	return out
}

func podRequest(op, kind, pod string) *abi.AdmissionRequest {
	return &abi.AdmissionRequest{
		UID: "u1", Operation: op, Namespace: "default", Name: "web",
		Kind:     abi.GroupVersionKind{Version: "v1", Kind: kind},
		Resource: abi.GroupVersionResource{Version: "v1", Resource: strings.ToLower(kind) + "s"},
		UserInfo: abi.UserInfo{Username: "alice"},
		Object:   json.RawMessage(pod),
	}
}

func TestRequireLabels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, op, kind, object string
		allowed                bool
		message                string
	}{
		{"allowed pod", "CREATE", "Pod", `{"metadata":{"labels":{"team":"a","tier":"web"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`, true, ""},
		{"missing label", "CREATE", "Pod", `{"metadata":{"labels":{"tier":"web"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`, false, `label "team" is required`},
		{"no labels at all", "UPDATE", "Pod", `{"metadata":{},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`, false, `label "team" is required; label "tier" is required`},
		{"latest image", "CREATE", "Pod", `{"metadata":{"labels":{"team":"a","tier":"web"}},"spec":{"containers":[{"name":"c","image":"nginx:latest"}]}}`, false, `container "c": image "nginx:latest" must be pinned to a tag other than latest`},
		{"untagged init image", "CREATE", "Pod", `{"metadata":{"labels":{"team":"a","tier":"web"}},"spec":{"initContainers":[{"name":"i","image":"registry:5000/busybox"}],"containers":[{"name":"c","image":"nginx:1.27"}]}}`, false, `container "i": image "registry:5000/busybox" must be pinned`},
		{"digest", "CREATE", "Pod", `{"metadata":{"labels":{"team":"a","tier":"web"}},"spec":{"containers":[{"name":"c","image":"nginx@sha256:abcd"}]}}`, true, ""},
		{"escaped label key", "CREATE", "Pod", `{"metadata":{"labels":{"t\u0065am":"a","tier":"web"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`, true, ""},
		{"label and image", "CREATE", "Pod", `{"metadata":{"labels":{"tier":"web"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`, false, `label "team" is required; container "c": image "nginx" must be pinned to a tag other than latest`},
		{"images of other kinds are not checked", "CREATE", "ConfigMap", `{"metadata":{"labels":{"team":"a","tier":"web"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`, true, ""},
		{"delete is allowed", "DELETE", "Pod", `null`, true, ""},
	}
	// The WAT example compares names by their raw text, a limitation its README documents.
	unsupported := map[string]string{"escaped label key": "wat"}
	for _, lang := range languages {
		t.Run(lang.Name, func(t *testing.T) {
			t.Parallel() // builds of different toolchains overlap
			mod := lang.Build(t, "require-labels")
			r := hostRuntime(t)
			p := mustLoad(t, r, "require-labels", mod, `{"labels":["team","tier"]}`)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					if unsupported[tt.name] == lang.Name {
						t.Skipf("not supported by the %s example", lang.Name)
					}
					resp, err := p.Validate(context.Background(), podRequest(tt.op, tt.kind, tt.object))
					if err != nil {
						t.Fatal(err)
					}
					if resp.Allowed != tt.allowed || !strings.Contains(resp.Message, tt.message) {
						t.Fatalf("resp = %+v, want allowed=%v message ~ %q", resp, tt.allowed, tt.message)
					}
					if !resp.Allowed && (resp.Code != 403 || resp.Reason != "Forbidden") {
						t.Errorf("code, reason = %d, %q; want 403, Forbidden", resp.Code, resp.Reason)
					}
				})
			}
			// An object the plugin cannot read is a plugin error, not a decision.
			if _, err := p.Validate(context.Background(), podRequest("CREATE", "Pod", `[1]`)); !errors.Is(err, wasm.ErrGuest) {
				t.Fatalf("undecodable object: %v, want guest error", err)
			}
		})
	}
}

func node(i int, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-" + strconv.Itoa(i), UID: types.UID("uid-" + strconv.Itoa(i)), ResourceVersion: "1", Labels: labels},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectPreferNoSchedule}}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func docs(tb testing.TB, c *wasm.NodeCache, nodes []*corev1.Node) []*wasm.NodeDocument {
	tb.Helper()
	out := make([]*wasm.NodeDocument, len(nodes))
	for i, n := range nodes {
		d, err := c.Document(n)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = d
	}
	return out
}

const podJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default"},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`

func TestNodeLabelFilter(t *testing.T) {
	t.Parallel()
	for _, lang := range only("c", "assemblyscript", "rust") {
		t.Run(lang.Name, func(t *testing.T) {
			t.Parallel() // builds of different toolchains overlap
			mod := lang.Build(t, "node-label-filter")
			r := hostRuntime(t)
			if _, err := load(t, r, "node-label-filter", mod, `{}`); !errors.Is(err, wasm.ErrConfigRejected) {
				t.Fatalf("no label: %v, want config-rejected", err)
			}
			p := mustLoad(t, r, "node-label-filter", mod, `{"label":"pool","values":["blue","green"]}`)
			any := mustLoad(t, r, "node-label-filter", mod, `{"label":"pool"}`)
			cache := wasm.NewNodeCache()
			nodes := []*corev1.Node{
				node(0, map[string]string{"pool": "blue"}),
				node(1, nil),
				node(2, map[string]string{"pool": "red"}),
				node(3, map[string]string{"pool": "green", "zone": "a"}),
				node(4, map[string]string{"zone": "b"}),
			}
			tests := []struct {
				name    string
				p       *wasm.Plugin
				pass    []bool
				reasons []string
			}{
				{"with values", p, []bool{true, false, false, true, false},
					[]string{"", `node lacks label "pool"`, "node label pool=red is not one of [blue green]", "", `node lacks label "pool"`}},
				{"any value", any, []bool{true, false, true, true, false},
					[]string{"", `node lacks label "pool"`, "", "", `node lacks label "pool"`}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					// Twice: the second call names the nodes by node-table key only.
					for round := range 2 {
						resp, err := tt.p.Filter(context.Background(), &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(t, cache, nodes)})
						if err != nil {
							t.Fatal(err)
						}
						if fmt.Sprint(resp.Pass) != fmt.Sprint(tt.pass) || fmt.Sprintf("%q", resp.Reasons) != fmt.Sprintf("%q", tt.reasons) {
							t.Fatalf("round %d: pass = %v reasons = %q\nwant %v %q", round, resp.Pass, resp.Reasons, tt.pass, tt.reasons)
						}
					}
				})
			}
			// An empty batch is answered with empty arrays.
			resp, err := p.Filter(context.Background(), &wasm.SchedulingInput{Pod: []byte(podJSON)})
			if err != nil || len(resp.Pass) != 0 {
				t.Fatalf("empty batch: %+v, %v", resp, err)
			}
		})
	}
}

func TestLabelScore(t *testing.T) {
	t.Parallel()
	for _, lang := range only("c", "assemblyscript", "rust") {
		t.Run(lang.Name, func(t *testing.T) {
			t.Parallel() // builds of different toolchains overlap
			mod := lang.Build(t, "label-score")
			r := hostRuntime(t)
			if _, err := load(t, r, "label-score", mod, `{"label":""}`); !errors.Is(err, wasm.ErrConfigRejected) {
				t.Fatalf("empty label: %v, want config-rejected", err)
			}
			p := mustLoad(t, r, "label-score", mod, `{"label":"example.com/priority"}`)
			cache := wasm.NewNodeCache()
			values := []string{"10", "", "abc", "250", "99", "0", "-5", "007"}
			want := "[10 0 0 100 99 0 0 7]"
			var nodes []*corev1.Node
			for i, v := range values {
				l := map[string]string{"other": "50"}
				if v != "" {
					l["example.com/priority"] = v
				}
				nodes = append(nodes, node(i, l))
			}
			// Twice: the second call names the nodes by node-table key only.
			for round := range 2 {
				scores, err := p.Score(context.Background(), &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(t, cache, nodes)})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(scores) != want {
					t.Fatalf("round %d: scores = %v, want %s", round, scores, want)
				}
			}
			// A large batch: one call for 5,000 nodes (new uids: the cache keys on them). It
			// checks answers, not speed: the deadline is generous because a loaded CI machine
			// can take a good part of the default second (C ~0.26 s, AssemblyScript ~0.55 s
			// with load 16 on 2 cores).
			p = mustLoad(t, r, "label-score", mod, `{"label":"example.com/priority"}`, wasm.Limits{Instances: 1, Timeout: 30 * time.Second})
			cache, nodes = wasm.NewNodeCache(), nodes[:0]
			for i := range 5000 {
				nodes = append(nodes, node(i, map[string]string{"example.com/priority": strconv.Itoa(i % 128)}))
			}
			scores, err := p.Score(context.Background(), &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(t, cache, nodes)})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range scores {
				if want := int64(min(i%128, 100)); s != want {
					t.Fatalf("node %d: score %d, want %d", i, s, want)
				}
			}
		})
	}
}
