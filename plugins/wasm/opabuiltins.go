package wasm

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"
	"math/big"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"
)

// opaEval is what the builtins of one evaluation share: OPA answers time.now_ns and
// uuid.rfc4122 with one value per evaluation (per seed for uuids), and rand.intn with one
// per evaluation, name and bound.
type opaEval struct {
	now   time.Time
	uuids map[string]string
	ints  map[string]int64
}

// opaBuiltinFunc computes one builtin from its arguments' JSON. An error makes the call
// undefined, as OPA's evaluator does with builtin errors unless told to be strict.
type opaBuiltinFunc func(ev *opaEval, args []json.RawMessage) (any, error)

type opaBuiltin struct {
	name string
	// fn or values computes the builtin: values when it tells sets from arrays.
	fn     opaBuiltinFunc
	values opaValueFunc
}

// hostBuiltins are the builtins this host provides to Rego policies: OPA compiles most of
// the language's builtins into the module itself and leaves these to the host. Those
// that reach outside the sandbox (http.send, net.lookup_ip_addr, opa.runtime) are not
// provided, nor, yet, io.jwt.encode_sign*, crypto.x509.parse_keypair,
// crypto.x509.parse_rsa_private_key, json.verify_schema, json.match_schema,
// regex.globs_match, graphql.*, rego.parse_module and providers.aws.sign_req; a policy
// using one is refused at load. Those that tell sets from arrays are in
// hostValueBuiltins, the io.jwt verifying ones in jwtVerifyBuiltins.
var hostBuiltins = map[string]opaBuiltinFunc{
	"sprintf":                  opaSprintf,
	"units.parse":              stringFunc(unitsParse),
	"units.parse_bytes":        stringFunc(unitsParseBytes),
	"regex.replace":            opaRegexReplace,
	"regex.split":              opaRegexSplit,
	"regex.find_n":             opaRegexFindN,
	"strings.any_prefix_match": anyMatch(strings.HasPrefix),
	"strings.any_suffix_match": anyMatch(strings.HasSuffix),
	"strings.count":            opaStringsCount,
	"hex.encode":               stringFunc(func(s string) (any, error) { return hex.EncodeToString([]byte(s)), nil }),
	"hex.decode": stringFunc(func(s string) (any, error) {
		b, err := hex.DecodeString(s)
		return string(b), err
	}),
	"base64url.encode_no_pad": stringFunc(func(s string) (any, error) { return base64.RawURLEncoding.EncodeToString([]byte(s)), nil }),
	"urlquery.encode":         stringFunc(func(s string) (any, error) { return url.QueryEscape(s), nil }),
	"urlquery.decode":         stringFunc(func(s string) (any, error) { return url.QueryUnescape(s) }),
	"urlquery.encode_object":  opaURLQueryEncodeObject,
	"urlquery.decode_object": stringFunc(func(s string) (any, error) {
		v, err := url.ParseQuery(s)
		return map[string][]string(v), err
	}),
	"crypto.md5":         digest(md5.New),
	"crypto.sha1":        digest(sha1.New),
	"crypto.sha256":      digest(sha256.New),
	"crypto.hmac.md5":    mac(md5.New),
	"crypto.hmac.sha1":   mac(sha1.New),
	"crypto.hmac.sha256": mac(sha256.New),
	"crypto.hmac.sha512": mac(sha512.New),
	"crypto.hmac.equal":  opaHMACEqual,
	"time.now_ns": func(ev *opaEval, args []json.RawMessage) (any, error) {
		return ev.now.UnixNano(), nil
	},
	"time.parse_rfc3339_ns": stringFunc(func(s string) (any, error) {
		t, err := time.Parse(time.RFC3339, s)
		return t.UnixNano(), err
	}),
	"time.parse_duration_ns":         stringFunc(parseExtendedDuration),
	"time.parse_ns":                  opaTimeParseNS,
	"glob.quote_meta":                opaGlobQuoteMeta,
	"rand.intn":                      opaRandIntn,
	"strings.render_template":        opaRenderTemplate,
	"io.jwt.decode":                  opaJWTDecode,
	"uuid.parse":                     opaUUIDParse,
	"regex.template_match":           opaRegexTemplateMatch,
	"crypto.x509.parse_certificates": opaX509ParseCertificates,
	"crypto.x509.parse_and_verify_certificates": func(_ *opaEval, args []json.RawMessage) (any, error) {
		return opaX509ParseAndVerify(args[:min(len(args), 1)])
	},
	"crypto.x509.parse_and_verify_certificates_with_options": func(_ *opaEval, args []json.RawMessage) (any, error) {
		if len(args) != 2 {
			return nil, fmt.Errorf("takes 2 arguments, got %d", len(args))
		}
		return opaX509ParseAndVerify(args)
	},
	"crypto.x509.parse_certificate_request": opaX509ParseCertificateRequest,
	"time.format":                           opaTimeFormat,
	"time.diff":                             opaTimeDiff,
	"time.date": timeFunc(func(t time.Time) any {
		y, m, d := t.Date()
		return []int{y, int(m), d}
	}),
	"time.clock":      timeFunc(func(t time.Time) any { return []int{t.Hour(), t.Minute(), t.Second()} }),
	"time.weekday":    timeFunc(func(t time.Time) any { return t.Weekday().String() }),
	"time.add_date":   opaTimeAddDate,
	"semver.is_valid": opaSemverIsValid,
	"semver.compare":  opaSemverCompare,
	"net.cidr_is_valid": func(_ *opaEval, args []json.RawMessage) (any, error) {
		s, err := argString(args, 0)
		if err != nil {
			return nil, err
		}
		_, _, err = net.ParseCIDR(s)
		return err == nil, nil
	},
	"yaml.marshal": func(_ *opaEval, args []json.RawMessage) (any, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("takes 1 argument, got %d", len(args))
		}
		var v any
		if err := json.Unmarshal(args[0], &v); err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
		return buf.String(), nil
	},
	// YAML 1.2, as OPA reads it: "y" and "no" are strings.
	"yaml.unmarshal": stringFunc(func(s string) (any, error) {
		var v any
		if err := yaml.Unmarshal([]byte(s), &v); err != nil {
			return nil, err
		}
		return v, nil
	}),
	"yaml.is_valid": func(_ *opaEval, args []json.RawMessage) (any, error) {
		var s string
		if len(args) != 1 || json.Unmarshal(args[0], &s) != nil {
			return false, nil
		}
		var v any
		return yaml.Unmarshal([]byte(s), &v) == nil, nil
	},
	"numbers.range_step": opaRangeStep,
	"uuid.rfc4122": stringFunc2(func(ev *opaEval, seed string) (any, error) {
		if id, ok := ev.uuids[seed]; ok {
			return id, nil
		}
		id, err := uuid.NewRandom()
		if err != nil {
			return nil, err
		}
		if ev.uuids == nil {
			ev.uuids = map[string]string{}
		}
		ev.uuids[seed] = id.String()
		return ev.uuids[seed], nil
	}),
}

