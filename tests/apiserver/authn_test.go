// The authentication tests drive the authentication chain of a real server over TLS: client
// certificates, static tokens, ServiceAccount tokens, bootstrap tokens, anonymous
// requests and WASM authenticators.

package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/pki"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

type authnEnv struct {
	inst  *server.Instance
	admin kubernetes.Interface
}

func start(t *testing.T) *authnEnv {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("alice-token,alice,1001,\"dev,qa\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, err := server.Start(context.Background(), server.Config{DataDir: filepath.Join(dir, "data"), Port: 0, Logger: testserver.Logger(),
		TokenAuthFile: tokens, AnonymousAuth: true, DisableScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Close)
	return &authnEnv{inst: inst, admin: kubernetes.NewForConfigOrDie(inst.RESTConfig())}
}

// anonymousConfig trusts the server's CA and presents no credential.
func (e *authnEnv) anonymousConfig() *rest.Config {
	return &rest.Config{Host: e.inst.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: e.inst.CA()}, QPS: -1}
}

func (e *authnEnv) tokenConfig(token string) *rest.Config {
	c := e.anonymousConfig()
	c.BearerToken = token
	return c
}

// whoami runs a SelfSubjectReview (what `kubectl auth whoami` sends) as cfg.
func authnWhoami(t *testing.T, cfg *rest.Config) (authenticationv1.UserInfo, error) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

func mustBeUser(t *testing.T, cfg *rest.Config, name string, groups ...string) authenticationv1.UserInfo {
	t.Helper()
	u, err := authnWhoami(t, cfg)
	if err != nil {
		t.Fatalf("whoami as %s: %v", name, err)
	}
	if u.Username != name {
		t.Fatalf("whoami = %q, want %q", u.Username, name)
	}
	for _, g := range append(groups, authn.GroupAuthenticated) {
		if !contains(u.Groups, g) {
			t.Fatalf("%s's groups %v lack %q", name, u.Groups, g)
		}
	}
	return u
}

