package toolkit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	admissionplugins "github.com/wasmplane/wasmplane/core/admission/plugins"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { wasmtest.Main(m) }

// build runs toolkit.Build; a missing toolchain skips the test locally and fails it
// under CI, which installs them all.
func build(t *testing.T, o toolkit.BuildOptions) *toolkit.Result {
	t.Helper()
	res, err := toolkit.Build(context.Background(), o)
	if errors.Is(err, toolkit.ErrToolchainMissing) {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// call loads module through the host with config and sends one request file's JSON.
func call(t *testing.T, module []byte, config, hook, req string) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	r, err := toolkit.Open(ctx, module, toolkit.RunOptions{Config: json.RawMessage(config), CacheDir: wasmtest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	c, err := r.Prepare(hook, json.RawMessage(req))
	if err != nil {
		t.Fatal(err)
	}
	return c.Do(ctx)
}

// admission builds a validate request for a pod with labels.
func admission(labels string) string {
	return `{"uid":"1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},
"name":"web","namespace":"default","operation":"CREATE","userInfo":{"username":"alice"},
"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":` + labels + `},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}}`
}

// TestScaffoldBuildRunInstall is the whole plugin workflow in each language: init a
// validate plugin, build it with its toolchain, run it through the host with a request
// file, then push it and apply a WasmPlugin to a real in-process server and read both
// back.
func TestScaffoldBuildRunInstall(t *testing.T) {
	repo := wasmtest.ModuleRoot(t)
	// One plugin per language lives in "default": more than the ceiling for namespaced
	// plugins allows by default (tests/apiserver's TestTenantCeilings checks the ceiling itself).
	inst, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), Port: 0,
		PluginCeilings: admissionplugins.PluginCeilings{PluginsPerNamespace: -1},
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Close)
	client, err := toolkit.NewClient(inst.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", inst.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}

	denied := `{"allowed":false,"code":403,"reason":"Forbidden","message":"label \"team\" is required"}`
	for _, tc := range []struct {
		lang           toolkit.Lang
		without, with_ string // answers for a pod without and with the label
	}{
		{toolkit.Go, denied, `{"allowed":true}`},
		{toolkit.C, denied, `{"allowed":true}`},
		{toolkit.WAT, `{"allowed":true}`, `{"allowed":true}`}, // the WAT skeleton answers a fixed document
		{toolkit.AssemblyScript, denied, `{"allowed":true}`},
		{toolkit.Rust, denied, `{"allowed":true}`},
		{toolkit.Rego, denied, `{"allowed":true}`},
	} {
		t.Run(string(tc.lang), func(t *testing.T) {
			t.Parallel()
			name := "require-team-" + string(tc.lang)
			dir := filepath.Join(t.TempDir(), name)
			// The SDK copied from the checkout (--sdk); cmd/wasmplane's tests build
			// projects with the SDK the binary carries.
			if _, err := toolkit.Init(toolkit.InitOptions{Dir: dir, Lang: tc.lang, Hook: "validate", Repo: repo}); err != nil {
				t.Fatal(err)
			}
			if tc.lang == toolkit.AssemblyScript {
				wasmtest.LinkASCompiler(t, repo, dir)
			}
			res := build(t, toolkit.BuildOptions{Dir: dir})
			if res.Lang != tc.lang || res.Path != filepath.Join(dir, name+".wasm") {
				t.Fatalf("built %+v", res)
			}
			module, err := os.ReadFile(res.Path)
			if err != nil {
				t.Fatal(err)
			}
			if wasm.Digest(module) != res.SHA256 || len(module) != res.Size {
				t.Fatalf("result %+v does not describe the file", res)
			}
			// A Rego build records what the policy reads of its input (the host gives it
			// only that); other languages' builds record nothing.
			if want := "input.parameters, input.review.object.metadata.labels, input.review.operation"; tc.lang == toolkit.Rego && (res.Input == nil || res.Input.String() != want) {
				t.Errorf("recorded input %v, want %s", res.Input, want)
			} else if tc.lang != toolkit.Rego && res.Input != nil {
				t.Errorf("a %s build recorded input %v", tc.lang, res.Input)
			}

			// The scaffold's own sample request and config, as `plugin test` reads them.
			req, err := toolkit.ReadJSONFile(filepath.Join(dir, "request.json"), nil)
			if err != nil {
				t.Fatal(err)
			}
			config, err := toolkit.ReadJSONFile(filepath.Join(dir, "config.json"), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ req, want string }{
				{string(req), tc.without},
				{admission(`{"team":"a"}`), tc.with_},
			} {
				got, err := call(t, module, string(config), "validate", c.req)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != c.want {
					t.Errorf("answer = %s, want %s", got, c.want)
				}
			}
			if _, err := call(t, module, string(config), "score", `{"pod":{},"nodes":[]}`); wasm.KindOf(err) != wasm.ErrNotImplemented {
				t.Errorf("score on a validate-only module: %v, want kind not-implemented", err)
			}

			ctx := context.Background()
			m, created, err := client.Push(ctx, module)
			if err != nil || !created || m.Spec.Digest != "sha256:"+res.SHA256 {
				t.Fatalf("push = %+v, created %v, %v", m, created, err)
			}
			if _, created, err := client.Push(ctx, module); err != nil || created {
				t.Fatalf("second push: created %v, %v; want already stored", created, err)
			}
			blob, err := client.ModuleBlob(ctx, m.Spec.Digest)
			if err != nil || !bytes.Equal(blob, module) {
				t.Fatalf("blob: %d bytes, %v; want the %d pushed bytes", len(blob), err, len(module))
			}

			spec, err := toolkit.BuildSpec(toolkit.SpecOptions{Digest: m.Spec.Digest, Hooks: []string{"validate"},
				Rules: []string{"pods:CREATE,UPDATE"}, Config: config, FailurePolicy: "Ignore"})
			if err != nil {
				t.Fatal(err)
			}
			o := toolkit.ApplyOptions{Name: name, Namespace: "default", Spec: spec}
			for _, want := range []string{"created", "unchanged"} {
				if action, _, err := client.Apply(ctx, o); err != nil || action != want {
					t.Fatalf("apply = %q, %v; want %q", action, err, want)
				}
			}
			o.Spec.Config.Raw = []byte(`{"label":"owner"}`)
			if action, _, err := client.Apply(ctx, o); err != nil || action != "configured" {
				t.Fatalf("apply with a new config = %q, %v; want configured", action, err)
			}

			// Read the object back with a client of our own, not the toolkit's.
			var got wasmv1.WasmPlugin
			raw := get(t, cfg, "/apis/wasmplane.io/v1alpha1/namespaces/default/wasmplugins/"+name)
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.SHA256 != res.SHA256 || got.Spec.Module.Digest != "sha256:"+res.SHA256 || string(got.Spec.Config.Raw) != `{"label":"owner"}` ||
				len(got.Spec.Rules) != 1 || got.Spec.Rules[0].Resources[0] != "pods" || *got.Spec.FailurePolicy != wasmv1.Ignore {
				t.Errorf("stored plugin = %s", raw)
			}
			if blob := get(t, cfg, "/apis/wasmplane.io/v1alpha1/wasmmodules/sha256-"+res.SHA256+"/blob"); !bytes.Equal(blob, module) {
				t.Fatalf("GET …/blob: %d bytes, want the %d pushed", len(blob), len(module))
			}
		})
	}

	t.Run("cluster plugin and invalid spec", func(t *testing.T) {
		ctx := context.Background()
		mod := wasmtest.WAT(t, "good")
		digest, stored, _, err := client.ResolveModule(ctx, writeTemp(t, mod), "", "")
		if err != nil || stored == nil {
			t.Fatal(err)
		}
		spec, err := toolkit.BuildSpec(toolkit.SpecOptions{Digest: digest, Hooks: []string{"authenticate", "validate"}, Profiles: []string{"default-scheduler"}, Weight: 2})
		if err != nil {
			t.Fatal(err)
		}
		if action, obj, err := client.Apply(ctx, toolkit.ApplyOptions{Name: "good", Spec: spec}); err != nil || action != "created" {
			t.Fatalf("apply = %q, %v", action, err)
		} else if p, ok := obj.(*wasmv1.ClusterWasmPlugin); !ok || p.Spec.Scheduler.Weight != 2 {
			t.Fatalf("applied %#v", obj)
		}
		// The server refuses what only a cluster plugin may do; the error says why.
		_, _, err = client.Apply(ctx, toolkit.ApplyOptions{Name: "auth", Namespace: "default", Spec: spec})
		if err == nil || !strings.Contains(err.Error(), "use a ClusterWasmPlugin") {
			t.Fatalf("namespaced authenticate: %v", err)
		}
	})
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// get reads a path with a plain HTTP client made from the kubeconfig (not the
// toolkit's REST client), failing the test on any status but 200.
func get(t *testing.T, cfg *rest.Config, path string) []byte {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", path, resp.Status, err, b)
	}
	return b
}