func argString(args []json.RawMessage, i int) (string, error) {
	if i >= len(args) {
		return "", fmt.Errorf("operand %d missing", i+1)
	}
	var s string
	if err := json.Unmarshal(args[i], &s); err != nil {
		return "", fmt.Errorf("operand %d must be a string", i+1)
	}
	return s, nil
}

// twoStrings reads operands 1 and 2 as strings.
func twoStrings(args []json.RawMessage) (string, string, error) {
	a, err := argString(args, 0)
	if err != nil {
		return "", "", err
	}
	b, err := argString(args, 1)
	return a, b, err
}

func argInt(args []json.RawMessage, i int) (int64, error) {
	if i >= len(args) {
		return 0, fmt.Errorf("operand %d missing", i+1)
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(args[i]))
	d.UseNumber()
	if err := d.Decode(&n); err != nil {
		return 0, fmt.Errorf("operand %d must be a number", i+1)
	}
	v, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("operand %d must be an integer", i+1)
	}
	return v, nil
}

// argStrings reads a string, or an array or set of strings (sets cross as arrays).
func argStrings(args []json.RawMessage, i int) ([]string, error) {
	if s, err := argString(args, i); err == nil {
		return []string{s}, nil
	}
	var list []string
	if i >= len(args) || json.Unmarshal(args[i], &list) != nil {
		return nil, fmt.Errorf("operand %d must be a string, or an array or set of strings", i+1)
	}
	return list, nil
}

