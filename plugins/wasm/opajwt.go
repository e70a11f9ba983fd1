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
// a PEM certificate, a PEM public key, or a JWK or JWK set (keys picked by
// anyKeyVerifies).
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
		return anyKeyVerifies(keys, kid, alg, func(key any) bool { return verify(key, digest, sig) == nil }), nil
	}
}

// anyKeyVerifies picks keys as OPA does: the key whose id the token's header names, if
// there is one; otherwise each key without an algorithm or with the token's, until one
// verifies.
func anyKeyVerifies(keys []jwtKey, kid, alg string, verifies func(key any) bool) bool {
	if kid != "" {
		for _, k := range keys {
			if k.kid == kid {
				return verifies(k.key)
			}
		}
	}
	for _, k := range keys {
		if (k.alg == "" || k.alg == alg) && verifies(k.key) {
			return true
		}
	}
	return false
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
	"io.jwt.verify_hs256":  jwtVerifyHMAC(sha256.New),
	"io.jwt.verify_hs384":  jwtVerifyHMAC(sha512.New384),
	"io.jwt.verify_hs512":  jwtVerifyHMAC(sha512.New),
	"io.jwt.verify_rs256":  jwtVerifyKey(sha256.New, verifyPKCS1(crypto.SHA256)),
	"io.jwt.verify_rs384":  jwtVerifyKey(sha512.New384, verifyPKCS1(crypto.SHA384)),
	"io.jwt.verify_rs512":  jwtVerifyKey(sha512.New, verifyPKCS1(crypto.SHA512)),
	"io.jwt.verify_ps256":  jwtVerifyKey(sha256.New, verifyPSS(crypto.SHA256)),
	"io.jwt.verify_ps384":  jwtVerifyKey(sha512.New384, verifyPSS(crypto.SHA384)),
	"io.jwt.verify_ps512":  jwtVerifyKey(sha512.New, verifyPSS(crypto.SHA512)),
	"io.jwt.verify_es256":  jwtVerifyKey(sha256.New, verifyECDSA),
	"io.jwt.verify_es384":  jwtVerifyKey(sha512.New384, verifyECDSA),
	"io.jwt.verify_es512":  jwtVerifyKey(sha512.New, verifyECDSA),
	"io.jwt.verify_eddsa":  jwtVerifyKey(nil, verifyEd25519),
	"io.jwt.decode_verify": opaJWTDecodeVerify,
}

// jwsVerify checks sig over plaintext with key (a public key, or the secret as bytes for
// the HMAC algorithms) by the algorithm alg names.
func jwsVerify(key any, alg string, plaintext, sig []byte) error {
	hashes := map[string]crypto.Hash{"256": crypto.SHA256, "384": crypto.SHA384, "512": crypto.SHA512}
	if alg == "EdDSA" {
		return verifyEd25519(key, plaintext, sig)
	}
	if len(alg) != 5 {
		return fmt.Errorf("unsupported algorithm %q", alg)
	}
	h, ok := hashes[alg[2:]]
	if !ok {
		return fmt.Errorf("unsupported algorithm %q", alg)
	}
	d := h.New()
	d.Write(plaintext)
	digest := d.Sum(nil)
	switch alg[:2] {
	case "HS":
		secret, ok := key.([]byte)
		if !ok {
			return errors.New("incorrect key type")
		}
		mac := hmac.New(h.New, secret)
		mac.Write(plaintext)
		if !hmac.Equal(sig, mac.Sum(nil)) {
			return errors.New("HMAC signature verification error")
		}
		return nil
	case "RS":
		return verifyPKCS1(h)(key, digest, sig)
	case "PS":
		return verifyPSS(h)(key, digest, sig)
	case "ES":
		return verifyECDSA(key, digest, sig)
	}
	return fmt.Errorf("unsupported algorithm %q", alg)
}

