package certificates

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/pki"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

func csrPEM(t *testing.T, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func nodeCSR(t *testing.T, cn string, orgs []string, user string, groups []string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		Request:    csrPEM(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}),
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
		Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		Username:   user, Groups: groups,
	}}
}

// rbacLike answers as the bootstrap policy does: bootstrappers may create nodeclient,
// nodes selfnodeclient.
func rbacLike(_ context.Context, csr *certificatesv1.CertificateSigningRequest, sub string) (bool, error) {
	for _, g := range csr.Spec.Groups {
		if (g == "system:bootstrappers" && sub == "nodeclient") || (g == NodesGroup && sub == "selfnodeclient") {
			return true, nil
		}
	}
	return false, nil
}

func TestDecide(t *testing.T) {
	boot := []string{"system:bootstrappers", "system:authenticated"}
	nodes := []string{NodesGroup, "system:authenticated"}
	cases := []struct {
		name string
		csr  func() *certificatesv1.CertificateSigningRequest
		want Decision
	}{
		{"bootstrap token, node subject", func() *certificatesv1.CertificateSigningRequest {
			return nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
		}, Approve},
		{"node renewing itself", func() *certificatesv1.CertificateSigningRequest {
			return nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:node:n1", nodes)
		}, Approve},
		{"node asking for another node", func() *certificatesv1.CertificateSigningRequest {
			return nodeCSR(t, "system:node:n2", []string{NodesGroup}, "system:node:n1", nodes)
		}, Pending},
		{"plain user", func() *certificatesv1.CertificateSigningRequest {
			return nodeCSR(t, "system:node:n1", []string{NodesGroup}, "alice", []string{"system:authenticated"})
		}, Pending},
		{"system:masters organization", func() *certificatesv1.CertificateSigningRequest {
			return nodeCSR(t, "system:node:n1", []string{NodesGroup, "system:masters"}, "system:bootstrap:abcdef", boot)
		}, Pending},
		{"only system:masters organization", func() *certificatesv1.CertificateSigningRequest {
			return nodeCSR(t, "system:node:n1", []string{"system:masters"}, "system:bootstrap:abcdef", boot)
		}, Pending},
		{"non-node common name", func() *certificatesv1.CertificateSigningRequest {
			return nodeCSR(t, "admin", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
		}, Pending},
		{"empty node name", func() *certificatesv1.CertificateSigningRequest {
			return nodeCSR(t, "system:node:", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
		}, Pending},
		{"server auth usage", func() *certificatesv1.CertificateSigningRequest {
			c := nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
			return c
		}, Pending},
		{"no client auth usage", func() *certificatesv1.CertificateSigningRequest {
			c := nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
			return c
		}, Pending},
		{"SANs", func() *certificatesv1.CertificateSigningRequest {
			c := nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
			c.Spec.Request = csrPEM(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1", Organization: []string{NodesGroup}},
				IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}})
			return c
		}, Pending},
		{"other signer", func() *certificatesv1.CertificateSigningRequest {
			c := nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientSignerName
			return c
		}, Skip},
		{"already denied", func() *certificatesv1.CertificateSigningRequest {
			c := nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue}}
			return c
		}, Skip},
		{"already approved", func() *certificatesv1.CertificateSigningRequest {
			c := nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
			return c
		}, Skip},
		{"garbage request", func() *certificatesv1.CertificateSigningRequest {
			c := nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
			c.Spec.Request = []byte("not pem")
			return c
		}, Skip},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := Decide(context.Background(), tc.csr(), rbacLike)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Decide = %v (%s), want %v", got, reason, tc.want)
			}
		})
	}
	t.Run("authorizer error", func(t *testing.T) {
		c := nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:bootstrap:abcdef", boot)
		_, _, err := Decide(context.Background(), c, func(context.Context, *certificatesv1.CertificateSigningRequest, string) (bool, error) {
			return false, errors.New("boom")
		})
		if err == nil {
			t.Fatal("want the authorizer's error")
		}
	})
}

func TestSignerSign(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &Signer{ca: ca, duration: DefaultSigningDuration}
	c := nodeCSR(t, "system:node:n1", []string{NodesGroup}, "system:bootstrap:abcdef", nil)
	ten := int32(3600)
	c.Spec.ExpirationSeconds = &ten
	certPEM, failure, err := s.Sign(c)
	if err != nil || failure != "" {
		t.Fatalf("Sign failed: %s %v", failure, err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:n1" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != NodesGroup {
		t.Fatalf("subject %v", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("not a client certificate of the CA: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("the certificate also serves")
	}
	if got := time.Until(cert.NotAfter); got > time.Hour || got < 50*time.Minute {
		t.Fatalf("validity %v, want the requested hour", got)
	}
	if cert.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Fatalf("key usage %v", cert.KeyUsage)
	}
	// The signer enforces its own rules even on an approved request.
	bad := nodeCSR(t, "system:node:n1", []string{"system:masters"}, "system:bootstrap:abcdef", nil)
	if _, failure, _ := s.Sign(bad); failure == "" {
		t.Fatal("signed a system:masters certificate")
	}
}