func stringFunc(f func(string) (any, error)) opaBuiltinFunc {
	return stringFunc2(func(_ *opaEval, s string) (any, error) { return f(s) })
}

func stringFunc2(f func(*opaEval, string) (any, error)) opaBuiltinFunc {
	return func(ev *opaEval, args []json.RawMessage) (any, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("takes 1 argument, got %d", len(args))
		}
		s, err := argString(args, 0)
		if err != nil {
			return nil, err
		}
		return f(ev, s)
	}
}

// opaSprintf is Rego's sprintf(format, values): Go's fmt verbs over the values, numbers
// as integers when they are, composite values printed as JSON (so a set prints as a JSON
// array in the engine's order, where OPA itself prints Rego's sorted {…} syntax).
func opaSprintf(_ *opaEval, args []json.RawMessage) (any, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("takes 2 arguments, got %d", len(args))
	}
	format, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(args[1], &raw); err != nil {
		return nil, fmt.Errorf("operand 2 must be an array: %w", err)
	}
	vals := make([]any, len(raw))
	for i, v := range raw {
		var s string
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		switch {
		case json.Unmarshal(v, &s) == nil:
			vals[i] = s
		case d.Decode(&n) == nil:
			if iv, err := n.Int64(); err == nil {
				vals[i] = iv
			} else if fv, err := n.Float64(); err == nil {
				vals[i] = fv
			} else {
				vals[i] = n.String()
			}
		default:
			vals[i] = string(v)
		}
	}
	return fmt.Sprintf(format, vals...), nil
}

// numberPrefix splits "1.5Gi" into its number and its unit.
func numberPrefix(s string) (*big.Rat, string, error) {
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.') {
		end++
	}
	if end == 0 {
		return nil, "", errors.New("no amount provided")
	}
	r, ok := new(big.Rat).SetString(s[:end])
	if !ok {
		return nil, "", fmt.Errorf("could not parse amount to a number")
	}
	return r, s[end:], nil
}

// ratJSON writes a number as OPA does: an integer when whole, a decimal otherwise.
func ratJSON(r *big.Rat) json.RawMessage {
	if r.IsInt() {
		return json.RawMessage(r.Num().String())
	}
	f, _ := r.Float64()
	b, _ := json.Marshal(f)
	return b
}

// unitsParse is units.parse: SI (m, K, M, G, T, P, E; m and M case-sensitive, the
// others not) and binary (Ki … Ei, any case) suffixes, quotes and spaces ignored.
func unitsParse(s string) (any, error) {
	s = strings.ReplaceAll(strings.ReplaceAll(s, `"`, ""), " ", "")
	amount, unit, err := numberPrefix(s)
	if err != nil {
		return nil, fmt.Errorf("units.parse: %w", err)
	}
	var factor *big.Rat
	switch {
	case unit == "":
		factor = big.NewRat(1, 1)
	case unit == "m":
		factor = big.NewRat(1, 1000)
	case unit == "M":
		factor = pow(1000, 2)
	default:
		si := map[string]int{"k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}
		lower := strings.ToLower(unit)
		if n, ok := si[lower]; ok && len(lower) == 1 {
			factor = pow(1000, n)
		} else if n, ok := si[strings.TrimSuffix(lower, "i")]; ok && len(lower) == 2 && strings.HasSuffix(lower, "i") {
			factor = pow(1024, n)
		} else {
			return nil, fmt.Errorf("units.parse: unit %q not recognized", unit)
		}
	}
	return ratJSON(amount.Mul(amount, factor)), nil
}

// unitsParseBytes is units.parse_bytes: decimal (KB … EB) and binary (KiB … EiB) units,
// any case, the B optional; the result is a whole number of bytes.
func unitsParseBytes(s string) (any, error) {
	s = strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(s, `"`, ""), " ", ""))
	amount, unit, err := numberPrefix(s)
	if err != nil {
		return nil, fmt.Errorf("units.parse_bytes: %w", err)
	}
	unit = strings.TrimSuffix(unit, "b")
	exp := map[string]int{"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}
	var factor *big.Rat
	if n, ok := exp[unit]; ok {
		factor = pow(1000, n)
	} else if n, ok := exp[strings.TrimSuffix(unit, "i")]; ok && strings.HasSuffix(unit, "i") && unit != "i" {
		factor = pow(1024, n)
	} else {
		return nil, fmt.Errorf("units.parse_bytes: unit %q not recognized", unit)
	}
	amount.Mul(amount, factor)
	return json.RawMessage(new(big.Int).Quo(amount.Num(), amount.Denom()).String()), nil
}