// opaJWTDecodeVerify is io.jwt.decode_verify(token, constraints): [true, header,
// payload] when the signature verifies with the constraints' cert (keys as for
// io.jwt.verify_*) or secret, the algorithm, issuer and audience match those given, and
// the time (the constraint's, in ns, else the evaluation's) is before exp and not
// before nbf; [false, {}, {}] otherwise. A token whose cty is JWT is verified, then its
// payload as a token in turn.
func opaJWTDecodeVerify(ev *opaEval, args []json.RawMessage) (any, error) {
	token, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	if len(args) < 2 {
		return nil, errors.New("operand 2 missing")
	}
	c, err := jwtConstraints(ev, args[1])
	if err != nil {
		return nil, err
	}
	unverified := []any{false, map[string]any{}, map[string]any{}}
	var header, payload map[string]any
	for {
		parts, err := jwtParts(token)
		if err != nil {
			return nil, err
		}
		if header, err = jwtHeader(parts[0]); err != nil {
			return nil, err
		}
		alg, kid, err := jwtHeaderAlgKid(header)
		if err != nil {
			return nil, err
		}
		if alg == "" || jwtUnknownCritical(header) {
			return unverified, nil
		}
		if c.alg != "" && c.alg != alg {
			return unverified, nil
		}
		sig, err := base64URLDecode(parts[2])
		if err != nil {
			return nil, err
		}
		if !c.verifies(kid, alg, []byte(parts[0]+"."+parts[1]), sig) {
			return unverified, nil
		}
		raw, err := base64URLDecode(parts[1])
		if err != nil {
			return nil, fmt.Errorf("JWT payload had invalid encoding: %w", err)
		}
		if cty, _ := header["cty"].(string); strings.EqualFold(cty, "JWT") {
			token = string(raw)
			continue
		}
		if payload, err = jsonObject(raw); err != nil {
			return nil, err
		}
		break
	}
	if c.iss != "" {
		if iss, ok := payload["iss"].(string); !ok || iss != c.iss {
			return unverified, nil
		}
	}
	if aud, ok := payload["aud"]; ok {
		if !c.validAudience(aud) {
			return unverified, nil
		}
	} else if c.aud != "" {
		return unverified, nil
	}
	now := new(big.Float).SetFloat64(c.time / 1e9)
	for _, claim := range []string{"exp", "nbf"} {
		v, ok := payload[claim]
		if !ok {
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s value must be a number", claim)
		}
		f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
		if err != nil {
			return nil, fmt.Errorf("%s value must be a number", claim)
		}
		if claim == "exp" && now.Cmp(f) >= 0 || claim == "nbf" && now.Cmp(f) < 0 {
			return unverified, nil
		}
	}
	return []any{true, header, payload}, nil
}

// jwtUnknownCritical reports whether the header's crit names a parameter OPA does not
// know (alg, kid, typ, cty, crit).
func jwtUnknownCritical(header map[string]any) bool {
	crit, _ := header["crit"].([]any)
	for _, c := range crit {
		name, _ := c.(string)
		switch name {
		case "alg", "kid", "typ", "cty", "crit":
			continue
		}
		if _, ok := header[name]; ok {
			return true
		}
	}
	return false
}

// tokenConstraints are io.jwt.decode_verify's constraints.
type tokenConstraints struct {
	keys               []jwtKey
	secret, alg        string
	iss, aud           string
	time               float64
	hasKeys, hasSecret bool
}

func jwtConstraints(ev *opaEval, raw json.RawMessage) (*tokenConstraints, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, errors.New("operand 2 must be object")
	}
	c := &tokenConstraints{time: -1}
	for name, v := range obj {
		var s string
		switch name {
		case "cert", "secret", "alg", "iss", "aud":
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, fmt.Errorf("%s constraint: must be a string", name)
			}
		}
		switch name {
		case "cert":
			keys, err := jwtKeys(s)
			if err != nil {
				return nil, err
			}
			c.keys, c.hasKeys = keys, true
		case "secret":
			c.secret, c.hasSecret = s, s != ""
		case "alg":
			c.alg = s
		case "iss":
			c.iss = s
		case "aud":
			c.aud = s
		case "time":
			var n json.Number
			if err := json.Unmarshal(v, &n); err != nil {
				return nil, errors.New("token time constraint: must be a number")
			}
			f, err := n.Float64()
			if err != nil || f < 0 {
				return nil, errors.New("token time constraint: must not be negative")
			}
			c.time = f
		default:
			return nil, fmt.Errorf("unknown token validation constraint: %s", name)
		}
	}
	if c.time == -1 {
		c.time = float64(ev.now.UnixNano())
	}
	switch {
	case c.hasKeys && c.hasSecret:
		return nil, errors.New("duplicate key constraints")
	case !c.hasKeys && !c.hasSecret:
		return nil, errors.New("no key constraint")
	}
	return c, nil
}

// verifies checks a signature as io.jwt.decode_verify does: with the secret, or with the
// cert's keys picked by anyKeyVerifies.
func (c *tokenConstraints) verifies(kid, alg string, plaintext, sig []byte) bool {
	if !c.hasKeys {
		return jwsVerify([]byte(c.secret), alg, plaintext, sig) == nil
	}
	return anyKeyVerifies(c.keys, kid, alg, func(key any) bool { return jwsVerify(key, alg, plaintext, sig) == nil })
}

// validAudience: aud is the constraint's audience, or an array holding it.
func (c *tokenConstraints) validAudience(aud any) bool {
	switch a := aud.(type) {
	case string:
		return a == c.aud
	case []any:
		for _, e := range a {
			if s, ok := e.(string); ok && s == c.aud {
				return true
			}
		}
	}
	return false
}
