// Package aggregated is an aggregated API server for tests: HTTPS on 127.0.0.1 with a
// certificate for its Service's DNS name from its own CA, which trusts the front-proxy
// client certificate and header names the cluster publishes in
// kube-system/extension-apiserver-authentication (as servers built on k8s.io/apiserver
// do), and serves one namespaced, read-only resource: wardle.example.com/v1alpha1
// flunders, whose objects name the user the request came from.
package aggregated

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/core/pki"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Group and Version are what the server serves.
const (
	Group   = "wardle.example.com"
	Version = "v1alpha1"
)

// Request is what the server saw of one request.
type Request struct {
	Path, User string
	Groups     []string
	// Authorization is true when the request carried an Authorization header (it must
	// not: the client's credentials were for the main server).
	Authorization bool
}

// Server is a running aggregated API server.
type Server struct {
	// Port is where it listens on 127.0.0.1.
	Port int32
	// CABundle is the PEM of the CA of its serving certificate.
	CABundle []byte
	srv      *httptest.Server
	mu       sync.Mutex
	seen     []Request
}

// trust is what the cluster says about the front proxy.
type trust struct {
	pool                          *x509.CertPool
	allowed, users, groups, extra []string
}

func readTrust(ctx context.Context, cs kubernetes.Interface) (*trust, error) {
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the authentication ConfigMap: %w", err)
	}
	tr := &trust{pool: x509.NewCertPool()}
	if !tr.pool.AppendCertsFromPEM([]byte(cm.Data["requestheader-client-ca-file"])) {
		return nil, fmt.Errorf("requestheader-client-ca-file holds no certificate")
	}
	for key, into := range map[string]*[]string{"requestheader-allowed-names": &tr.allowed, "requestheader-username-headers": &tr.users,
		"requestheader-group-headers": &tr.groups, "requestheader-extra-headers-prefix": &tr.extra} {
		if err := json.Unmarshal([]byte(cm.Data[key]), into); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	return tr, nil
}

// Start serves until the test ends; service and namespace name the Service the
// APIService will point at (its DNS name is in the serving certificate).
func Start(t testing.TB, cs kubernetes.Interface, namespace, service string) *Server {
	t.Helper()
	tr, err := readTrust(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: service, DNSNames: []string{service + "." + namespace + ".svc"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: pki.ServerAuth})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{CABundle: ca.CertPEM}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, tr) }))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: tr.pool,
		MinVersion: tls.VersionTLS12}
	s.srv.StartTLS()
	t.Cleanup(s.Stop)
	s.Port = int32(s.srv.Listener.Addr().(*net.TCPAddr).Port)
	return s
}

// Stop stops serving.
func (s *Server) Stop() { s.srv.Close() }

// Seen returns the requests served so far.
func (s *Server) Seen() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func status(code int, reason metav1.StatusReason, msg string) *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: int32(code), Reason: reason, Message: msg}
}

// serve authenticates the front proxy as k8s.io/apiserver's request-header authenticator
// does (a verified certificate with an allowed name), then answers.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, tr *trust) {
	if len(r.TLS.VerifiedChains) == 0 || !slices.Contains(tr.allowed, r.TLS.VerifiedChains[0][0].Subject.CommonName) {
		writeJSON(w, http.StatusUnauthorized, status(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "no front-proxy client certificate"))
		return
	}
	req := Request{Path: r.URL.Path, Authorization: r.Header.Get("Authorization") != ""}
	for _, h := range tr.users {
		if v := r.Header.Get(h); v != "" {
			req.User = v
			break
		}
	}
	for _, h := range tr.groups {
		req.Groups = append(req.Groups, r.Header.Values(h)...)
	}
	s.mu.Lock()
	s.seen = append(s.seen, req)
	s.mu.Unlock()
	if req.User == "" {
		writeJSON(w, http.StatusUnauthorized, status(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "no user header"))
		return
	}
	base := "/apis/" + Group + "/" + Version
	rest, ok := strings.CutPrefix(r.URL.Path, base)
	switch {
	case !ok:
		writeJSON(w, http.StatusNotFound, status(http.StatusNotFound, metav1.StatusReasonNotFound, "not found"))
	case r.Method != http.MethodGet:
		writeJSON(w, http.StatusMethodNotAllowed, status(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "read-only"))
	case rest == "" || rest == "/":
		writeJSON(w, http.StatusOK, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: Group + "/" + Version, APIResources: []metav1.APIResource{{Name: "flunders", SingularName: "flunder",
				Namespaced: true, Kind: "Flunder", Verbs: metav1.Verbs{"get", "list"}}}})
	default:
		parts := strings.Split(strings.Trim(rest, "/"), "/")
		if len(parts) < 3 || parts[0] != "namespaces" || parts[2] != "flunders" || len(parts) > 4 {
			writeJSON(w, http.StatusNotFound, status(http.StatusNotFound, metav1.StatusReasonNotFound, "not found"))
			return
		}
		item := flunder(parts[1], "seen-by-"+sanitize(req.User), req)
		if len(parts) == 4 {
			if parts[3] != item["metadata"].(map[string]any)["name"] {
				writeJSON(w, http.StatusNotFound, status(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("flunders %q not found", parts[3])))
				return
			}
			writeJSON(w, http.StatusOK, item)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"apiVersion": Group + "/" + Version, "kind": "FlunderList",
			"metadata": map[string]any{"resourceVersion": "1"}, "items": []any{item}})
	}
}

// sanitize makes a user name usable in an object name.
func sanitize(user string) string {
	return strings.NewReplacer(":", "-", "@", "-", ".", "-").Replace(user)
}

func flunder(ns, name string, req Request) map[string]any {
	return map[string]any{"apiVersion": Group + "/" + Version, "kind": "Flunder",
		"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
		"spec":     map[string]any{"user": req.User, "groups": req.Groups}}
}