func pow(base int64, n int) *big.Rat {
	return new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(base), big.NewInt(int64(n)), nil))
}

func compile(args []json.RawMessage, i int) (*regexp.Regexp, error) {
	p, err := argString(args, i)
	if err != nil {
		return nil, err
	}
	return regexp.Compile(p)
}

// opaRegexReplace is regex.replace(s, pattern, value), $1 expanding as in Go.
func opaRegexReplace(_ *opaEval, args []json.RawMessage) (any, error) {
	s, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	re, err := compile(args, 1)
	if err != nil {
		return nil, err
	}
	v, err := argString(args, 2)
	if err != nil {
		return nil, err
	}
	return re.ReplaceAllString(s, v), nil
}

// opaRegexSplit is regex.split(pattern, value).
func opaRegexSplit(_ *opaEval, args []json.RawMessage) (any, error) {
	pattern, s, err := twoStrings(args)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	return re.Split(s, -1), nil
}

// opaRegexFindN is regex.find_n(pattern, value, n): at most n matches, all for -1.
func opaRegexFindN(_ *opaEval, args []json.RawMessage) (any, error) {
	re, err := compile(args, 0)
	if err != nil {
		return nil, err
	}
	s, err := argString(args, 1)
	if err != nil {
		return nil, err
	}
	n, err := argInt(args, 2)
	if err != nil {
		return nil, err
	}
	found := re.FindAllString(s, int(n))
	if found == nil {
		found = []string{}
	}
	return found, nil
}

// anyMatch is strings.any_prefix_match / any_suffix_match(search, base): whether any of
// search has any of base as its prefix (suffix).
func anyMatch(match func(s, affix string) bool) opaBuiltinFunc {
	return func(_ *opaEval, args []json.RawMessage) (any, error) {
		search, err := argStrings(args, 0)
		if err != nil {
			return nil, err
		}
		base, err := argStrings(args, 1)
		if err != nil {
			return nil, err
		}
		for _, s := range search {
			if slices.ContainsFunc(base, func(b string) bool { return match(s, b) }) {
				return true, nil
			}
		}
		return false, nil
	}
}

// opaStringsCount is strings.count(search, substring): non-overlapping occurrences.
func opaStringsCount(_ *opaEval, args []json.RawMessage) (any, error) {
	s, sub, err := twoStrings(args)
	if err != nil {
		return nil, err
	}
	return strings.Count(s, sub), nil
}

// opaURLQueryEncodeObject is urlquery.encode_object: values are strings or arrays or sets
// of strings; keys sorted.
func opaURLQueryEncodeObject(_ *opaEval, args []json.RawMessage) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("takes 1 argument, got %d", len(args))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args[0], &obj); err != nil {
		return nil, errors.New("operand 1 must be an object")
	}
	q := url.Values{}
	for k, raw := range obj {
		vals, err := argStrings([]json.RawMessage{raw}, 0)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", k, err)
		}
		q[k] = vals
	}
	return q.Encode(), nil
}

func digest(h func() hash.Hash) opaBuiltinFunc {
	return stringFunc(func(s string) (any, error) {
		d := h()
		d.Write([]byte(s))
		return hex.EncodeToString(d.Sum(nil)), nil
	})
}

func mac(h func() hash.Hash) opaBuiltinFunc {
	return func(_ *opaEval, args []json.RawMessage) (any, error) {
		s, key, err := twoStrings(args)
		if err != nil {
			return nil, err
		}
		m := hmac.New(h, []byte(key))
		m.Write([]byte(s))
		return hex.EncodeToString(m.Sum(nil)), nil
	}
}

func opaHMACEqual(_ *opaEval, args []json.RawMessage) (any, error) {
	a, b, err := twoStrings(args)
	if err != nil {
		return nil, err
	}
	return hmac.Equal([]byte(a), []byte(b)), nil
}

