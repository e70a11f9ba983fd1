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
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/google/uuid"
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
	certs, err := parseCertificates(s)
	if err != nil {
		return nil, err
	}
	return certificatesValue(certs, true)
}

// parseCertificates reads certificates as PEM, base64 of PEM, or base64 of DER.
func parseCertificates(s string) ([]*x509.Certificate, error) {
	data := []byte(s)
	if !strings.HasPrefix(s, "-----BEGIN") {
		var err error
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
	return x509.ParseCertificates(data)
}

// certificatesValue is certs as OPA answers them: Go's x509.Certificate through JSON,
// with the URIs as strings (URIStrings) when withURIs.
func certificatesValue(certs []*x509.Certificate, withURIs bool) (any, error) {
	var v any = certs
	if withURIs {
		out := make([]x509Certificate, len(certs))
		for i, c := range certs {
			out[i].Certificate = *c
			for _, u := range c.URIs {
				out[i].URIStrings = append(out[i].URIStrings, u.String())
			}
		}
		v = out
	}
	return throughJSON(v)
}

// throughJSON is v marshalled and read back with numbers kept exact.
func throughJSON(v any) (any, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// opaX509ParseAndVerify is crypto.x509.parse_and_verify_certificates(certs) and, with
// options (DNSName, CurrentTime in ns, MaxConstraintComparisons, KeyUsages),
// crypto.x509.parse_and_verify_certificates_with_options: the first certificate is the
// root, the last the leaf, those between intermediates; [true, chain from the leaf] or
// [false, []].
func opaX509ParseAndVerify(args []json.RawMessage) (any, error) {
	s, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	var opts x509.VerifyOptions
	withOptions := len(args) > 1
	if withOptions {
		if opts, err = x509VerifyOptions(args[1]); err != nil {
			return nil, err
		}
	}
	invalid := []any{false, []any{}}
	certs, err := parseCertificates(s)
	if err != nil || len(certs) < 2 {
		// A chain needs a root and a leaf at least.
		return invalid, nil
	}
	opts.Roots = x509.NewCertPool()
	opts.Roots.AddCert(certs[0])
	opts.Intermediates = x509.NewCertPool()
	for _, c := range certs[1 : len(certs)-1] {
		opts.Intermediates.AddCert(c)
	}
	chains, err := certs[len(certs)-1].Verify(opts)
	if err != nil {
		return invalid, nil
	}
	v, err := certificatesValue(chains[0], !withOptions)
	if err != nil {
		return nil, err
	}
	return []any{true, v}, nil
}

// x509KeyUsages are the names KeyUsages accepts.
var x509KeyUsages = map[string]x509.ExtKeyUsage{
	"KeyUsageAny": x509.ExtKeyUsageAny, "KeyUsageServerAuth": x509.ExtKeyUsageServerAuth,
	"KeyUsageClientAuth": x509.ExtKeyUsageClientAuth, "KeyUsageCodeSigning": x509.ExtKeyUsageCodeSigning,
	"KeyUsageEmailProtection": x509.ExtKeyUsageEmailProtection, "KeyUsageIPSECEndSystem": x509.ExtKeyUsageIPSECEndSystem,
	"KeyUsageIPSECTunnel": x509.ExtKeyUsageIPSECTunnel, "KeyUsageIPSECUser": x509.ExtKeyUsageIPSECUser,
	"KeyUsageTimeStamping": x509.ExtKeyUsageTimeStamping, "KeyUsageOCSPSigning": x509.ExtKeyUsageOCSPSigning,
	"KeyUsageMicrosoftServerGatedCrypto":     x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	"KeyUsageNetscapeServerGatedCrypto":      x509.ExtKeyUsageNetscapeServerGatedCrypto,
	"KeyUsageMicrosoftCommercialCodeSigning": x509.ExtKeyUsageMicrosoftCommercialCodeSigning,
	"KeyUsageMicrosoftKernelCodeSigning":     x509.ExtKeyUsageMicrosoftKernelCodeSigning,
}

func x509VerifyOptions(raw json.RawMessage) (x509.VerifyOptions, error) {
	var opts x509.VerifyOptions
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return opts, errors.New("operand 2 must be object")
	}
	for k, v := range obj {
		switch k {
		case "DNSName":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return opts, errors.New("'DNSName' should be a string")
			}
			opts.DNSName = strings.Trim(s, `"`)
		case "CurrentTime":
			ns, err := argInt([]json.RawMessage{v}, 0)
			if err != nil {
				return opts, errors.New("'CurrentTime' should be a valid int64 number")
			}
			opts.CurrentTime = time.Unix(0, ns)
		case "MaxConstraintComparisons":
			n, err := argInt([]json.RawMessage{v}, 0)
			if err != nil {
				return opts, errors.New("'MaxConstraintComparisons' should be a valid number")
			}
			opts.MaxConstraintComparisions = int(n)
		case "KeyUsages":
			var names []any
			if err := json.Unmarshal(v, &names); err != nil {
				return opts, errors.New("'KeyUsages' should be an Array or Set")
			}
			var invalid []string
			for _, n := range names {
				s, ok := n.(string)
				if !ok {
					continue
				}
				s = strings.Trim(s, `"`)
				if u, ok := x509KeyUsages[s]; ok {
					opts.KeyUsages = append(opts.KeyUsages, u)
				} else {
					invalid = append(invalid, s)
				}
			}
			if len(invalid) > 0 {
				return x509.VerifyOptions{}, fmt.Errorf("invalid entries for 'KeyUsages' found: %s", invalid)
			}
		default:
			return opts, errors.New("invalid key option")
		}
	}
	return opts, nil
}

