// Package webhookserver is an admission webhook for tests: HTTPS on 127.0.0.1 with a
// certificate from its own self-signed CA (the caBundle a configuration names), which
// answers AdmissionReview v1 and v1beta1 with what the test's function decides and
// counts the calls it got.
package webhookserver

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/util/cert"
)

// Decide answers one admission request; returning nil allows it.
type Decide func(r *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// Server is a running webhook.
type Server struct {
	// URL is the base URL (https://127.0.0.1:PORT); a configuration adds a path.
	URL string
	// CABundle is the PEM of the CA that signed the server's certificate.
	CABundle []byte
	calls    atomic.Int64
	version  atomic.Value // string: the AdmissionReview version of the last call
	srv      *httptest.Server
}

// Start serves decide until the test ends (or Stop).
func Start(t testing.TB, decide Decide) *Server {
	t.Helper()
	s, err := New(decide)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// New serves decide until Stop, for programs that are not tests (benchmarks).
func New(decide Decide) (*Server, error) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	// The PEM is the serving certificate, then the CA that signed it.
	var ca []byte
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		ca = pem.EncodeToMemory(b)
	}
	s := &Server{CABundle: ca}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		s.serve(w, r, decide)
	}))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	s.srv.StartTLS()
	s.URL = s.srv.URL
	return s, nil
}

// Calls is how many requests the server got.
func (s *Server) Calls() int64 { return s.calls.Load() }

// LastVersion is the AdmissionReview apiVersion of the last call ("" before any).
func (s *Server) LastVersion() string {
	v, _ := s.version.Load().(string)
	return v
}

// Stop closes the server: calls fail to connect from then on.
func (s *Server) Stop() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// ClientConfig points a webhook at path on this server.
func (s *Server) ClientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	u := s.URL + path
	return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: s.CABundle}
}

// review is an AdmissionReview of either version: v1 and v1beta1 have the same shape on
// the wire, and the answer names the version the request came in.
type review struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Request    *admissionv1.AdmissionRequest  `json:"request,omitempty"`
	Response   *admissionv1.AdmissionResponse `json:"response,omitempty"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, decide Decide) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in review
	if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	s.version.Store(in.APIVersion)
	resp := decide(r, in.Request)
	if resp == nil {
		resp = &admissionv1.AdmissionResponse{Allowed: true}
	}
	resp.UID = in.Request.UID
	out := review{APIVersion: in.APIVersion, Kind: "AdmissionReview", Response: resp}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(out); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf.Bytes())
}
