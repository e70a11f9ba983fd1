package wasm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// jwtVerifyCases are io.jwt.verify_* calls on tokens signed here, for
// TestRegoHostBuiltinsMatchOPA: keys as PEM public keys, a certificate, JWKs and JWK sets
// (by kid, by alg), wrong keys and tampered tokens.
func jwtVerifyCases(t *testing.T) []builtinCase {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	sign := func(header map[string]any, signer func([]byte) []byte) string {
		h, _ := json.Marshal(header)
		input := b64(h) + "." + b64([]byte(`{"sub":"web","aud":"wasmplane"}`))
		return input + "." + b64(signer([]byte(input)))
	}
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	pubPEM := func(key any) string {
		der, err := x509.MarshalPKIXPublicKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pemOf("PUBLIC KEY", der)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherRSA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ec256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	edPub, edKey, _ := ed25519.GenerateKey(rand.Reader)

	rs := func(h crypto.Hash, alg string, header map[string]any) string {
		if header == nil {
			header = map[string]any{}
		}
		header["alg"] = alg
		return sign(header, func(in []byte) []byte {
			d := h.New()
			d.Write(in)
			sig, err := rsa.SignPKCS1v15(rand.Reader, rsaKey, h, d.Sum(nil))
			if err != nil {
				t.Fatal(err)
			}
			return sig
		})
	}
	ps := sign(map[string]any{"alg": "PS384"}, func(in []byte) []byte {
		d := sha512.Sum384(in)
		sig, err := rsa.SignPSS(rand.Reader, rsaKey, crypto.SHA384, d[:], nil)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	})
	es := func(key *ecdsa.PrivateKey, alg string, digest func([]byte) []byte) string {
		return sign(map[string]any{"alg": alg}, func(in []byte) []byte {
			r, s, err := ecdsa.Sign(rand.Reader, key, digest(in))
			if err != nil {
				t.Fatal(err)
			}
			n := (key.Curve.Params().BitSize + 7) / 8
			return append(r.FillBytes(make([]byte, n)), s.FillBytes(make([]byte, n))...)
		})
	}
	es256 := es(ec256, "ES256", func(in []byte) []byte { d := sha256.Sum256(in); return d[:] })
	es384 := es(ec384, "ES384", func(in []byte) []byte { d := sha512.Sum384(in); return d[:] })
	eddsa := sign(map[string]any{"alg": "EdDSA"}, func(in []byte) []byte { return ed25519.Sign(edKey, in) })

	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "jwt"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(0, 0).AddDate(200, 0, 0)}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaJWK := func(key *rsa.PublicKey, alg, kid string) map[string]any {
		j := map[string]any{"kty": "RSA", "n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}
		if alg != "" {
			j["alg"] = alg
		}
		if kid != "" {
			j["kid"] = kid
		}
		return j
	}
	js := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	ecJWK := js(map[string]any{"kty": "EC", "crv": "P-256", "x": b64(ec256.X.FillBytes(make([]byte, 32))), "y": b64(ec256.Y.FillBytes(make([]byte, 32)))})
	edJWK := js(map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(edPub)})
	rs256 := rs(crypto.SHA256, "RS256", nil)
	rsKid := rs(crypto.SHA256, "RS256", map[string]any{"kid": "b"})
	tampered := rs256[:len(rs256)-4] + "AAAA"
	hs := func(claims string, header map[string]any) string {
		if header == nil {
			header = map[string]any{"alg": "HS256"}
		}
		h, _ := json.Marshal(header)
		input := b64(h) + "." + b64([]byte(claims))
		mac := hmac.New(sha256.New, []byte("secret"))
		mac.Write([]byte(input))
		return input + "." + b64(mac.Sum(nil))
	}
	timed := hs(`{"iss":"ca","aud":["x","wasmplane"],"nbf":1000,"exp":2000.5}`, nil)
	at := func(sec float64) map[string]any { return map[string]any{"secret": "secret", "time": sec * 1e9} }
	return []builtinCase{
		{"rs256-pem", "io.jwt.verify_rs256", []any{rs256, pubPEM(&rsaKey.PublicKey)}},
		{"rs256-cert", "io.jwt.verify_rs256", []any{rs256, pemOf("CERTIFICATE", certDER)}},
		{"rs256-wrong-key", "io.jwt.verify_rs256", []any{rs256, pubPEM(&otherRSA.PublicKey)}},
		{"rs256-tampered", "io.jwt.verify_rs256", []any{tampered, pubPEM(&rsaKey.PublicKey)}},
		{"rs256-jwk", "io.jwt.verify_rs256", []any{rs256, js(rsaJWK(&rsaKey.PublicKey, "", ""))}},
		{"rs256-jwks-second", "io.jwt.verify_rs256", []any{rs256, js(map[string]any{"keys": []any{rsaJWK(&otherRSA.PublicKey, "", ""), rsaJWK(&rsaKey.PublicKey, "RS256", "")}})}},
		{"rs256-jwks-alg-mismatch", "io.jwt.verify_rs256", []any{rs256, js(map[string]any{"keys": []any{rsaJWK(&rsaKey.PublicKey, "RS512", "")}})}},
		{"rs256-kid", "io.jwt.verify_rs256", []any{rsKid, js(map[string]any{"keys": []any{rsaJWK(&rsaKey.PublicKey, "", "a"), rsaJWK(&rsaKey.PublicKey, "", "b")}})}},
		{"rs256-kid-wrong-key", "io.jwt.verify_rs256", []any{rsKid, js(map[string]any{"keys": []any{rsaJWK(&otherRSA.PublicKey, "", "b"), rsaJWK(&rsaKey.PublicKey, "", "a")}})}},
		{"rs512", "io.jwt.verify_rs512", []any{rs(crypto.SHA512, "RS512", nil), pubPEM(&rsaKey.PublicKey)}},
		{"rs512-as-rs256", "io.jwt.verify_rs256", []any{rs(crypto.SHA512, "RS512", nil), pubPEM(&rsaKey.PublicKey)}},
		{"ps384", "io.jwt.verify_ps384", []any{ps, pubPEM(&rsaKey.PublicKey)}},
		{"ps384-wrong-key", "io.jwt.verify_ps384", []any{ps, pubPEM(&otherRSA.PublicKey)}},
		{"es256-pem", "io.jwt.verify_es256", []any{es256, pubPEM(&ec256.PublicKey)}},
		{"es256-jwk", "io.jwt.verify_es256", []any{es256, ecJWK}},
		{"es256-rsa-key", "io.jwt.verify_es256", []any{es256, pubPEM(&rsaKey.PublicKey)}},
		{"es384", "io.jwt.verify_es384", []any{es384, pubPEM(&ec384.PublicKey)}},
		{"eddsa-pem", "io.jwt.verify_eddsa", []any{eddsa, pubPEM(edPub)}},
		{"eddsa-jwk", "io.jwt.verify_eddsa", []any{eddsa, edJWK}},
		{"bad-key", "io.jwt.verify_rs256", []any{rs256, "not a key"}},
		{"dv-cert", "io.jwt.decode_verify", []any{rs256, map[string]any{"cert": pubPEM(&rsaKey.PublicKey), "aud": "wasmplane", "time": 1e18}}},
		{"dv-cert-wrong", "io.jwt.decode_verify", []any{rs256, map[string]any{"cert": pubPEM(&otherRSA.PublicKey), "aud": "wasmplane", "time": 1e18}}},
		{"dv-jwks-kid", "io.jwt.decode_verify", []any{rsKid, map[string]any{"cert": js(map[string]any{"keys": []any{rsaJWK(&rsaKey.PublicKey, "", "b")}}), "aud": "wasmplane", "time": 1e18}}},
		{"dv-alg", "io.jwt.decode_verify", []any{rs256, map[string]any{"cert": pubPEM(&rsaKey.PublicKey), "alg": "RS256", "aud": "wasmplane", "time": 1e18}}},
		{"dv-alg-mismatch", "io.jwt.decode_verify", []any{rs256, map[string]any{"cert": pubPEM(&rsaKey.PublicKey), "alg": "RS512", "aud": "wasmplane", "time": 1e18}}},
		{"dv-es256", "io.jwt.decode_verify", []any{es256, map[string]any{"cert": ecJWK, "aud": "wasmplane", "time": 1e18}}},
		{"dv-eddsa", "io.jwt.decode_verify", []any{eddsa, map[string]any{"cert": edJWK, "aud": "wasmplane", "time": 1e18}}},
		// The token has an audience: without one in the constraints it is not verified.
		{"dv-cert-no-aud", "io.jwt.decode_verify", []any{rs256, map[string]any{"cert": pubPEM(&rsaKey.PublicKey), "time": 1e18}}},
		{"dv-secret-aud", "io.jwt.decode_verify", []any{rs256, map[string]any{"secret": "secret", "aud": "wasmplane", "time": 1e18}}},
		{"dv-hs-in-time", "io.jwt.decode_verify", []any{timed, map[string]any{"secret": "secret", "iss": "ca", "aud": "wasmplane", "time": 1500e9}}},
		{"dv-hs-wrong-secret", "io.jwt.decode_verify", []any{timed, map[string]any{"secret": "guess", "time": 1500e9}}},
		{"dv-hs-wrong-iss", "io.jwt.decode_verify", []any{timed, map[string]any{"secret": "secret", "iss": "other", "aud": "wasmplane", "time": 1500e9}}},
		{"dv-hs-no-aud", "io.jwt.decode_verify", []any{timed, map[string]any{"secret": "secret", "time": 1500e9}}},
		{"dv-hs-wrong-aud", "io.jwt.decode_verify", []any{timed, map[string]any{"secret": "secret", "aud": "y", "time": 1500e9}}},
		{"dv-hs-before-nbf", "io.jwt.decode_verify", []any{timed, map[string]any{"secret": "secret", "aud": "x", "time": 999e9}}},
		{"dv-hs-at-nbf", "io.jwt.decode_verify", []any{timed, at(1000)}},
		{"dv-hs-at-exp", "io.jwt.decode_verify", []any{timed, map[string]any{"secret": "secret", "aud": "x", "time": 2000.5e9}}},
		{"dv-hs-just-before-exp", "io.jwt.decode_verify", []any{timed, map[string]any{"secret": "secret", "aud": "x", "time": 2000.4e9}}},
		{"dv-aud-missing-claim", "io.jwt.decode_verify", []any{hs(`{"sub":"a"}`, nil), map[string]any{"secret": "secret", "aud": "x", "time": 1e18}}},
		{"dv-no-aud-claim", "io.jwt.decode_verify", []any{hs(`{"sub":"a"}`, nil), at(1)}},
		{"dv-exp-string", "io.jwt.decode_verify", []any{hs(`{"exp":"soon"}`, nil), at(1)}},
		{"dv-no-alg", "io.jwt.decode_verify", []any{hs(`{"sub":"a"}`, map[string]any{"typ": "JWT"}), at(1)}},
		{"dv-crit-unknown", "io.jwt.decode_verify", []any{hs(`{"sub":"a"}`, map[string]any{"alg": "HS256", "crit": []any{"b64"}, "b64": false}), at(1)}},
		{"dv-nested", "io.jwt.decode_verify", []any{hs(hs(`{"sub":"inner"}`, nil), map[string]any{"alg": "HS256", "cty": "JWT"}), at(1)}},
		{"dv-no-key", "io.jwt.decode_verify", []any{rs256, map[string]any{"time": 1}}},
		{"dv-two-keys", "io.jwt.decode_verify", []any{rs256, map[string]any{"secret": "s", "cert": pubPEM(&rsaKey.PublicKey)}}},
		{"dv-unknown-constraint", "io.jwt.decode_verify", []any{rs256, map[string]any{"secret": "s", "colour": "red"}}},
	}
}