func mustBeUnauthorized(t *testing.T, cfg *rest.Config) {
	t.Helper()
	_, err := authnWhoami(t, cfg)
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("want 401 Unauthorized, got %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestBuiltInAuthenticators(t *testing.T) {
	e := start(t)
	ctx := context.Background()

	t.Run("admin client certificate", func(t *testing.T) {
		mustBeUser(t, e.inst.RESTConfig(), "system:admin", authn.GroupMasters)
	})
	t.Run("issued client certificate", func(t *testing.T) {
		certPEM, keyPEM, err := e.inst.IssueClientCertificate("carol", "tenant-a")
		if err != nil {
			t.Fatal(err)
		}
		c := e.anonymousConfig()
		c.CertData, c.KeyData = certPEM, keyPEM
		mustBeUser(t, c, "carol", "tenant-a")
	})
	t.Run("client certificate of another CA", func(t *testing.T) {
		other, err := pki.LoadOrCreateCA(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		certPEM, keyPEM, err := other.Issue(pki.Leaf{CommonName: "system:admin", Organizations: []string{authn.GroupMasters}, Usage: pki.ClientAuth})
		if err != nil {
			t.Fatal(err)
		}
		c := e.anonymousConfig()
		c.CertData, c.KeyData = certPEM, keyPEM
		mustBeUnauthorized(t, c)
	})
	t.Run("no credentials", func(t *testing.T) {
		mustBeUnauthorized(t, e.anonymousConfig())
	})
	t.Run("static token", func(t *testing.T) {
		u := mustBeUser(t, e.tokenConfig("alice-token"), "alice", "dev", "qa")
		if u.UID != "1001" {
			t.Fatalf("uid %q", u.UID)
		}
	})
	t.Run("unknown token", func(t *testing.T) {
		mustBeUnauthorized(t, e.tokenConfig("nobody-token"))
	})
	t.Run("anonymous reaches health and version only", func(t *testing.T) {
		hc, err := rest.HTTPClientFor(e.anonymousConfig())
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]int{"/healthz": 200, "/livez": 200, "/readyz": 200, "/version": 200,
			"/api/v1/namespaces": 401, "/api": 401, "/metrics": 401} {
			resp, err := hc.Get(e.inst.URL() + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("anonymous GET %s = %d, want %d", path, resp.StatusCode, want)
			}
		}
		// A rejected credential never falls back to anonymous.
		hc, err = rest.HTTPClientFor(e.tokenConfig("nobody-token"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(e.inst.URL() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("bad token on /healthz = %d, want 401", resp.StatusCode)
		}
	})

	t.Run("service account tokens", func(t *testing.T) {
		ns := "sa-test"
		if _, err := e.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The ServiceAccount controller gives every namespace its "default" ServiceAccount.
		waitfor.Condition(t, time.Minute, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
			_, err := e.admin.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		if _, err := e.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		exp := int64(3600)
		tr, err := e.admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Status.Token == "" || time.Until(tr.Status.ExpirationTimestamp.Time) < 59*time.Minute {
			t.Fatalf("token request status %+v", tr.Status)
		}
		cfg := e.tokenConfig(tr.Status.Token)
		mustBeUser(t, cfg, "system:serviceaccount:sa-test:robot", "system:serviceaccounts", "system:serviceaccounts:sa-test")

		// TokenReview says the same.
		rev, err := e.admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !rev.Status.Authenticated || rev.Status.User.Username != "system:serviceaccount:sa-test:robot" {
			t.Fatalf("token review %+v", rev.Status)
		}
		// A token for another audience does not authenticate here.
		other, err := e.admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mustBeUnauthorized(t, e.tokenConfig(other.Status.Token))
		// Too short an expiry is a 422 with the field named.
		short := int64(60)
		_, err = e.admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &short}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.expirationSeconds") {
			t.Fatalf("short expiry: %v", err)
		}
		// Deleting the ServiceAccount revokes its tokens.
		if err := e.admin.CoreV1().ServiceAccounts(ns).Delete(ctx, "robot", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitfor.Condition(t, time.Minute, "the token to be revoked", func(context.Context) (bool, error) {
			_, err := authnWhoami(t, cfg)
			return apierrors.IsUnauthorized(err), nil
		})
		// Malformed tokens are refused.
		mustBeUnauthorized(t, e.tokenConfig(tr.Status.Token[:len(tr.Status.Token)-5]+"AAAAA"))
	})

	t.Run("bootstrap token", func(t *testing.T) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abc123", Namespace: "kube-system"}, Type: authn.BootstrapSecretType,
			StringData: map[string]string{authn.BootstrapTokenID: "abc123", authn.BootstrapTokenSecret: "0123456789abcdef",
				authn.BootstrapUsageAuth: "true", authn.BootstrapExpiration: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}
		if _, err := e.admin.CoreV1().Secrets("kube-system").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The authenticator reads secrets from the watch cache: allow it to catch up.
		waitfor.Condition(t, time.Minute, "the bootstrap token to be usable", func(context.Context) (bool, error) {
			_, err := authnWhoami(t, e.tokenConfig("abc123.0123456789abcdef"))
			return err == nil, nil
		})
		mustBeUser(t, e.tokenConfig("abc123.0123456789abcdef"), "system:bootstrap:abc123", authn.GroupBootstrappers)
		mustBeUnauthorized(t, e.tokenConfig("abc123.aaaaaaaaaaaaaaaa"))
	})
}

// TestWasmAuthenticators installs WASM authenticators as ClusterWasmPlugins: the example
// token authenticator lets its users in; a trapping one is "not mine" and the chain goes
// on; a tenant cannot install one.
func TestWasmAuthenticators(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	e := start(t)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(e.inst.RESTConfig())
	// A trapping authenticator first in order: it costs its call, never the request.
	trapSrc, err := os.ReadFile(filepath.Join(wasmtest.ModuleRoot(t), "examples", "plugins", "wat", "trap.wat"))
	if err != nil {
		t.Fatal(err)
	}
	good := `(func (export "authenticate") (param i32 i32) (result i64) (call $pack (i32.const 64) (i32.const 23)))`
	if !strings.Contains(string(trapSrc), good) {
		t.Fatal("trap.wat changed; update this test")
	}
	trapping := strings.Replace(string(trapSrc), good, `(func (export "authenticate") (param i32 i32) (result i64) (unreachable))`, 1)
	installAuthenticator(t, e.inst, "trapper", pushModule(t, e.inst, wasmtest.WATSource(t, trapping)), "", -10)

	tokenMod := pushModule(t, e.inst, wasmtest.Go(t, "./examples/plugins/go/token-authenticator"))
	installAuthenticator(t, e.inst, "tokens", tokenMod, `{"tokens":{"wasm-secret":{"username":"wasm-user","uid":"w1","groups":["wasm-group"]}}}`, 0)
	if _, err := e.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A tenant may not install an authenticator: who a request is from is cluster-wide.
	tenant := &wasmv1.WasmPlugin{TypeMeta: metav1.TypeMeta{APIVersion: wasmv1.SchemeGroupVersion.String(), Kind: "WasmPlugin"},
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-tokens", Namespace: "tenant"},
		Spec: wasmv1.WasmPluginSpec{Module: wasmv1.ModuleSource{Digest: "sha256:" + tokenMod}, SHA256: tokenMod, Hooks: []wasmv1.Hook{wasmv1.HookAuthenticate},
			Config: &runtime.RawExtension{Raw: []byte(`{"tokens":{"tenant-secret":{"username":"system:admin","groups":["system:masters"]}}}`)}}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tenant)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dyn.Resource(wasmv1.SchemeGroupVersion.WithResource("wasmplugins")).Namespace("tenant").Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "ClusterWasmPlugin") {
		t.Fatalf("namespaced authenticator: want 422 pointing at ClusterWasmPlugin, got %v", err)
	}

	mustBeUser(t, e.tokenConfig("wasm-secret"), "wasm-user", "wasm-group")
	// Built-in authenticators still work with the trapping plugin installed.
	mustBeUser(t, e.tokenConfig("alice-token"), "alice")
	// The example refuses unknown bearer tokens ("mine, and invalid"): 401.
	mustBeUnauthorized(t, e.tokenConfig("wrong-secret"))
	mustBeUnauthorized(t, e.tokenConfig("tenant-secret"))
}

// pushModule uploads a module and returns its hex digest.
func pushModule(tb testing.TB, inst *server.Instance, wasm []byte) string {
	tb.Helper()
	hc, err := rest.HTTPClientFor(inst.RESTConfig())
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := hc.Post(inst.URL()+"/apis/wasmplane.io/v1alpha1/wasmmodules", "application/wasm", bytes.NewReader(wasm))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var m wasmv1.WasmModule
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode >= 300 {
		tb.Fatalf("push: %d %v", resp.StatusCode, err)
	}
	return strings.TrimPrefix(m.Spec.Digest, "sha256:")
}

// installAuthenticator creates a ClusterWasmPlugin with the authenticate hook and waits
// until the server has loaded it.
func installAuthenticator(tb testing.TB, inst *server.Instance, name, digest, config string, order int32) {
	tb.Helper()
	spec := wasmv1.WasmPluginSpec{Module: wasmv1.ModuleSource{Digest: "sha256:" + digest}, SHA256: digest,
		Hooks: []wasmv1.Hook{wasmv1.HookAuthenticate}, Order: order}
	if config != "" {
		spec.Config = &runtime.RawExtension{Raw: []byte(config)}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&wasmv1.ClusterWasmPlugin{
		TypeMeta: metav1.TypeMeta{APIVersion: wasmv1.SchemeGroupVersion.String(), Kind: "ClusterWasmPlugin"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	if err != nil {
		tb.Fatal(err)
	}
	ri := dynamic.NewForConfigOrDie(inst.RESTConfig()).Resource(wasmv1.SchemeGroupVersion.WithResource("clusterwasmplugins"))
	if _, err := ri.Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	waitfor.Condition(tb, time.Minute, "plugin "+name+" to load", func(ctx context.Context) (bool, error) {
		cur, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(cur.Object, "status", "phase")
		if phase == "Failed" {
			msg, _, _ := unstructured.NestedString(cur.Object, "status", "message")
			return false, fmt.Errorf("plugin failed: %s", msg)
		}
		return phase == "Loaded", nil
	})
}
