package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/regoinput"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/jsonview"
)

// emptyModule is the smallest WebAssembly module: the header alone.
var emptyModule = []byte("\x00asm\x01\x00\x00\x00")

// TestRegoInputProjection: what the host writes a policy for a record, member by member.
func TestRegoInputProjection(t *testing.T) {
	req := `{"uid":"u","operation":"CREATE","userInfo":{"username":"alice","groups":["g"]},` +
		`"object":{"metadata":{"name":"p","l\u0061bels":{"team":"a"},"annotations":{"x":"y"}},"spec":{"containers":[{"name":"c","image":"i"}]},"status":{}},` +
		`"oldObject":null,"dup":1,"dup":2}`
	for _, tc := range []struct {
		name  string
		paths [][]string
		want  string // "" for the whole request
		// metadata: whether the object metadata document gives the same values at what
		// the policy reads
		metadata bool
	}{
		{"labels (an escaped key matches)", [][]string{{"parameters"}, {"review", "object", "metadata", "labels"}},
			`{"object":{"metadata":{"l\u0061bels":{"team":"a"}}}}`, true},
		{"request and review alias one request", [][]string{{"request", "operation"}, {"review", "userInfo", "username"}},
			`{"operation":"CREATE","userInfo":{"username":"alice"}}`, true},
		{"a shorter path keeps the subtree whole", [][]string{{"review", "object", "metadata", "name"}, {"request", "object", "metadata"}},
			`{"object":{"metadata":{"name":"p","l\u0061bels":{"team":"a"},"annotations":{"x":"y"}}}}`, false},
		{"and in the other order", [][]string{{"request", "object", "metadata"}, {"review", "object", "metadata", "name"}},
			`{"object":{"metadata":{"name":"p","l\u0061bels":{"team":"a"},"annotations":{"x":"y"}}}}`, false},
		{"below a non-object the member is kept as it is", [][]string{{"review", "oldObject", "metadata"}, {"review", "object", "spec", "containers", "x"}},
			`{"object":{"spec":{"containers":[{"name":"c","image":"i"}]}},"oldObject":null}`, false},
		{"duplicate keys are kept, in order", [][]string{{"review", "dup"}}, `{"dup":1,"dup":2}`, true},
		{"members that are not there stay absent", [][]string{{"review", "namespace"}, {"review", "object", "metadata", "namespace"}}, `{"object":{"metadata":{}}}`, true},
		{"an old object's name and a label", [][]string{{"review", "oldObject", "metadata", "name"}, {"request", "object", "metadata", "labels", "team"}},
			`{"object":{"metadata":{"l\u0061bels":{"team":"a"}}},"oldObject":null}`, true},
		{"the object's annotations", [][]string{{"review", "object", "metadata", "annotations"}}, `{"object":{"metadata":{"annotations":{"x":"y"}}}}`, true},
		{"the object's kind", [][]string{{"review", "object", "kind"}}, `{"object":{}}`, true},
		{"the object's creation time", [][]string{{"review", "object", "metadata", "creationTimestamp"}}, `{"object":{"metadata":{}}}`, false},
		{"only parameters: an empty request", [][]string{{"parameters", "labels"}, {"kind"}}, `{}`, true},
		{"nothing of input: an empty request", [][]string{}, `{}`, true},
		{"input.review whole", [][]string{{"review", "object"}, {"review"}}, "", false},
		{"input whole", [][]string{{"review", "object"}, {}}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm, err := regoinput.Record(emptyModule, regoinput.Paths{Paths: tc.paths})
			if err != nil {
				t.Fatal(err)
			}
			tree, err := readRegoInput(wasm)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if tree != nil {
					t.Fatalf("tree %+v, want the whole request", tree)
				}
				return
			}
			if tree == nil {
				t.Fatalf("the whole request, want %s", tc.want)
			}
			if got := string(tree.project(nil, jsonview.Parse([]byte(req)))); got != tc.want {
				t.Errorf("projected\n%s\nwant\n%s", got, tc.want)
			}
			if got := tree.metadataSuffices(); got != tc.metadata {
				t.Errorf("metadataSuffices = %v, want %v", got, tc.metadata)
			}
		})
	}
	t.Run("no record, a whole record, a broken record", func(t *testing.T) {
		if tree, err := readRegoInput(emptyModule); tree != nil || err != nil {
			t.Errorf("no record: %+v, %v", tree, err)
		}
		whole, _ := regoinput.Record(emptyModule, regoinput.Paths{Whole: "with input as"})
		if tree, err := readRegoInput(whole); tree != nil || err != nil {
			t.Errorf("whole record: %+v, %v", tree, err)
		}
		name := abi.RegoInputSection
		broken := append(append(slicesClone(emptyModule), 0, byte(1+len(name)+3), byte(len(name))), name+"{x]"...)
		if _, err := readRegoInput(broken); err == nil {
			t.Error("a broken record was read")
		}
	})
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// regoSoundnessRequests are admission requests with everything a Pod request carries,
// which the policies below read parts of.
func regoSoundnessRequests(t *testing.T) map[string][]byte {
	t.Helper()
	pod := func(name string, labels map[string]string, images ...string) map[string]any {
		var cs []any
		for i, img := range images {
			cs = append(cs, map[string]any{"name": fmt.Sprintf("c%d", i), "image": img,
				"resources": map[string]any{"limits": map[string]string{"cpu": "1"}}, "env": []any{map[string]string{"name": "A", "value": "secret"}}})
		}
		meta := map[string]any{"namespace": "default", "uid": "1", "annotations": map[string]string{"note": "x"}}
		if name != "" {
			meta["name"] = name
		}
		if labels != nil {
			meta["labels"] = labels
		}
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta,
			"spec":   map[string]any{"containers": cs, "nodeSelector": map[string]string{"disk": "ssd"}, "volumes": []any{map[string]any{"name": "v", "emptyDir": map[string]any{}}}},
			"status": map[string]any{"phase": "Pending"}}
	}
	req := func(op, user string, groups []string, obj, old map[string]any) []byte {
		r := map[string]any{"uid": "u-1", "kind": map[string]string{"group": "", "version": "v1", "kind": "Pod"},
			"resource": map[string]string{"group": "", "version": "v1", "resource": "pods"}, "namespace": "default",
			"operation": op, "userInfo": map[string]any{"username": user, "groups": groups}, "dryRun": false}
		if obj != nil {
			r["object"] = obj
		}
		if old != nil {
			r["oldObject"] = old
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return map[string][]byte{
		"labelled, registry image, by a user": req("CREATE", "alice", []string{"dev"}, pod("p", map[string]string{"team": "a", "owner": "b"}, "registry.local/app:1"), nil),
		"one label, foreign image":            req("CREATE", "bob", []string{"blocked"}, pod("p", map[string]string{"team": "a"}, "docker.io/app", "registry.local/side"), nil),
		"no labels, no name, no containers":   req("CREATE", "system:serviceaccount:x", nil, pod("", nil), nil),
		"an update with an old object":        req("UPDATE", "alice", nil, pod("p", map[string]string{"owner": "b"}, "registry.local/a"), pod("p", map[string]string{"team": "a", "owner": "b"}, "registry.local/a")),
		"a delete by a user":                  req("DELETE", "carol", []string{"dev"}, nil, pod("p", nil, "x")),
		"a delete by the system":              req("DELETE", "system:admin", nil, nil, pod("p", nil)),
	}
}

// TestRegoInputSound: each policy gives the same answer (allowed, code, message) on each
// request with the input its build recorded, with the whole input (a module built by
// `opa build` alone), and with the projection turned off by the config.
func TestRegoInputSound(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	labels, err := os.ReadFile(filepath.Join(wasmtest.ModuleRoot(t), "examples/plugins/rego/require-labels/require-labels.rego"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newTestRuntime(t)
	requests := regoSoundnessRequests(t)
	for _, tc := range []struct {
		name, src, config string
		projected         bool // whether the build records a projection (else the whole input)
	}{
		{"gatekeeper k8srequiredlabels", string(labels), `{"parameters":{"labels":["team","owner"]}}`, true},
		{"containers' images through [_] and some … in", `package images
import rego.v1
deny contains msg if {
	some c in input.review.object.spec.containers
	not startswith(c.image, input.parameters.registry)
	msg := sprintf("container %s: image %s is not from %s", [c.name, c.image, input.parameters.registry])
}
deny contains "no containers" if {
	input.review.operation == "CREATE"
	count(input.review.object.spec.containers) == 0
}`, `{"registry":"registry.local/"}`, true},
		{"object.get on the object", `package objget
import rego.v1
deny contains msg if {
	input.request.operation != "DELETE"
	team := object.get(input.review.object, ["metadata", "labels", "team"], "")
	team == ""
	msg := sprintf("%s needs a team", [object.get(input.review.object, ["metadata", "name"], "<generated>")])
}`, ``, true},
		{"operation and userInfo", `package users
import rego.v1
deny contains msg if {
	input.request.operation == "DELETE"
	not startswith(input.request.userInfo.username, "system:")
	msg := sprintf("%s may not delete %s", [input.request.userInfo.username, input.request.oldObject.metadata.name])
}
deny contains "blocked group" if input.request.userInfo.groups[_] == "blocked"`, ``, true},
		{"import alias, presence of members and label counts", `package presence
import rego.v1
import input.review.object.metadata as meta
deny contains "unnamed" if not meta.name
deny contains "status set" if input.review.object.status.phase == "Running"
deny contains "too few labels" if {
	meta.labels
	count(meta.labels) < 2
}
deny contains "label changed" if {
	input.review.oldObject.metadata.labels.team != input.review.object.metadata.labels.team
}`, ``, true},
		{"only parameters", `package params
import rego.v1
deny contains input.parameters.message if input.parameters.enabled`, `{"message":"closed","enabled":true}`, true},
		{"walk over the whole input", `package walker
import rego.v1
deny contains sprintf("a secret at %v", [path]) if {
	walk(input, [path, v])
	v == "secret"
}`, ``, false},
		{"with input as", `package withinput
import rego.v1
named_p if input.review.object.metadata.name == "p"
deny contains "named p" if named_p
deny contains "fixed" if named_p with input as {"review": {"object": {"metadata": {"name": "p"}}}}`, ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := ""
			recorded := wasmtest.RegoSource(t, tc.src, ep)
			whole := wasmtest.RegoSourceUnrecorded(t, tc.src, ep)
			tree, err := readRegoInput(recorded)
			if err != nil {
				t.Fatal(err)
			}
			if (tree != nil) != tc.projected {
				t.Fatalf("projection recorded: %v, want %v", tree != nil, tc.projected)
			}
			if tree, _ := readRegoInput(whole); tree != nil {
				t.Fatal("a module built by opa alone has a projection")
			}
			off := `{"wholeInput":true}`
			if tc.config != "" {
				off = `{"wholeInput":true,` + strings.TrimPrefix(tc.config, "{")
			}
			plugins := map[string]*Plugin{
				"recorded":     load(t, r, recorded, PluginConfig{Name: t.Name() + "/recorded", Config: json.RawMessage(tc.config)}),
				"opa build":    load(t, r, whole, PluginConfig{Name: t.Name() + "/whole", Config: json.RawMessage(tc.config)}),
				"switched off": load(t, r, recorded, PluginConfig{Name: t.Name() + "/off", Config: json.RawMessage(off)}),
			}
			distinct := map[string]bool{}
			for name, req := range requests {
				answers := map[string]string{}
				for kind, p := range plugins {
					out, err := p.Call(context.Background(), abi.HookValidate, req)
					if err != nil {
						t.Fatalf("%s, %s: %v", name, kind, err)
					}
					answers[kind] = string(out)
				}
				if answers["recorded"] != answers["opa build"] || answers["recorded"] != answers["switched off"] {
					t.Errorf("%s: answers differ:\n%q", name, answers)
				}
				distinct[answers["recorded"]] = true
			}
			// Each policy answers differently to different requests (but the one that
			// reads only its parameters), so that the comparison covers what it reads.
			if len(distinct) < 2 && tc.name != "only parameters" {
				t.Errorf("one answer to every request, %v: the table does not exercise the policy", distinct)
			}
		})
	}
}
