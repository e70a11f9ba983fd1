package regoinput

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// TestAnalyze: the paths found for the shapes of reference a policy may use, and the
// policies that get the whole input.
func TestAnalyze(t *testing.T) {
	labels, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "examples", "plugins", "rego", "require-labels", "require-labels.rego"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		src   string
		paths [][]string
		whole string // a fragment of the reason, when the whole input is kept
	}{
		{name: "gatekeeper k8srequiredlabels", src: string(labels),
			paths: [][]string{{"parameters"}, {"review", "object", "metadata", "labels"}}},
		{name: "containers' images through a wildcard", src: `package p
import rego.v1
deny contains msg if {
	some c in input.review.object.spec.containers
	not startswith(c.image, "registry.local/")
	msg := sprintf("%s: image %s", [c.name, c.image])
}
deny contains "init" if input.review.object.spec.initContainers[_].image == "bad"`,
			paths: [][]string{{"review", "object", "spec", "containers"}, {"review", "object", "spec", "initContainers"}}},
		{name: "object.get on the object", src: `package p
import rego.v1
deny contains "no team" if object.get(input.review.object, ["metadata", "labels", "team"], "") == ""`,
			paths: [][]string{{"review", "object"}}},
		{name: "operation and userInfo", src: `package p
import rego.v1
deny contains "no deletes by users" if {
	input.request.operation == "DELETE"
	not startswith(input.request.userInfo.username, "system:")
}`,
			paths: [][]string{{"request", "operation"}, {"request", "userInfo", "username"}}},
		{name: "an import alias resolves to input", src: `package p
import rego.v1
import input.review.object.metadata as meta
deny contains "unnamed" if not meta.name`,
			paths: [][]string{{"review", "object", "metadata", "name"}}},
		{name: "a number ends the prefix", src: `package p
import rego.v1
deny contains "first" if input.review.object.spec.containers[0].name == "x"`,
			paths: [][]string{{"review", "object", "spec", "containers"}}},
		{name: "a reference inside a reference's key", src: `package p
import rego.v1
deny contains "k" if input.review.object.metadata.labels[input.parameters.key]`,
			paths: [][]string{{"parameters", "key"}, {"review", "object", "metadata", "labels"}}},
		{name: "a prefix assigned to a local keeps its subtree", src: `package p
import rego.v1
deny contains "x" if {
	obj := input.review.object
	obj.metadata.labels.x
}`,
			paths: [][]string{{"review", "object"}}},
		{name: "a deeper path under a kept one is dropped", src: `package p
import rego.v1
deny contains "x" if {
	input.review.object.metadata.name == "a"
	count(input.review.object.metadata) > 3
}`,
			paths: [][]string{{"review", "object", "metadata"}}},
		{name: "a helper function and a rule in another package", src: `package p
import rego.v1
import data.lib
deny contains "x" if lib.is_pod
deny contains "y" if f(input.review.namespace)
f(ns) if ns == "kube-system"`,
			paths: [][]string{{"review", "kind", "kind"}, {"review", "namespace"}}},
		{name: "a policy that reads nothing of input", src: `package p
import rego.v1
deny contains "always" if true`,
			paths: [][]string{}},
		{name: "walk over input", src: `package p
import rego.v1
deny contains "secret" if {
	walk(input, [_, v])
	v == "secret"
}`, whole: "as a whole"},
		{name: "input compared as a whole", src: `package p
import rego.v1
deny contains "empty" if input == {}`, whole: "as a whole"},
		{name: "input iterated by a variable key", src: `package p
import rego.v1
deny contains k if input[k] == "x"`, whole: "as a whole"},
		{name: "with input as", src: `package p
import rego.v1
named_a if input.review.object.metadata.name == "a"
deny contains "y" if named_a with input as {"review": {"object": {"metadata": {"name": "a"}}}}`,
			whole: "with input as"},
		{name: "with input.review as", src: `package p
import rego.v1
named_a if input.review.object.metadata.name == "a"
deny contains "y" if named_a with input.review.object as {"metadata": {"name": "a"}}`,
			whole: "with input.review.object as"},
		{name: "a parse error", src: "package p\ndeny contains if {", whole: "does not parse"},
		{name: "a compile error", src: "package p\nimport rego.v1\ndeny contains x if y == 1", whole: "does not compile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"policy.rego": tc.src}
			if strings.Contains(tc.src, "data.lib") {
				files["lib.rego"] = "package lib\nimport rego.v1\nis_pod if input.review.kind.kind == \"Pod\"\n"
			}
			got := Analyze(files)
			if tc.whole != "" {
				if got.Whole == "" || !strings.Contains(got.Whole, tc.whole) || got.Paths != nil {
					t.Fatalf("Analyze = %+v, want the whole input because %q", got, tc.whole)
				}
				return
			}
			if got.Whole != "" || !reflect.DeepEqual(got.Paths, tc.paths) {
				t.Fatalf("Analyze = %+v, want paths %q", got, tc.paths)
			}
		})
	}
}

// TestRecord: the section is appended once, with the JSON the host reads, and a second
// record is refused.
func TestRecord(t *testing.T) {
	empty := []byte("\x00asm\x01\x00\x00\x00")
	p := Paths{Paths: [][]string{{"review", "object", "metadata", "labels"}}}
	wasm, err := Record(empty, p)
	if err != nil {
		t.Fatal(err)
	}
	// id 0, size, name length, name, payload.
	rest := wasm[8:]
	if rest[0] != 0 {
		t.Fatalf("section id %d", rest[0])
	}
	body := rest[2:]
	if int(rest[1]) != len(body) {
		t.Fatalf("section size %d, body %d bytes", rest[1], len(body))
	}
	if name := string(body[1 : 1+body[0]]); name != abi.RegoInputSection {
		t.Fatalf("section name %q", name)
	}
	var back Paths
	if err := json.Unmarshal(body[1+body[0]:], &back); err != nil || !reflect.DeepEqual(back, p) {
		t.Fatalf("section payload %s: %+v, %v", body[1+body[0]:], back, err)
	}
	if _, err := Record(wasm, p); err == nil || !strings.Contains(err.Error(), "already") {
		t.Fatalf("second Record: %v", err)
	}
	if _, err := Record([]byte("nope"), p); err == nil {
		t.Fatal("Record accepted a non-module")
	}
	if s := (Paths{Whole: "why"}).String(); s != "the whole input (why)" {
		t.Errorf("String = %q", s)
	}
	if s := p.String(); s != "input.review.object.metadata.labels" {
		t.Errorf("String = %q", s)
	}
}