// opaX509ParseCertificateRequest is crypto.x509.parse_certificate_request(csr): PEM or
// base64 of PEM or DER, answered as Go's x509.CertificateRequest through JSON.
func opaX509ParseCertificateRequest(_ *opaEval, args []json.RawMessage) (any, error) {
	s, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	data := []byte(s)
	if !strings.HasPrefix(s, "-----BEGIN CERTIFICATE REQUEST-----") {
		if data, err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil, err
		}
	}
	block, _ := pem.Decode(data)
	if block != nil && block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("invalid PEM-encoded certificate signing request")
	}
	if block != nil {
		data = block.Bytes
	}
	csr, err := x509.ParseCertificateRequest(data)
	if err != nil {
		return nil, err
	}
	return throughJSON(csr)
}

// opaUUIDParse is uuid.parse(s): the version and variant, and for versions 1 and 2 the
// time (ns), node id, its MAC variables and the clock sequence (and id and domain for
// version 2). A string that is no UUID is undefined.
func opaUUIDParse(_ *opaEval, args []json.RawMessage) (any, error) {
	s, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"version": int(u.Version()), "variant": u.Variant().String()}
	if v := u.Version(); v == 1 || v == 2 {
		sec, nsec := u.Time().UnixTime()
		out["time"] = sec*1e9 + nsec
		node := u.NodeID()
		hexs := make([]string, len(node))
		for i, b := range node {
			hexs[i] = fmt.Sprintf("%02x", b)
		}
		out["nodeid"] = strings.Join(hexs, "-")
		switch {
		case node[0]&0b11 == 0b11:
			out["macvariables"] = "local:multicast"
		case node[0]&0b01 == 0b01:
			out["macvariables"] = "global:multicast"
		case node[0]&0b10 == 0b10:
			out["macvariables"] = "local:unicast"
		default:
			out["macvariables"] = "global:unicast"
		}
		out["clocksequence"] = u.ClockSequence()
		if v == 2 {
			out["id"] = int(u.ID())
			out["domain"] = u.Domain().String()
		}
	}
	return out, nil
}

// opaRegexTemplateMatch is regex.template_match(template, value, start, end): the
// template's text outside the one-character delimiters matched literally, the text
// inside each pair as a regular expression.
func opaRegexTemplateMatch(_ *opaEval, args []json.RawMessage) (any, error) {
	var s [4]string
	for i := range s {
		var err error
		if s[i], err = argString(args, i); err != nil {
			return nil, err
		}
	}
	tpl, value, start, end := s[0], s[1], s[2], s[3]
	if len(start) != 1 || len(end) != 1 {
		return nil, errors.New("delimiters have to be exactly one character long")
	}
	var pattern strings.Builder
	pattern.WriteByte('^')
	level, open, last := 0, 0, 0
	for i := 0; i < len(tpl); i++ {
		switch tpl[i] {
		case start[0]:
			if level++; level == 1 {
				open = i
			}
		case end[0]:
			if level--; level < 0 {
				return nil, fmt.Errorf("unbalanced braces in %q", tpl)
			} else if level == 0 {
				inner := tpl[open+1 : i]
				if _, err := regexp.Compile("^" + inner + "$"); err != nil {
					return nil, err
				}
				fmt.Fprintf(&pattern, "%s(%s)", regexp.QuoteMeta(tpl[last:open]), inner)
				last = i + 1
			}
		}
	}
	if level != 0 {
		return nil, fmt.Errorf("unbalanced braces in %q", tpl)
	}
	pattern.WriteString(regexp.QuoteMeta(tpl[last:]) + "$")
	re, err := regexp.Compile(pattern.String())
	if err != nil {
		return nil, err
	}
	return re.MatchString(value), nil
}
