package wasm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"strings"
)

// jwtAlgorithms are the algorithms a JWK's "alg" may name for the io.jwt.verify_*
// builtins to use it.
var jwtAlgorithms = map[string]bool{"RS256": true, "RS384": true, "RS512": true, "PS256": true, "PS384": true,
	"PS512": true, "ES256": true, "ES384": true, "ES512": true, "HS256": true, "HS384": true, "HS512": true, "EdDSA": true}

// jwtParts splits a compact JWS into its three sections.
func jwtParts(token string) ([3]string, error) {
	if !strings.Contains(token, ".") {
		return [3]string{}, errors.New("encoded JWT had no period separators")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return [3]string{}, fmt.Errorf("encoded JWT must have 3 sections, found %d", len(parts))
	}
	return [3]string(parts), nil
}

// jwtVerifyHMAC is io.jwt.verify_hs*(token, secret).
func jwtVerifyHMAC(h func() hash.Hash) opaBuiltinFunc {
	return func(_ *opaEval, args []json.RawMessage) (any, error) {
		token, secret, err := twoStrings(args)
		if err != nil {
			return nil, err
		}
		parts, err := jwtParts(token)
		if err != nil {
			return nil, err
		}
		mac := hmac.New(h, []byte(secret))
		mac.Write([]byte(parts[0] + "." + parts[1]))
		sig, err := base64URLDecode(parts[2])
		if err != nil {
			return nil, err
		}
		return hmac.Equal(sig, mac.Sum(nil)), nil
	}
}

// jwtKey is a verification key with the algorithm and key id its JWK gives.
type jwtKey struct {
	alg, kid string
	key      any
}

// jwtVerifyKey is io.jwt.verify_{rs,ps,es}*(token, key) and io.jwt.verify_eddsa: key is
// a PEM certificate, a PEM public key, or a JWK or JWK set. A key whose id the token's
// header names is the one tried; otherwise each key without an algorithm, or with the
// token's, until one verifies.
func jwtVerifyKey(h func() hash.Hash, verify func(key any, digest, sig []byte) error) opaBuiltinFunc {
	return func(_ *opaEval, args []json.RawMessage) (any, error) {
		token, keyText, err := twoStrings(args)
		if err != nil {
			return nil, err
		}
		parts, err := jwtParts(token)
		if err != nil {
			return nil, err
		}
		keys, err := jwtKeys(keyText)
		if err != nil {
			return nil, err
		}
		sig, err := base64URLDecode(parts[2])
		if err != nil {
			return nil, err
		}
		header, err := jwtHeader(parts[0])
		if err != nil {
			return nil, err
		}
		alg, kid, err := jwtHeaderAlgKid(header)
		if err != nil {
			return nil, err
		}
		digest := []byte(parts[0] + "." + parts[1])
		if h != nil {
			d := h()
			d.Write(digest)
			digest = d.Sum(nil)
		}
		if kid != "" {
			for _, k := range keys {
				if k.kid == kid {
					return verify(k.key, digest, sig) == nil, nil
				}
			}
		}
		for _, k := range keys {
			if k.alg != "" && k.alg != alg {
				continue
			}
			if verify(k.key, digest, sig) == nil {
				return true, nil
			}
		}
		return false, nil
	}
}

// jwtHeaderAlgKid reads the header's alg and kid, which must be strings when present, and
// checks crit as OPA parses it.
func jwtHeaderAlgKid(header map[string]any) (alg, kid string, err error) {
	for name, dst := range map[string]*string{"alg": &alg, "kid": &kid, "typ": new(string), "cty": new(string)} {
		if v, ok := header[name]; ok {
			s, ok := v.(string)
			if !ok {
				return "", "", fmt.Errorf("%s: must be a string", name)
			}
			*dst = s
		}
	}
	if v, ok := header["crit"]; ok {
		list, ok := v.([]any)
		if !ok {
			return "", "", errors.New("crit: must be a list")
		}
		if len(list) == 0 {
			return "", "", errors.New("crit: must be a nonempty list")
		}
	}
	return alg, kid, nil
}

