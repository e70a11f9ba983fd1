package authtrust

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"
)

func caPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pem, _ := certutil.EncodeCertificates(c)
	return pem
}

func count(t *testing.T, bundle string) int {
	t.Helper()
	certs, err := certutil.ParseCertsPEM([]byte(bundle))
	if err != nil {
		t.Fatal(err)
	}
	return len(certs)
}

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	clientA, clientB, proxyA := caPEM(t, "client-a"), caPEM(t, "client-b"), caPEM(t, "proxy-a")
	for _, tc := range []struct {
		name               string
		cfg                Config
		wantClient, wantRH int
		wantAllowed        string
	}{
		{"first server creates it", Config{Client: cs, ClientCA: clientA, RequestHeaderCA: proxyA, RequestHeaderAllowedNames: []string{"front-proxy-client"}},
			1, 1, `["front-proxy-client"]`},
		{"the same server again changes nothing", Config{Client: cs, ClientCA: clientA, RequestHeaderCA: proxyA, RequestHeaderAllowedNames: []string{"front-proxy-client"}},
			1, 1, `["front-proxy-client"]`},
		{"a second server adds its client CA", Config{Client: cs, ClientCA: clientB, RequestHeaderCA: proxyA, RequestHeaderAllowedNames: []string{"front-proxy-client"}},
			2, 1, `["front-proxy-client"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Reconcile(ctx, tc.cfg); err != nil {
				t.Fatal(err)
			}
			cm, err := cs.CoreV1().ConfigMaps(Namespace).Get(ctx, Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n := count(t, cm.Data["client-ca-file"]); n != tc.wantClient {
				t.Errorf("client-ca-file holds %d certificates, want %d", n, tc.wantClient)
			}
			if n := count(t, cm.Data["requestheader-client-ca-file"]); n != tc.wantRH {
				t.Errorf("requestheader-client-ca-file holds %d certificates, want %d", n, tc.wantRH)
			}
			if got := cm.Data["requestheader-allowed-names"]; got != tc.wantAllowed {
				t.Errorf("allowed names %s, want %s", got, tc.wantAllowed)
			}
			if got := cm.Data["requestheader-username-headers"]; !strings.Contains(got, "X-Remote-User") {
				t.Errorf("username headers %s", got)
			}
		})
	}
	if err := Reconcile(ctx, Config{Client: cs, ClientCA: []byte("not PEM")}); err == nil {
		t.Error("a bad CA bundle was accepted")
	}
}
