package authn

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/wasmplane/wasmplane/core/pki"
)

// BenchmarkX509Verified is a request on a connection whose certificate was verified.
func BenchmarkX509Verified(b *testing.B) {
	ca, err := pki.LoadOrCreateCA(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	cert := clientCert(b, ca, pki.Leaf{CommonName: "alice", Organizations: []string{"dev"}, Usage: pki.ClientAuth})
	a := &X509{Roots: ca.Pool()}
	req := httptest.NewRequest(http.MethodGet, "/api", nil)
	req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok, err := a.AuthenticateRequest(req); !ok || err != nil {
			b.Fatal(err)
		}
	}
}
