package apiserver

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// BenchmarkAuthenticatedGET measures one GET of a ConfigMap through each credential
// kind, next to the unauthenticated insecure port (plain HTTP/1.1, no authentication, no
// authorization) as the baseline. Connections are kept alive, so TLS handshakes are not
// counted; TLS record encryption and HTTP/2 framing are. The admin certificate is
// authorized as system:masters; the others through RBAC ("view" bound in default). The
// WASM modes put the example token authenticator first in the chain. Reports p50/p99.
//
//	go test -run '^$' -bench AuthenticatedGET ./tests/apiserver
func BenchmarkAuthenticatedGET(b *testing.B) {
	dir := b.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("bench-token,bench,1\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	inst, err := server.Start(context.Background(), server.Config{DataDir: filepath.Join(dir, "data"), Port: 0, InsecurePort: -1,
		Logger: testserver.Logger(), TokenAuthFile: tokens, DisableScheduler: true,
		AuthenticationOrder: []string{server.AuthWASM, server.AuthX509, server.AuthTokenFile, server.AuthServiceAccount}})
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Close()
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(inst.RESTConfig())
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// The token-file user and the ServiceAccount go through RBAC (a RoleBinding to "view"),
	// the admin certificate through system:masters.
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-view"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bench"},
			{Kind: rbacv1.ServiceAccountKind, Name: "bench", Namespace: "default"}}}
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "bench", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	tls := func(token string) *rest.Config {
		return &rest.Config{Host: inst.URL(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: inst.CA()}}
	}
	modes := []struct {
		name string
		cfg  *rest.Config
		// wasm installs the example token authenticator first in the chain.
		wasm bool
	}{
		{"insecure-baseline", &rest.Config{Host: inst.InsecureURL()}, false},
		{"x509", inst.RESTConfig(), false},
		{"token-file", tls("bench-token"), false},
		{"serviceaccount", tls(tr.Status.Token), false},
		{"token-file-behind-wasm", tls("bench-token"), true},
		{"wasm", tls("wasm-token"), true},
	}
	path := "/api/v1/namespaces/default/configmaps/bench"
	installed := false
	for _, m := range modes {
		if m.wasm && !installed {
			// Installed once, after the built-in modes, so those never pass the guest.
			installed = true
			installAuthenticator(b, inst, "bench-tokens", pushModule(b, inst, wasmtest.Go(b, "./examples/plugins/go/token-authenticator")),
				`{"tokens":{"wasm-token":{"username":"bench","groups":["wasm"]}}}`, 0)
		}
		hc, err := rest.HTTPClientFor(m.cfg)
		if err != nil {
			b.Fatal(err)
		}
		// Wait until RBAC (aggregated "view") lets this identity in.
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			resp, err := hc.Get(m.cfg.Host + path)
			if err != nil {
				return false, err
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		}); err != nil {
			b.Fatalf("%s never got in: %v", m.name, err)
		}
		b.Run(m.name, func(b *testing.B) {
			get := func() {
				resp, err := hc.Get(m.cfg.Host + path)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET as %s: %d", m.name, resp.StatusCode)
				}
			}
			for range 50 { // warm the connection and caches
				get()
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				get()
				lat = append(lat, time.Since(t0))
			}
			testserver.ReportLatencies(b, lat)
		})
	}
}
