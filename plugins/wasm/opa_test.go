package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

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
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := opaDecision("p/allow", []byte(tc.out))
			if err != nil || string(got) != tc.want {
				t.Errorf("opaDecision = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{`{}`, `[{"result":"text"}]`, `[{"result":{"x":1}}]`} {
		if _, err := opaDecision("p", []byte(bad)); err == nil {
			t.Errorf("opaDecision(%s) = nil error", bad)
		}
	}
}

func TestParseOPAConfig(t *testing.T) {
	for _, tc := range []struct{ in, entry, params string }{
		{``, "", `{}`},
		{`null`, "", `{}`},
		{`{"label":"team"}`, "", `{"label":"team"}`},
		{`{"entrypoint":"a/b","label":"x"}`, "a/b", `{"label":"x"}`},
		{`{"entrypoint":"a/b","parameters":{"labels":["t"]},"other":1}`, "a/b", `{"labels":["t"]}`},
	} {
		cfg, err := parseOPAConfig(json.RawMessage(tc.in))
		if err != nil || cfg.Entrypoint != tc.entry || string(cfg.Parameters) != tc.params {
			t.Errorf("parseOPAConfig(%s) = %+v (%s), %v", tc.in, cfg, cfg.Parameters, err)
		}
	}
	if _, err := parseOPAConfig(json.RawMessage(`{"entrypoint":1}`)); err == nil {
		t.Error("a numeric entrypoint was accepted")
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
