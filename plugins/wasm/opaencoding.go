package wasm

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"text/template"
)

// opaGlobQuoteMeta is glob.quote_meta(pattern): the glob syntax's special characters
// escaped with a backslash.
func opaGlobQuoteMeta(_ *opaEval, args []json.RawMessage) (any, error) {
	s, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?\[]{}`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

// opaRandIntn is rand.intn(name, n): a random integer in [0, |n|), the same for one
// name and bound throughout an evaluation.
func opaRandIntn(ev *opaEval, args []json.RawMessage) (any, error) {
	name, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	n, err := argInt(args, 1)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return 0, nil
	}
	if n < 0 {
		n = -n
	}
	key := fmt.Sprintf("%s-%d", name, n)
	if v, ok := ev.ints[key]; ok {
		return v, nil
	}
	if ev.ints == nil {
		ev.ints = map[string]int64{}
	}
	ev.ints[key] = rand.Int64N(n)
	return ev.ints[key], nil
}

// opaRenderTemplate is strings.render_template(template, vars): Go's text/template over
// the variables, a missing one written "<undefined>".
func opaRenderTemplate(_ *opaEval, args []json.RawMessage) (any, error) {
	text, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	if len(args) < 2 {
		return nil, errors.New("operand 2 missing")
	}
	var vars map[string]any
	d := json.NewDecoder(bytes.NewReader(args[1]))
	d.UseNumber()
	if err := d.Decode(&vars); err != nil || vars == nil {
		return nil, errors.New("operand 2 must be object")
	}
	tmpl, err := template.New("template").Parse(text)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, vars); err != nil {
		return nil, err
	}
	return strings.ReplaceAll(out.String(), "<no value>", "<undefined>"), nil
}

// base64URLDecode decodes base64url with or without padding, as OPA's base64url.decode.
func base64URLDecode(s string) ([]byte, error) {
	if !strings.HasSuffix(s, "=") {
		switch len(s) % 4 {
		case 0:
		case 2:
			s += "=="
		case 3:
			s += "="
		default:
			return nil, fmt.Errorf("illegal base64url string: %s", s)
		}
	}
	return base64.URLEncoding.DecodeString(s)
}

// jsonObject reads data as a JSON object.
func jsonObject(data []byte) (map[string]any, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("decoded JSON type was not an Object")
	}
	return o, nil
}

// opaJWTDecode is io.jwt.decode(token): [header, payload, signature as hex], without
// checking the signature; a payload that is itself a JWT (cty "JWT") is decoded instead.
func opaJWTDecode(ev *opaEval, args []json.RawMessage) (any, error) {
	token, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	parts, err := jwtParts(token)
	if err != nil {
		return nil, err
	}
	header, err := jwtHeader(parts[0])
	if err != nil {
		return nil, err
	}
	payload, err := base64URLDecode(parts[1])
	if err != nil {
		return nil, fmt.Errorf("JWT payload had invalid encoding: %w", err)
	}
	if cty, ok := header["cty"].(string); ok && cty == "JWT" {
		inner, _ := json.Marshal(strings.Trim(string(payload), `"'`))
		return opaJWTDecode(ev, []json.RawMessage{inner})
	}
	claims, err := jsonObject(payload)
	if err != nil {
		return nil, err
	}
	sig, err := base64URLDecode(parts[2])
	if err != nil {
		return nil, fmt.Errorf("JWT signature had invalid encoding: %w", err)
	}
	return []any{header, claims, hex.EncodeToString(sig)}, nil
}

// jwtHeader decodes a JWT's header section; a JWE's is refused.
func jwtHeader(section string) (map[string]any, error) {
	raw, err := base64URLDecode(section)
	if err != nil {
		return nil, fmt.Errorf("JWT header had invalid encoding: %w", err)
	}
	header, err := jsonObject(raw)
	if err != nil {
		return nil, fmt.Errorf("bad JWT header: %w", err)
	}
	if _, ok := header["enc"]; ok {
		return nil, errors.New("JWT is a JWE object, which is not supported")
	}
	return header, nil
}

// x509Certificate is a certificate as crypto.x509.parse_certificates answers it: Go's
// x509.Certificate as JSON, with its URIs as strings.
type x509Certificate struct {
	x509.Certificate
	URIStrings []string
}

// opaX509ParseCertificates is crypto.x509.parse_certificates(certs): PEM, base64 of PEM,
// or base64 of DER.
func opaX509ParseCertificates(_ *opaEval, args []json.RawMessage) (any, error) {
	s, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	data := []byte(s)
	if !strings.HasPrefix(s, "-----BEGIN") {
		if data, err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil, err
		}
	}
	if bytes.HasPrefix(data, []byte("-----BEGIN")) {
		var der []byte
		for len(data) > 0 {
			block, rest := pem.Decode(data)
			if block == nil {
				break
			}
			if block.Type != "CERTIFICATE" {
				return nil, fmt.Errorf("PEM block type is '%s', expected CERTIFICATE", block.Type)
			}
			der = append(der, block.Bytes...)
			data = rest
		}
		data = der
	}
	certs, err := x509.ParseCertificates(data)
	if err != nil {
		return nil, err
	}
	out := make([]x509Certificate, len(certs))
	for i, c := range certs {
		out[i].Certificate = *c
		for _, u := range c.URIs {
			out[i].URIStrings = append(out[i].URIStrings, u.String())
		}
	}
	// Through JSON, as OPA builds the value.
	js, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
