package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tetratelabs/wazero"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// podRequest is a validate request about a pod with the given labels.
func podRequest(op string, labels map[string]string) []byte {
	obj := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "labels": labels}}
	b, _ := json.Marshal(map[string]any{"uid": "u", "operation": op, "kind": map[string]string{"version": "v1", "kind": "Pod"},
		"namespace": "default", "object": obj})
	return b
}

type validateAnswer struct {
	Allowed bool   `json:"allowed"`
	Message string `json:"message"`
}

func validate(t *testing.T, p *Plugin, req []byte) validateAnswer {
	t.Helper()
	out, err := p.Call(context.Background(), abi.HookValidate, req)
	if err != nil {
		t.Fatal(err)
	}
	var a validateAnswer
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("answer %s: %v", out, err)
	}
	return a
}

// TestRegoPolicy runs Gatekeeper's k8srequiredlabels, compiled by OPA, as a validate
// plugin: parameters from the config, sprintf served by the host, concurrent calls on
// the pool, and the same answers after many calls (the heap is reset per call).
func TestRegoPolicy(t *testing.T) {
	r, _ := newTestRuntime(t)
	wasm := wasmtest.Rego(t, "require-labels")
	p := load(t, r, wasm, PluginConfig{Config: json.RawMessage(`{"parameters":{"labels":["team","owner"]}}`), Limits: Limits{Instances: 2}})
	if !p.Implements(abi.HookValidate) || p.Implements(abi.HookMutate) {
		t.Fatal("a Rego plugin implements validate only")
	}
	// Object metadata without asking, since the build recorded that the policy reads only
	// labels; compact pods when the config asks for them and turns the record off, then
	// with the same parameters; whole objects with the record off alone.
	compact := load(t, r, wasm, PluginConfig{Name: "compact", Config: json.RawMessage(`{"compactPods":true,"wholeInput":true,"labels":["team","owner"]}`)})
	whole := load(t, r, wasm, PluginConfig{Name: "whole", Config: json.RawMessage(`{"wholeInput":true,"labels":["team","owner"]}`)})
	if p.ObjectForm() != ObjectMetadata || compact.ObjectForm() != CompactPods || whole.ObjectForm() != WholeObjects {
		t.Fatalf("ObjectForm: %v recorded, %v with compactPods and wholeInput, %v with wholeInput", p.ObjectForm(), compact.ObjectForm(), whole.ObjectForm())
	}
	if a := validate(t, compact, podRequest("CREATE", map[string]string{"team": "a"})); a.Allowed || a.Message != `you must provide labels: ["owner"]` {
		t.Fatalf("compactPods plugin: answer %+v", a)
	}
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		allowed bool
		msg     string
	}{
		{"both labels", map[string]string{"team": "a", "owner": "b"}, true, ""},
		{"one missing", map[string]string{"team": "a"}, false, `you must provide labels: ["owner"]`},
		{"none", nil, false, `you must provide labels: ["owner","team"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := validate(t, p, podRequest("CREATE", tc.labels))
			// A set prints as a JSON array in the engine's order, which is not sorted.
			if a.Message == `you must provide labels: ["team","owner"]` {
				a.Message = `you must provide labels: ["owner","team"]`
			}
			if a.Allowed != tc.allowed || a.Message != tc.msg {
				t.Errorf("answer %+v, want allowed=%v message %q", a, tc.allowed, tc.msg)
			}
		})
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				labels := map[string]string{"team": "a", "owner": "b"}
				if (i+j)%2 == 0 {
					delete(labels, "owner")
				}
				out, err := p.Call(context.Background(), abi.HookValidate, podRequest("CREATE", labels))
				if err != nil {
					errs <- err.Error()
					return
				}
				if want := (i+j)%2 != 0; strings.Contains(string(out), `"allowed":true`) != want {
					errs <- string(out)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestRegoShapes: the rule kinds a plugin may evaluate, the input's two shapes, and the
// refusals at load.
func TestRegoShapes(t *testing.T) {
	r, _ := newTestRuntime(t)
	t.Run("deny set of strings reading input.request", func(t *testing.T) {
		wasm := wasmtest.RegoSource(t, `package kube.admission
import rego.v1
deny contains msg if {
	input.request.kind.kind == "Pod"
	not input.request.object.metadata.labels.app
	msg := "pods need an app label"
}`, "kube/admission/deny")
		p := load(t, r, wasm, PluginConfig{})
		if a := validate(t, p, podRequest("CREATE", nil)); a.Allowed || a.Message != "pods need an app label" {
			t.Errorf("answer %+v", a)
		}
		if a := validate(t, p, podRequest("CREATE", map[string]string{"app": "x"})); !a.Allowed {
			t.Errorf("answer %+v", a)
		}
	})
	t.Run("allow rule with parameters from a plain config", func(t *testing.T) {
		wasm := wasmtest.RegoSource(t, `package allowonly
import rego.v1
default allow := false
allow if input.review.operation == input.parameters.op`, "allowonly/allow")
		p := load(t, r, wasm, PluginConfig{Config: json.RawMessage(`{"op":"DELETE"}`)})
		if a := validate(t, p, podRequest("CREATE", nil)); a.Allowed || a.Message != "denied by allowonly/allow" {
			t.Errorf("answer %+v", a)
		}
		if a := validate(t, p, podRequest("DELETE", nil)); !a.Allowed {
			t.Errorf("answer %+v", a)
		}
	})
	ctx := context.Background()
	for _, tc := range []struct {
		name, src, entrypoint, config string
		kind                          Kind
		msg                           string
	}{
		{"a builtin the host lacks", `package net
import rego.v1
violation contains "x" if { http.send({"method": "GET", "url": "http://127.0.0.1:1"}) }`, "", "", ErrInvalidModule, "builtins this host does not provide: http.send"},
		{"an entrypoint the module lacks", `package a
import rego.v1
violation contains "x" if false`, "", `{"entrypoint":"a/deny"}`, ErrConfigRejected, `entrypoint "a/deny" is not in the module`},
		{"a config that is no object", `package b
import rego.v1
violation contains "x" if false`, "", `[1]`, ErrConfigRejected, "must be a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm := wasmtest.RegoSource(t, tc.src, tc.entrypoint)
			m, err := r.Compile(ctx, wasm, "")
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			cfg := PluginConfig{Name: "p"}
			if tc.config != "" {
				cfg.Config = json.RawMessage(tc.config)
			}
			_, err = r.Load(ctx, m, cfg)
			var werr *Error
			if !errors.As(err, &werr) || werr.Kind != tc.kind || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Load error = %v, want kind %s with %q", err, tc.kind, tc.msg)
			}
		})
	}
}

func TestOPADecision(t *testing.T) {
	for _, tc := range []struct {
		name, out, want string
	}{
		{"undefined", `[]`, `{"allowed":true}`},
		{"empty set", `[{"result":[]}]`, `{"allowed":true}`},
		{"strings, sorted", `[{"result":["b","a"]}]`, `{"allowed":false,"code":403,"reason":"Forbidden","message":"a; b"}`},
		{"gatekeeper objects", `[{"result":[{"msg":"m","details":{}}]}]`, `{"allowed":false,"code":403,"reason":"Forbidden","message":"m"}`},
		{"other items as JSON", `[{"result":[{"x":1}]}]`, `{"allowed":false,"code":403,"reason":"Forbidden","message":"{\"x\":1}"}`},
		{"allow true", `[{"result":true}]`, `{"allowed":true}`},
		{"allow false", `[{"result":false}]`, `{"allowed":false,"code":403,"reason":"Forbidden","message":"denied by p/allow"}`},
		{"kube-mgmt review", `[{"result":{"response":{"allowed":false,"status":{"message":"no"}}}}]`, `{"allowed":false,"code":403,"reason":"Forbidden","message":"no"}`},
		{"kube-mgmt allowed", `[{"result":{"response":{"allowed":true}}}]`, `{"allowed":true}`},
		{"null", `[{"result":null}]`, `{"allowed":true}`},
		{"no result", `[{}]`, `{"allowed":true}`},
		{"empty set, spaced", ` [ { "result" : [ ] } ] `, `{"allowed":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := opaDecision("p/allow", []byte(tc.out))
			if err != nil || string(got) != tc.want {
				t.Errorf("opaDecision = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{`{}`, `[{"result":"text"}]`, `[{"result":{"x":1}}]`, `garbage`, `[1]`, `[[]]`} {
		if _, err := opaDecision("p", []byte(bad)); err == nil {
			t.Errorf("opaDecision(%s) = nil error", bad)
		}
	}
}

func TestParseOPAConfig(t *testing.T) {
	for _, tc := range []struct {
		in, entry, params string
		compact, whole    bool
	}{
		{``, "", `{}`, false, false},
		{`null`, "", `{}`, false, false},
		{`{"label":"team"}`, "", `{"label":"team"}`, false, false},
		{`{"entrypoint":"a/b","label":"x"}`, "a/b", `{"label":"x"}`, false, false},
		{`{"entrypoint":"a/b","parameters":{"labels":["t"]},"other":1}`, "a/b", `{"labels":["t"]}`, false, false},
		{`{"compactPods":true,"labels":["t"]}`, "", `{"labels":["t"]}`, true, false},
		{`{"compactPods":false,"parameters":{"labels":["t"]}}`, "", `{"labels":["t"]}`, false, false},
		{`{"wholeInput":true,"labels":["t"]}`, "", `{"labels":["t"]}`, false, true},
	} {
		cfg, err := parseOPAConfig(json.RawMessage(tc.in))
		if err != nil || cfg.Entrypoint != tc.entry || string(cfg.Parameters) != tc.params || cfg.CompactPods != tc.compact || cfg.WholeInput != tc.whole {
			t.Errorf("parseOPAConfig(%s) = %+v (%s), %v", tc.in, cfg, cfg.Parameters, err)
		}
	}
	if _, err := parseOPAConfig(json.RawMessage(`{"entrypoint":1}`)); err == nil {
		t.Error("a numeric entrypoint was accepted")
	}
	if _, err := parseOPAConfig(json.RawMessage(`{"compactPods":"yes"}`)); err == nil {
		t.Error("a string compactPods was accepted")
	}
	if _, err := parseOPAConfig(json.RawMessage(`{"wholeInput":1}`)); err == nil {
		t.Error("a numeric wholeInput was accepted")
	}
}

// TestOwnMemory: the memory import of an OPA-shaped module becomes a memory the module
// defines and exports, whether or not it exported it already; other modules are left alone.
func TestOwnMemory(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	for _, tc := range []struct {
		name, wat string
		opa       bool
	}{
		{"imported, not exported", `(module (import "env" "memory" (memory 2 8)) (func (export "f")))`, true},
		{"imported and re-exported", `(module (import "env" "memory" (memory 2)) (export "memory" (memory 0)) (func (export "f")))`, true},
		{"no export section", `(module (import "env" "memory" (memory 1)))`, true},
		{"own memory", `(module (memory (export "memory") 1))`, false},
		{"another module's memory", `(module (import "other" "memory" (memory 1)))`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm := wasmtest.WATSource(t, tc.wat)
			if isOPA(wasm) != tc.opa {
				t.Fatalf("isOPA = %v, want %v", !tc.opa, tc.opa)
			}
			if !tc.opa {
				return
			}
			own, err := ownMemory(wasm)
			if err != nil {
				t.Fatal(err)
			}
			cm, err := rt.CompileModule(ctx, own)
			if err != nil {
				t.Fatal(err)
			}
			if len(cm.ImportedMemories()) != 0 {
				t.Error("the memory is still imported")
			}
			m, ok := cm.ExportedMemories()[abi.ExportMemory]
			if !ok || m.Min() < 1 {
				t.Errorf("exported memories %v", cm.ExportedMemories())
			}
		})
	}
}

// TestRegoInputOverMemoryLimit: a request that does not fit in the instance's memory is an
// out-of-memory error, not a crash, and the next request is answered as before.
func TestRegoInputOverMemoryLimit(t *testing.T) {
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.Rego(t, "require-labels"), PluginConfig{Config: json.RawMessage(`{"labels":["team"]}`),
		Limits: Limits{Instances: 1, MemoryBytes: 4 << 20, MaxInputBytes: 16 << 20}})
	big := map[string]string{"team": "a", "filler": strings.Repeat("x", 6<<20)}
	_, err := p.Call(context.Background(), abi.HookValidate, podRequest("CREATE", big))
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrOutOfMemory {
		t.Fatalf("a 6 MiB request in 4 MiB of memory: got %v, want an %s error", err, ErrOutOfMemory)
	}
	if a := validate(t, p, podRequest("CREATE", map[string]string{"team": "a"})); !a.Allowed {
		t.Fatalf("after the failed call: %+v, want allowed", a)
	}
}

// TestRegoHostBuiltinsMatchOPA evaluates the builtins this host provides through a policy
// compiled to WebAssembly and, beside it, through OPA's own evaluator (`opa eval`), on the
// same arguments: every case must give the same value, or be undefined on both.
// builtinCase is a call of a host builtin compared with OPA's evaluator: fn (prefixed
// "set " when it answers a set) on args.
type builtinCase struct {
	name string
	fn   string
	args []any
}

func TestRegoHostBuiltinsMatchOPA(t *testing.T) {
	opa := wasmtest.RequireTool(t, "opa")
	ns := int64(1709209800000000000) // 2024-02-29T12:30:00Z
	// {"alg":"HS256","typ":"JWT"} {"sub":"1234567890","name":"John Doe","iat":1516239022}, key "secret".
	hsToken := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.XbPfbIHMI6arZ3Y922BhjWgQzWXcXNrz0ogtVhfEd2o"
	cases := []builtinCase{
		{"units-k", "units.parse", []any{"10K"}}, {"units-M", "units.parse", []any{"200M"}},
		{"units-milli", "units.parse", []any{"100m"}}, {"units-Ki", "units.parse", []any{"10Ki"}},
		{"units-Gi", "units.parse", []any{"5Gi"}}, {"units-plain", "units.parse", []any{"1.5"}},
		{"units-quoted", "units.parse", []any{`"100TI"`}}, {"units-zero", "units.parse", []any{"0.0"}},
		{"units-bad", "units.parse", []any{"12x"}},
		{"bytes-GB", "units.parse_bytes", []any{"10GB"}}, {"bytes-K", "units.parse_bytes", []any{"5K"}},
		{"bytes-mb", "units.parse_bytes", []any{"4mb"}}, {"bytes-KiB", "units.parse_bytes", []any{"1.5KiB"}},
		{"bytes-Mi", "units.parse_bytes", []any{"1Mi"}}, {"bytes-plain", "units.parse_bytes", []any{"100"}},
		{"bytes-bad", "units.parse_bytes", []any{"12x"}},
		{"re-replace", "regex.replace", []any{"hello world", "o", "0"}},
		{"re-replace-groups", "regex.replace", []any{"abc123", "([a-z]+)([0-9]+)", "$2$1"}},
		{"re-split", "regex.split", []any{`\s*,\s*`, "a , b,c"}},
		{"re-find-2", "regex.find_n", []any{"[0-9]+", "a1b22c333", 2}},
		{"re-find-all", "regex.find_n", []any{"[0-9]+", "a1b22c333", -1}},
		{"re-find-none", "regex.find_n", []any{"x", "abc", -1}},
		{"re-bad", "regex.replace", []any{"a", "(", "b"}},
		{"prefix-any", "strings.any_prefix_match", []any{[]string{"foo", "bar"}, []string{"ba"}}},
		{"prefix-one", "strings.any_prefix_match", []any{"foo", []string{"x", "f"}}},
		{"prefix-no", "strings.any_prefix_match", []any{"foo", "x"}},
		{"suffix", "strings.any_suffix_match", []any{[]string{"foo.example.com"}, []string{"example.com"}}},
		{"count", "strings.count", []any{"cheese", "e"}},
		{"hex-enc", "hex.encode", []any{"hi"}}, {"hex-dec", "hex.decode", []any{"6869"}},
		{"hex-bad", "hex.decode", []any{"zz"}},
		{"b64url-nopad", "base64url.encode_no_pad", []any{"hi?"}},
		{"url-enc", "urlquery.encode", []any{"a b&c"}}, {"url-dec", "urlquery.decode", []any{"a+b%26c"}},
		{"url-enc-obj", "urlquery.encode_object", []any{map[string]any{"a": "1", "b": []string{"x", "y"}}}},
		{"url-dec-obj", "urlquery.decode_object", []any{"a=1&b=x&b=y"}},
		{"md5", "crypto.md5", []any{"hello"}}, {"sha1", "crypto.sha1", []any{"hello"}},
		{"sha256", "crypto.sha256", []any{"hello"}},
		{"hmac-md5", "crypto.hmac.md5", []any{"msg", "key"}}, {"hmac-sha1", "crypto.hmac.sha1", []any{"msg", "key"}},
		{"hmac-sha256", "crypto.hmac.sha256", []any{"msg", "key"}}, {"hmac-sha512", "crypto.hmac.sha512", []any{"msg", "key"}},
		{"hmac-equal", "crypto.hmac.equal", []any{"ab", "ab"}}, {"hmac-unequal", "crypto.hmac.equal", []any{"ab", "ac"}},
		{"rfc3339", "time.parse_rfc3339_ns", []any{"2024-02-29T12:30:00Z"}},
		{"rfc3339-offset", "time.parse_rfc3339_ns", []any{"2024-02-29T12:30:00+02:00"}},
		{"rfc3339-bad", "time.parse_rfc3339_ns", []any{"yesterday"}},
		{"duration", "time.parse_duration_ns", []any{"1h30m"}}, {"duration-bad", "time.parse_duration_ns", []any{"soon"}},
		{"date", "time.date", []any{ns}}, {"date-zone", "time.date", []any{[]any{ns, "Asia/Tokyo"}}},
		{"clock", "time.clock", []any{ns}}, {"clock-zone", "time.clock", []any{[]any{ns, "America/New_York"}}},
		{"weekday", "time.weekday", []any{ns}},
		{"add-date", "time.add_date", []any{ns, 1, 1, 1}},
		{"semver-valid", "semver.is_valid", []any{"1.2.3-rc.1+build"}}, {"semver-v", "semver.is_valid", []any{"v1.2.3"}},
		{"semver-short", "semver.is_valid", []any{"1.2"}}, {"semver-number", "semver.is_valid", []any{5}},
		{"semver-cmp", "semver.compare", []any{"1.2.3", "1.10.0"}}, {"semver-cmp-pre", "semver.compare", []any{"1.0.0-alpha", "1.0.0"}},
		{"semver-cmp-eq", "semver.compare", []any{"2.0.0", "2.0.0"}}, {"semver-cmp-v", "semver.compare", []any{"v2.1.0", "2.0.9"}},
		{"yaml-unmarshal-nested", "yaml.unmarshal", []any{"items:\n  - name: a\n    on: yes\n    n: 1.5\n"}},
		{"cidr-valid", "net.cidr_is_valid", []any{"10.0.0.0/8"}}, {"cidr-ip", "net.cidr_is_valid", []any{"10.0.0.0"}},
		{"cidr-v6", "net.cidr_is_valid", []any{"::1/128"}},
		{"yaml-marshal", "yaml.marshal", []any{map[string]any{"a": []any{1, "x"}, "b": map[string]any{"c": true}}}},
		{"yaml-unmarshal", "yaml.unmarshal", []any{"a: 1\nb: [x, y]\n"}},
		{"yaml-valid", "yaml.is_valid", []any{"a: 1"}}, {"yaml-invalid", "yaml.is_valid", []any{"a: ["}},
		{"range-step", "numbers.range_step", []any{1, 10, 3}}, {"range-step-down", "numbers.range_step", []any{10, 1, 4}},
		{"range-step-zero", "numbers.range_step", []any{1, 10, 0}},
		{"duration-days", "time.parse_duration_ns", []any{"1d12h"}}, {"duration-weeks", "time.parse_duration_ns", []any{"-1.5w"}},
		{"duration-year", "time.parse_duration_ns", []any{"1y"}}, {"duration-days-bad", "time.parse_duration_ns", []any{"1dx"}},
		{"format", "time.format", []any{ns}}, {"format-zone", "time.format", []any{[]any{ns, "Asia/Tokyo"}}},
		{"format-layout", "time.format", []any{[]any{ns, "UTC", "2006-01-02"}}},
		{"format-named", "time.format", []any{[]any{ns, "", "RFC1123"}}},
		{"parse-ns", "time.parse_ns", []any{"2006-01-02", "2024-02-29"}},
		{"parse-ns-named", "time.parse_ns", []any{"RFC822", "29 Feb 24 12:30 UTC"}},
		{"parse-ns-bad", "time.parse_ns", []any{"2006-01-02", "Feb 29"}},
		{"diff", "time.diff", []any{ns, int64(1651370645000000000)}},
		{"diff-borrow", "time.diff", []any{int64(1706745600000000000), ns}},
		{"diff-zone", "time.diff", []any{[]any{ns, "America/New_York"}, int64(1000000000)}},
		{"quote-meta", "glob.quote_meta", []any{"*.example.{com,org}?[x]\\"}},
		{"template", "strings.render_template", []any{"{{.name}} has {{.n}} {{.missing}}", map[string]any{"name": "pod", "n": 2}}},
		{"template-bad", "strings.render_template", []any{"{{.name", map[string]any{}}},
		{"jwt-decode", "io.jwt.decode", []any{"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"}},
		{"jwt-decode-bad", "io.jwt.decode", []any{"a.b"}},
		{"x509", "crypto.x509.parse_certificates", []any{testCertPEM}},
		{"x509-bad", "crypto.x509.parse_certificates", []any{"not a cert"}},
		{"subset-object", "object.subset", []any{map[string]any{"a": 1, "b": map[string]any{"c": []any{1, 2, 3}}}, map[string]any{"b": map[string]any{"c": []any{2, 3}}}}},
		{"subset-object-no", "object.subset", []any{map[string]any{"a": 1}, map[string]any{"a": 2}}},
		{"subset-array", "object.subset", []any{[]any{1, 2, 3, 4}, []any{2, 3}}},
		{"subset-array-gap", "object.subset", []any{[]any{1, 2, 3, 4}, []any{2, 4}}},
		{"subset-number", "object.subset", []any{[]any{1.0, 2}, []any{1}}},
		{"subset-types", "object.subset", []any{"a", []any{"a"}}},
		{"marshal-pretty", "json.marshal_with_options", []any{map[string]any{"b": []any{1, "x"}, "a": true}, map[string]any{"pretty": true}}},
		{"marshal-indent", "json.marshal_with_options", []any{map[string]any{"a": 1}, map[string]any{"indent": "  ", "prefix": "> "}}},
		{"marshal-not-pretty", "json.marshal_with_options", []any{[]any{1}, map[string]any{"indent": "  ", "pretty": false}}},
		{"marshal-bad-option", "json.marshal_with_options", []any{1, map[string]any{"colour": "red"}}},
		{"patch-add", "json.patch", []any{map[string]any{"a": map[string]any{"b": []any{1, 3}}}, []any{
			map[string]any{"op": "add", "path": "/a/b/1", "value": 2}, map[string]any{"op": "add", "path": "/a/b/-", "value": 4},
			map[string]any{"op": "add", "path": "/a/c~1d", "value": "x"}, map[string]any{"op": "replace", "path": "/a/b/0", "value": 0},
			map[string]any{"op": "copy", "from": "/a/b", "path": "/copy"}, map[string]any{"op": "move", "from": "/a/c~1d", "path": "/moved"},
			map[string]any{"op": "remove", "path": "/a/b/3"}, map[string]any{"op": "test", "path": "/copy/3", "value": 4}}}},
		{"patch-array-path", "json.patch", []any{map[string]any{"a": []any{"x"}}, []any{map[string]any{"op": "add", "path": []any{"a", 0}, "value": "w"}}}},
		{"patch-root", "json.patch", []any{map[string]any{"a": 1}, []any{map[string]any{"op": "replace", "path": "", "value": []any{1}}}}},
		{"patch-remove-root-add", "json.patch", []any{map[string]any{"a": 1}, []any{map[string]any{"op": "remove", "path": ""}, map[string]any{"op": "add", "path": "", "value": 3}}}},
		{"patch-test-fails", "json.patch", []any{map[string]any{"a": 1}, []any{map[string]any{"op": "test", "path": "/a", "value": 2}}}},
		{"patch-remove-missing", "json.patch", []any{map[string]any{"a": 1}, []any{map[string]any{"op": "remove", "path": "/b"}}}},
		{"patch-replace-missing", "json.patch", []any{map[string]any{"a": 1}, []any{map[string]any{"op": "replace", "path": "/b", "value": 1}}}},
		{"patch-out-of-range", "json.patch", []any{[]any{1}, []any{map[string]any{"op": "add", "path": "/5", "value": 1}}}},
		{"patch-leading-zero", "json.patch", []any{[]any{1, 2}, []any{map[string]any{"op": "add", "path": "/01", "value": 1}}}},
		{"patch-bad-op", "json.patch", []any{map[string]any{}, []any{map[string]any{"op": "frob", "path": "/a"}}}},
		{"jwt-hs256", "io.jwt.verify_hs256", []any{hsToken, "secret"}}, {"jwt-hs256-wrong", "io.jwt.verify_hs256", []any{hsToken, "other"}},
		{"jwt-hs512-bad", "io.jwt.verify_hs512", []any{"a.b", "secret"}},
		{"uuid-v4", "uuid.parse", []any{"f47ac10b-58cc-4372-a567-0e02b2c3d479"}},
		{"uuid-v1", "uuid.parse", []any{"6ba7b810-9dad-11d1-80b4-00c04fd430c8"}},
		{"uuid-v2", "uuid.parse", []any{"000003e8-9dad-21d1-8200-00c04fd430c8"}},
		{"uuid-v1-multicast", "uuid.parse", []any{"6ba7b810-9dad-11d1-80b4-03c04fd430c8"}},
		{"uuid-bad", "uuid.parse", []any{"not-a-uuid"}},
		{"template-match", "regex.template_match", []any{"urn:foo:{.*}", "urn:foo:bar:baz", "{", "}"}},
		{"template-match-literal", "regex.template_match", []any{"urn:foo.bar:{[a-z]+}", "urn:fooxbar:abc", "{", "}"}},
		{"template-match-nested", "regex.template_match", []any{"x<a{1,2}>y", "xaay", "<", ">"}},
		{"template-match-unbalanced", "regex.template_match", []any{"urn:{.*", "urn:x", "{", "}"}},
		{"template-match-bad-re", "regex.template_match", []any{"urn:{(}", "urn:x", "{", "}"}},
		{"cidr-expand", "set net.cidr_expand", []any{"192.168.1.4/30"}},
		{"cidr-expand-v6", "set net.cidr_expand", []any{"fd00::/126"}},
		{"cidr-merge", "set net.cidr_merge", []any{[]any{"192.0.128.0/24", "192.0.129.0/24", "10.0.0.0/8", "10.1.0.0/16", "11.0.0.1", "2001:db8::/33", "2001:db8:8000::/33"}}},
		{"cidr-merge-range", "set net.cidr_merge", []any{[]any{"10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24"}}},
		{"cidr-merge-bad", "set net.cidr_merge", []any{[]any{"x"}}},
		{"reachable-paths", "set graph.reachable_paths", []any{map[string]any{"a": []any{"b", "c"}, "b": []any{"d"}, "c": []any{"a"}, "d": []any{}}, []any{"a"}}},
		{"reachable-paths-missing", "set graph.reachable_paths", []any{map[string]any{"a": []any{"x"}}, []any{"a", "z"}}},
	}
	cases = append(cases, jwtVerifyCases(t)...)
	cases = append(cases, x509Cases(t)...)
	var src strings.Builder
	src.WriteString("package probe\n\nimport rego.v1\n\n")
	params := map[string]any{}
	for _, c := range cases {
		params[c.name] = c.args
		var args []string
		for i := range c.args {
			args = append(args, fmt.Sprintf("input.parameters[%q][%d]", c.name, i))
		}
		if fn, ok := strings.CutPrefix(c.fn, "set "); ok {
			// A set answer: its type and members (json.marshal orders a set's members
			// as its engine keeps them).
			fmt.Fprintf(&src, "violation contains {\"msg\": json.marshal({\"case\": %q, \"value\": [is_set(x), sort(x)]})} if { x := %s(%s) }\n", c.name, fn, strings.Join(args, ", "))
			continue
		}
		fmt.Fprintf(&src, "violation contains {\"msg\": json.marshal({\"case\": %q, \"value\": v})} if { v := %s(%s) }\n", c.name, c.fn, strings.Join(args, ", "))
	}
	paramsJSON, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	// Through this host.
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.RegoSource(t, src.String(), "probe/violation"), PluginConfig{Config: json.RawMessage(`{"parameters":` + string(paramsJSON) + `}`)})
	a := validate(t, p, podRequest("CREATE", nil))
	got := map[string]any{}
	for i, m := range strings.Split(a.Message, `; {"case":`) {
		if i > 0 {
			m = `{"case":` + m
		}
		var v struct {
			Case  string `json:"case"`
			Value any    `json:"value"`
		}
		if err := json.Unmarshal([]byte(m), &v); err != nil {
			t.Fatalf("message part %q: %v (the whole answer: %+v)", m, err, a)
		}
		got[v.Case] = v.Value
	}
	// Through OPA's evaluator.
	dir := t.TempDir()
	policy, input := filepath.Join(dir, "probe.rego"), filepath.Join(dir, "input.json")
	if err := os.WriteFile(policy, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(input, []byte(`{"parameters":`+string(paramsJSON)+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(opa, "eval", "--format", "json", "-d", policy, "-i", input, "data.probe.violation").Output()
	if err != nil {
		t.Fatalf("opa eval: %v", err)
	}
	var rs struct {
		Result []struct {
			Expressions []struct {
				Value []struct {
					Msg string `json:"msg"`
				} `json:"value"`
			} `json:"expressions"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &rs); err != nil || len(rs.Result) != 1 || len(rs.Result[0].Expressions) != 1 {
		t.Fatalf("opa eval answered %s (%v)", out, err)
	}
	want := map[string]any{}
	for _, m := range rs.Result[0].Expressions[0].Value {
		var v struct {
			Case  string `json:"case"`
			Value any    `json:"value"`
		}
		if err := json.Unmarshal([]byte(m.Msg), &v); err != nil {
			t.Fatal(err)
		}
		want[v.Case] = v.Value
	}
	for _, c := range cases {
		g, gok := got[c.name]
		w, wok := want[c.name]
		switch {
		case gok != wok:
			t.Errorf("%s%v: defined here %v (%v), by OPA %v (%v)", c.fn, c.args, gok, g, wok, w)
		case !reflect.DeepEqual(g, w):
			t.Errorf("%s%v = %#v here, %#v by OPA", c.fn, c.args, g, w)
		}
	}
}

// TestRegoTimeAndUUIDBuiltins: time.now_ns and uuid.rfc4122 give one value per evaluation
// (per seed), the time of the evaluation, and a fresh uuid the next time.
func TestRegoTimeAndUUIDBuiltins(t *testing.T) {
	src := `package probe

import rego.v1

violation contains {"msg": json.marshal([time.now_ns(), time.now_ns(), uuid.rfc4122(input.parameters.seed), uuid.rfc4122(input.parameters.seed), uuid.rfc4122("other")])} if { true }
`
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.RegoSource(t, src, "probe/violation"), PluginConfig{Config: json.RawMessage(`{"parameters":{"seed":"s"}}`)})
	eval := func() (int64, int64, string, string, string) {
		var v [5]json.RawMessage
		if err := json.Unmarshal([]byte(validate(t, p, podRequest("CREATE", nil)).Message), &v); err != nil {
			t.Fatal(err)
		}
		var n1, n2 int64
		var u1, u2, u3 string
		for i, dst := range []any{&n1, &n2, &u1, &u2, &u3} {
			if err := json.Unmarshal(v[i], dst); err != nil {
				t.Fatal(err)
			}
		}
		return n1, n2, u1, u2, u3
	}
	before := time.Now().UnixNano()
	n1, n2, u1, u2, u3 := eval()
	after := time.Now().UnixNano()
	if n1 != n2 || n1 < before || n1 > after {
		t.Errorf("time.now_ns gave %d and %d in one evaluation between %d and %d", n1, n2, before, after)
	}
	if _, err := uuid.Parse(u1); u1 != u2 || u1 == u3 || err != nil {
		t.Errorf("uuid.rfc4122: %q, %q for one seed, %q for another", u1, u2, u3)
	}
	if _, _, v1, _, _ := eval(); v1 == u1 {
		t.Errorf("uuid.rfc4122 gave %q again in the next evaluation", v1)
	}
}

// testCertPEM is a self-signed ECDSA certificate with a DNS and a URI name, valid until 2126.
const testCertPEM = `-----BEGIN CERTIFICATE-----
MIICAzCCAaqgAwIBAgIUKfQOnc1yTRUYXJCt3EyT7m2sa0MwCgYIKoZIzj0EAwIw
MTEbMBkGA1UEAwwScG9saWN5LmV4YW1wbGUuY29tMRIwEAYDVQQKDAl3YXNtcGxh
bmUwIBcNMjYxMjA2MTMzMzM3WhgPMjEyNjExMTIxMzMzMzdaMDExGzAZBgNVBAMM
EnBvbGljeS5leGFtcGxlLmNvbTESMBAGA1UECgwJd2FzbXBsYW5lMFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEZ+5idS4zZH3V1W0tLTj+8w880kTvf138EIpMtseE
gJCID/mh4/VifrjQLSNe6zV9G31d3PGhmwo1EBznKXIWSqOBnTCBmjAdBgNVHQ4E
FgQUqnEcsihY+jah7OKxaP+fTO9ueukwHwYDVR0jBBgwFoAUqnEcsihY+jah7OKx
aP+fTO9ueukwDwYDVR0TAQH/BAUwAwEB/zBHBgNVHREEQDA+ghJwb2xpY3kuZXhh
bXBsZS5jb22GKHNwaWZmZTovL2NsdXN0ZXIubG9jYWwvbnMvZGVmYXVsdC9zYS93
ZWIwCgYIKoZIzj0EAwIDRwAwRAIgG8S911PtX1mf6DPsNvfuQ7U74qJCucgt5j6D
Cyns75cCIG3enDjmC13Sor/lfTkBnouzl0ZPOmq8NstidKcKxJqi
-----END CERTIFICATE-----`