// TestJWTVerifyAnswers checks the answers themselves (TestRegoHostBuiltinsMatchOPA only
// compares them with OPA's): the valid signatures verify, the others do not, a key that
// cannot be read is an error.
func TestJWTVerifyAnswers(t *testing.T) {
	want := map[string]any{"rs256-pem": true, "rs256-cert": true, "rs256-wrong-key": false, "rs256-tampered": false,
		"rs256-jwk": true, "rs256-jwks-second": true, "rs256-jwks-alg-mismatch": false, "rs256-kid": true,
		"rs256-kid-wrong-key": false, "rs512": true, "rs512-as-rs256": false, "ps384": true, "ps384-wrong-key": false,
		"es256-pem": true, "es256-jwk": true, "es256-rsa-key": false, "es384": true, "eddsa-pem": true,
		"eddsa-jwk": true, "bad-key": nil,
		// io.jwt.decode_verify: whether the answer's first element is true.
		"dv-cert": true, "dv-cert-wrong": false, "dv-jwks-kid": true, "dv-alg": true, "dv-alg-mismatch": false,
		"dv-es256": true, "dv-eddsa": true, "dv-secret-aud": false, "dv-cert-no-aud": false, "dv-hs-in-time": true, "dv-hs-wrong-secret": false,
		"dv-hs-wrong-iss": false, "dv-hs-no-aud": false, "dv-hs-wrong-aud": false, "dv-hs-before-nbf": false,
		"dv-hs-at-nbf": false, "dv-hs-at-exp": false, "dv-hs-just-before-exp": true, "dv-aud-missing-claim": false,
		"dv-no-aud-claim": true, "dv-exp-string": nil, "dv-no-alg": false, "dv-crit-unknown": false, "dv-nested": true,
		"dv-no-key": nil, "dv-two-keys": nil, "dv-unknown-constraint": nil}
	for _, c := range jwtVerifyCases(t) {
		got, err := jwtVerifyBuiltins[c.fn](&opaEval{}, jsonArgs(t, c.args))
		if err != nil {
			got = nil
		}
		if answer, ok := got.([]any); ok {
			got = answer[0]
		}
		if got != want[c.name] {
			t.Errorf("%s: %v (%v), want %v", c.name, got, err, want[c.name])
		}
	}
}
