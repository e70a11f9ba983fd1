package pki

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

func TestCAAndLeaves(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	serving := Leaf{CommonName: "api", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: ServerAuth}
	if _, err := ca.Ensure("apiserver", serving); err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cert.Equal(ca.Cert) {
		t.Fatal("a second start created a new CA instead of reusing it")
	}
	tests := []struct {
		name    string
		leaf    Leaf
		reissue bool
	}{
		{"same leaf is reused", serving, false},
		{"a new SAN reissues", Leaf{CommonName: "api", DNSNames: []string{"localhost", "extra.example"}, IPs: serving.IPs, Usage: ServerAuth}, true},
		{"a new IP reissues", Leaf{CommonName: "api", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("10.0.0.1")}, Usage: ServerAuth}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Start from the original certificate each time.
			if _, err := again.Ensure("apiserver", serving); err != nil {
				t.Fatal(err)
			}
			base, _ := os.ReadFile(filepath.Join(dir, "apiserver.crt"))
			p, err := again.Ensure("apiserver", tc.leaf)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(p.CertPEM) != string(base); got != tc.reissue {
				t.Fatalf("reissued = %v, want %v", got, tc.reissue)
			}
		})
	}
	for _, f := range []string{"ca.crt", "ca.key", "apiserver.crt", "apiserver.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
}

func TestIssuedClientCertificateVerifies(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.Issue(Leaf{CommonName: "alice", Organizations: []string{"dev"}, Usage: ClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	c := certs[0]
	if c.Subject.CommonName != "alice" || len(c.Subject.Organization) != 1 || c.Subject.Organization[0] != "dev" {
		t.Fatalf("subject %v", c.Subject)
	}
	client := x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := c.Verify(client); err != nil {
		t.Fatalf("client cert does not verify against its CA: %v", err)
	}
	client.Roots = other.Pool()
	if _, err := c.Verify(client); err == nil {
		t.Fatal("client cert verified against another CA")
	}
	server := x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := c.Verify(server); err == nil {
		t.Fatal("a client certificate must not serve")
	}
}