// argTime reads a time argument: nanoseconds since the epoch (UTC), or [ns, zone].
// argTime reads a time operand as OPA does: ns, or [ns], [ns, zone] or [ns, zone,
// layout] (zone "" or "UTC" is UTC, "Local" the host's); it also returns the layout.
func argTime(args []json.RawMessage, i int) (time.Time, string, error) {
	if ns, err := argInt(args, i); err == nil {
		return time.Unix(0, ns).UTC(), "", nil
	}
	var parts []json.RawMessage
	if i >= len(args) || json.Unmarshal(args[i], &parts) != nil || len(parts) == 0 {
		return time.Time{}, "", fmt.Errorf("operand %d must be either number (ns) or [number (ns), string (tz)]", i+1)
	}
	ns, err := argInt(parts, 0)
	if err != nil {
		return time.Time{}, "", err
	}
	loc, layout := time.UTC, ""
	if len(parts) > 1 {
		zone, err := argString(parts, 1)
		if err != nil {
			return time.Time{}, "", err
		}
		switch zone {
		case "", "UTC":
		case "Local":
			loc = time.Local
		default:
			if loc, err = time.LoadLocation(zone); err != nil {
				return time.Time{}, "", err
			}
		}
	}
	if len(parts) > 2 {
		if layout, err = argString(parts, 2); err != nil {
			return time.Time{}, "", err
		}
	}
	return time.Unix(0, ns).In(loc), layout, nil
}

// namedLayouts are the layouts time.format and time.parse_ns accept by name.
var namedLayouts = map[string]string{
	"ANSIC": time.ANSIC, "UnixDate": time.UnixDate, "RubyDate": time.RubyDate,
	"RFC822": time.RFC822, "RFC822Z": time.RFC822Z, "RFC850": time.RFC850,
	"RFC1123": time.RFC1123, "RFC1123Z": time.RFC1123Z, "RFC3339": time.RFC3339,
	"RFC3339Nano": time.RFC3339Nano,
}

// opaTimeFormat is time.format(x): RFC 3339 with nanoseconds unless x names a layout.
func opaTimeFormat(_ *opaEval, args []json.RawMessage) (any, error) {
	t, layout, err := argTime(args, 0)
	if err != nil {
		return nil, err
	}
	if layout == "" {
		layout = time.RFC3339Nano
	} else if named, ok := namedLayouts[layout]; ok {
		layout = named
	}
	return t.Format(layout), nil
}

// opaTimeParseNS is time.parse_ns(layout, value).
func opaTimeParseNS(_ *opaEval, args []json.RawMessage) (any, error) {
	layout, value, err := twoStrings(args)
	if err != nil {
		return nil, err
	}
	if named, ok := namedLayouts[layout]; ok {
		layout = named
	}
	t, err := time.Parse(layout, value)
	if err != nil {
		return nil, err
	}
	if t.Before(time.Unix(0, math.MinInt64)) || t.After(time.Unix(0, math.MaxInt64)) {
		return nil, errors.New("time outside of valid range")
	}
	return t.UnixNano(), nil
}

// opaTimeDiff is time.diff(a, b): [years, months, days, hours, minutes, seconds]
// between the two, in the first one's zone, borrowing as OPA does.
func opaTimeDiff(_ *opaEval, args []json.RawMessage) (any, error) {
	t1, _, err := argTime(args, 0)
	if err != nil {
		return nil, err
	}
	t2, _, err := argTime(args, 1)
	if err != nil {
		return nil, err
	}
	t2 = t2.In(t1.Location())
	if t1.After(t2) {
		t1, t2 = t2, t1
	}
	y1, mo1, d1 := t1.Date()
	y2, mo2, d2 := t2.Date()
	h1, mi1, s1 := t1.Clock()
	h2, mi2, s2 := t2.Clock()
	year, month, day := y2-y1, int(mo2-mo1), d2-d1
	hour, minute, sec := h2-h1, mi2-mi1, s2-s1
	if sec < 0 {
		sec += 60
		minute--
	}
	if minute < 0 {
		minute += 60
		hour--
	}
	if hour < 0 {
		hour += 24
		day--
	}
	if day < 0 {
		// The days of t1's month: day 32 normalizes into the next month.
		day += 32 - time.Date(y1, mo1, 32, 0, 0, 0, 0, time.UTC).Day()
		month--
	}
	if month < 0 {
		month += 12
		year--
	}
	return []int{year, month, day, hour, minute, sec}, nil
}

