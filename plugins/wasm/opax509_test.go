package wasm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// x509Cases are crypto.x509.* calls on a chain and a request made here, for
// TestRegoHostBuiltinsMatchOPA.
func x509Cases(t *testing.T) []builtinCase {
	t.Helper()
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	issue := func(serial int64, tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = start, start.AddDate(100, 0, 0)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return cert, key, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	ca := &x509.Certificate{Subject: pkix.Name{CommonName: "root"}, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	root, rootKey, rootPEM := issue(1, ca, nil, nil)
	mid, midKey, midPEM := issue(2, &x509.Certificate{Subject: pkix.Name{CommonName: "intermediate"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, root, rootKey)
	_, _, leafPEM := issue(3, &x509.Certificate{Subject: pkix.Name{CommonName: "web"}, DNSNames: []string{"web.example.com"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, mid, midKey)
	_, _, otherPEM := issue(4, &x509.Certificate{Subject: pkix.Name{CommonName: "other root"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	chain := rootPEM + midPEM + leafPEM

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "csr"},
		DNSNames: []string{"csr.example.com"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csrPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csrDER}))
	at := func(y int) int64 { return time.Date(y, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano() }
	return []builtinCase{
		{"verify-chain", "crypto.x509.parse_and_verify_certificates", []any{chain}},
		{"verify-chain-b64", "crypto.x509.parse_and_verify_certificates", []any{base64.StdEncoding.EncodeToString([]byte(chain))}},
		{"verify-no-intermediate", "crypto.x509.parse_and_verify_certificates", []any{rootPEM + leafPEM}},
		{"verify-other-root", "crypto.x509.parse_and_verify_certificates", []any{otherPEM + midPEM + leafPEM}},
		{"verify-one", "crypto.x509.parse_and_verify_certificates", []any{leafPEM}},
		{"verify-garbage", "crypto.x509.parse_and_verify_certificates", []any{"garbage"}},
		{"verify-opts-dns", "crypto.x509.parse_and_verify_certificates_with_options", []any{chain,
			map[string]any{"DNSName": "web.example.com", "CurrentTime": at(2030), "KeyUsages": []any{"KeyUsageServerAuth"}}}},
		{"verify-opts-wrong-dns", "crypto.x509.parse_and_verify_certificates_with_options", []any{chain, map[string]any{"DNSName": "x.example.com"}}},
		{"verify-opts-expired", "crypto.x509.parse_and_verify_certificates_with_options", []any{chain, map[string]any{"CurrentTime": at(2200)}}},
		{"verify-opts-usage", "crypto.x509.parse_and_verify_certificates_with_options", []any{chain, map[string]any{"KeyUsages": []any{"KeyUsageClientAuth"}}}},
		{"verify-opts-bad-usage", "crypto.x509.parse_and_verify_certificates_with_options", []any{chain, map[string]any{"KeyUsages": []any{"KeyUsageNope"}}}},
		{"verify-opts-bad-key", "crypto.x509.parse_and_verify_certificates_with_options", []any{chain, map[string]any{"Colour": 1}}},
		{"csr", "crypto.x509.parse_certificate_request", []any{csrPEM}},
		{"csr-b64-der", "crypto.x509.parse_certificate_request", []any{base64.StdEncoding.EncodeToString(csrDER)}},
		{"csr-cert", "crypto.x509.parse_certificate_request", []any{rootPEM}},
	}
}

// TestX509VerifyAnswers checks the chain verification's answers themselves.
func TestX509VerifyAnswers(t *testing.T) {
	want := map[string]any{"verify-chain": true, "verify-chain-b64": true, "verify-no-intermediate": false,
		"verify-other-root": false, "verify-one": false, "verify-garbage": false, "verify-opts-dns": true,
		"verify-opts-wrong-dns": false, "verify-opts-expired": false, "verify-opts-usage": false,
		"verify-opts-bad-usage": nil, "verify-opts-bad-key": nil}
	for _, c := range x509Cases(t) {
		w, ok := want[c.name]
		if !ok {
			continue
		}
		got, err := hostBuiltins[c.fn](&opaEval{}, jsonArgs(t, c.args))
		if answer, ok := got.([]any); ok && err == nil {
			got = answer[0]
		} else {
			got = nil
		}
		if got != w {
			t.Errorf("%s: %v (%v), want %v", c.name, got, err, w)
		}
	}
}

// jsonArgs are a builtin's operands as they cross from the module.
func jsonArgs(t *testing.T, args []any) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, a := range args {
		js, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, js)
	}
	return out
}