// jwtKeys reads a PEM certificate or public key, or a JWK or JWK set.
func jwtKeys(text string) ([]jwtKey, error) {
	if block, rest := pem.Decode([]byte(text)); block != nil {
		if len(rest) > 0 {
			return nil, errors.New("extra data after a PEM certificate block")
		}
		switch block.Type {
		case "CERTIFICATE":
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("failed to parse a PEM certificate: %w", err)
			}
			return []jwtKey{{key: cert.PublicKey}}, nil
		case "PUBLIC KEY":
			key, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("failed to parse a PEM public key: %w", err)
			}
			return []jwtKey{{key: key}}, nil
		}
		return nil, errors.New("failed to extract a Key from the PEM certificate")
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal([]byte(text), &set); err != nil {
		return nil, fmt.Errorf("failed to parse a JWK key (set): %w", err)
	}
	raw := set.Keys
	if raw == nil {
		raw = []json.RawMessage{json.RawMessage(text)}
	}
	var keys []jwtKey
	for _, r := range raw {
		k, err := parseJWK(r)
		if err != nil {
			return nil, fmt.Errorf("failed to parse a JWK key (set): %w", err)
		}
		if k.alg != "" && !jwtAlgorithms[k.alg] {
			continue
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// parseJWK reads one public JSON Web Key: RSA, EC (P-256, P-384, P-521) or OKP Ed25519.
func parseJWK(raw json.RawMessage) (jwtKey, error) {
	var j struct {
		Kty, Alg, Kid, Crv, N, E, X, Y string
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return jwtKey{}, err
	}
	num := func(s, name string) (*big.Int, error) {
		b, err := base64URLDecode(s)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("invalid %q", name)
		}
		return new(big.Int).SetBytes(b), nil
	}
	k := jwtKey{alg: j.Alg, kid: j.Kid}
	switch j.Kty {
	case "RSA":
		n, err := num(j.N, "n")
		if err != nil {
			return jwtKey{}, err
		}
		e, err := num(j.E, "e")
		if err != nil {
			return jwtKey{}, err
		}
		k.key = &rsa.PublicKey{N: n, E: int(e.Int64())}
	case "EC":
		curves := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}
		curve, ok := curves[j.Crv]
		if !ok {
			return jwtKey{}, fmt.Errorf("unsupported curve %q", j.Crv)
		}
		x, err := num(j.X, "x")
		if err != nil {
			return jwtKey{}, err
		}
		y, err := num(j.Y, "y")
		if err != nil {
			return jwtKey{}, err
		}
		k.key = &ecdsa.PublicKey{Curve: curve, X: x, Y: y}
	case "OKP":
		if j.Crv != "Ed25519" {
			return jwtKey{}, fmt.Errorf("unsupported curve %q", j.Crv)
		}
		x, err := base64URLDecode(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return jwtKey{}, errors.New(`invalid "x"`)
		}
		k.key = ed25519.PublicKey(x)
	default:
		return jwtKey{}, fmt.Errorf("unsupported key type %q", j.Kty)
	}
	return k, nil
}

func verifyPKCS1(h crypto.Hash) func(any, []byte, []byte) error {
	return func(key any, digest, sig []byte) error {
		pub, ok := key.(*rsa.PublicKey)
		if !ok {
			return errors.New("incorrect public key type")
		}
		return rsa.VerifyPKCS1v15(pub, h, digest, sig)
	}
}

func verifyPSS(h crypto.Hash) func(any, []byte, []byte) error {
	return func(key any, digest, sig []byte) error {
		pub, ok := key.(*rsa.PublicKey)
		if !ok {
			return errors.New("incorrect public key type")
		}
		return rsa.VerifyPSS(pub, h, digest, sig, nil)
	}
}

// verifyECDSA checks a JWS ECDSA signature: r and s, each half of it.
func verifyECDSA(key any, digest, sig []byte) error {
	pub, ok := key.(*ecdsa.PublicKey)
	if !ok {
		return errors.New("incorrect public key type")
	}
	n := len(sig) / 2
	if !ecdsa.Verify(pub, digest, new(big.Int).SetBytes(sig[:n]), new(big.Int).SetBytes(sig[n:])) {
		return errors.New("ECDSA signature verification error")
	}
	return nil
}

func verifyEd25519(key any, msg, sig []byte) error {
	pub, ok := key.(ed25519.PublicKey)
	if !ok {
		return errors.New("incorrect public key type")
	}
	if len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, msg, sig) {
		return errors.New("EdDSA signature verification error")
	}
	return nil
}

// jwtVerifyBuiltins are the io.jwt.verify_* builtins.
var jwtVerifyBuiltins = map[string]opaBuiltinFunc{
	"io.jwt.verify_hs256": jwtVerifyHMAC(sha256.New),
	"io.jwt.verify_hs384": jwtVerifyHMAC(sha512.New384),
	"io.jwt.verify_hs512": jwtVerifyHMAC(sha512.New),
	"io.jwt.verify_rs256": jwtVerifyKey(sha256.New, verifyPKCS1(crypto.SHA256)),
	"io.jwt.verify_rs384": jwtVerifyKey(sha512.New384, verifyPKCS1(crypto.SHA384)),
	"io.jwt.verify_rs512": jwtVerifyKey(sha512.New, verifyPKCS1(crypto.SHA512)),
	"io.jwt.verify_ps256": jwtVerifyKey(sha256.New, verifyPSS(crypto.SHA256)),
	"io.jwt.verify_ps384": jwtVerifyKey(sha512.New384, verifyPSS(crypto.SHA384)),
	"io.jwt.verify_ps512": jwtVerifyKey(sha512.New, verifyPSS(crypto.SHA512)),
	"io.jwt.verify_es256": jwtVerifyKey(sha256.New, verifyECDSA),
	"io.jwt.verify_es384": jwtVerifyKey(sha512.New384, verifyECDSA),
	"io.jwt.verify_es512": jwtVerifyKey(sha512.New, verifyECDSA),
	"io.jwt.verify_eddsa": jwtVerifyKey(nil, verifyEd25519),
}