// durationUnitHours are the units time.parse_duration_ns accepts beyond Go's.
var durationUnitHours = map[string]float64{"d": 24, "w": 7 * 24, "y": 365 * 24}

var durationSegment = regexp.MustCompile(`([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h|d|w|y)`)

// parseExtendedDuration is Go's duration syntax with days, weeks and years of 365 days.
func parseExtendedDuration(s string) (any, error) {
	if !strings.ContainsAny(s, "dwy") {
		d, err := time.ParseDuration(s)
		return int64(d), err
	}
	sign, rest := "", s
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		sign, rest = rest[:1], rest[1:]
	}
	var b strings.Builder
	b.WriteString(sign)
	end := 0
	for _, m := range durationSegment.FindAllStringSubmatchIndex(rest, -1) {
		if m[0] != end {
			return nil, fmt.Errorf("time: invalid duration %q", s)
		}
		end = m[1]
		digits, unit := rest[m[2]:m[3]], rest[m[4]:m[5]]
		if h, ok := durationUnitHours[unit]; ok {
			v, err := strconv.ParseFloat(digits, 64)
			if err != nil {
				return nil, fmt.Errorf("time: invalid duration %q", s)
			}
			b.WriteString(strconv.FormatFloat(v*h, 'f', -1, 64) + "h")
			continue
		}
		b.WriteString(digits + unit)
	}
	if end != len(rest) || end == 0 {
		return nil, fmt.Errorf("time: invalid duration %q", s)
	}
	d, err := time.ParseDuration(b.String())
	return int64(d), err
}

func timeFunc(f func(time.Time) any) opaBuiltinFunc {
	return func(_ *opaEval, args []json.RawMessage) (any, error) {
		t, _, err := argTime(args, 0)
		if err != nil {
			return nil, err
		}
		return f(t), nil
	}
}

// opaTimeAddDate is time.add_date(ns, years, months, days).
func opaTimeAddDate(_ *opaEval, args []json.RawMessage) (any, error) {
	ns, err := argInt(args, 0)
	if err != nil {
		return nil, err
	}
	var d [3]int64
	for i := range d {
		if d[i], err = argInt(args, i+1); err != nil {
			return nil, err
		}
	}
	return time.Unix(0, ns).UTC().AddDate(int(d[0]), int(d[1]), int(d[2])).UnixNano(), nil
}

// parseSemver reads a Semantic Version 2.0 string; OPA allows a leading "v".
func parseSemver(s string) (semver.Version, error) {
	return semver.Parse(strings.TrimPrefix(s, "v"))
}

func opaSemverIsValid(_ *opaEval, args []json.RawMessage) (any, error) {
	s, err := argString(args, 0)
	if err != nil {
		return false, nil
	}
	_, err = parseSemver(s)
	return err == nil, nil
}

func opaSemverCompare(_ *opaEval, args []json.RawMessage) (any, error) {
	var vs [2]semver.Version
	for i := range vs {
		s, err := argString(args, i)
		if err != nil {
			return nil, err
		}
		if vs[i], err = parseSemver(s); err != nil {
			return nil, fmt.Errorf("operand %d: %w", i+1, err)
		}
	}
	return vs[0].Compare(vs[1]), nil
}

// opaRangeStep is numbers.range_step(a, b, step): a to b inclusive by step > 0, downwards
// when b < a.
func opaRangeStep(_ *opaEval, args []json.RawMessage) (any, error) {
	var v [3]int64
	var err error
	for i := range v {
		if v[i], err = argInt(args, i); err != nil {
			return nil, err
		}
	}
	a, b, step := v[0], v[1], v[2]
	if step <= 0 {
		return nil, errors.New("step must be a positive number above zero")
	}
	out := []int64{}
	for x := a; (a <= b && x <= b) || (a > b && x >= b); {
		out = append(out, x)
		if len(out) > 1<<20 {
			return nil, errors.New("range too large")
		}
		if a <= b {
			x += step
		} else {
			x -= step
		}
	}
	return out, nil
}
