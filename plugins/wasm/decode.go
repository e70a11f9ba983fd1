package wasm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// Decoding of guest answers (ABI §4, §7). Every function here must reject, never panic
// on, arbitrary bytes: they are fuzzed.

// guestError is an answer that carried the ABI "error" envelope.
type guestError struct{ msg string }

func (e guestError) Error() string { return e.msg }

type envelope struct {
	Error *string `json:"error"`
}

func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// checkEnvelope verifies that b is one JSON object and not an error envelope.
func checkEnvelope(b []byte) error {
	if !isObject(b) {
		return errors.New("answer is not a JSON object")
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("answer is not valid JSON: %w", err)
	}
	if env.Error != nil && *env.Error != "" {
		return guestError{*env.Error}
	}
	return nil
}

// decodeResponse decodes an answer object into v (an abi.*Response with an Error field)
// and turns a non-empty "error" into a guestError.
func decodeResponse(b []byte, v any) error {
	if !isObject(b) {
		return errors.New("answer is not a JSON object")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("answer does not decode: %w", err)
	}
	var msg string
	switch r := v.(type) {
	case *abi.ConfigureResponse:
		msg = r.Error
	case *abi.AuthenticateResponse:
		msg = r.Error
	case *abi.MutateResponse:
		msg = r.Error
	case *abi.ValidateResponse:
		msg = r.Error
	case *abi.InitializeResponse:
		msg = r.Error
	case *abi.FilterResponse:
		msg = r.Error
	case *abi.ScoreResponse:
		msg = r.Error
	}
	if msg != "" {
		return guestError{msg}
	}
	return nil
}

// required decodes only the presence of members that plain Go fields cannot tell from
// their zero value.
type required struct {
	Authenticated *bool `json:"authenticated"`
	Allowed       *bool `json:"allowed"`
}

func decodeAuthenticate(b []byte) (*abi.AuthenticateResponse, error) {
	var r abi.AuthenticateResponse
	if err := decodeResponse(b, &r); err != nil {
		return nil, err
	}
	var q required
	_ = json.Unmarshal(b, &q) // b decoded above, so this cannot fail
	if q.Authenticated == nil {
		return nil, errors.New(`answer lacks "authenticated"`)
	}
	if r.Authenticated && (r.User == nil || r.User.Username == "") {
		return nil, errors.New(`authenticated answer lacks "user.username"`)
	}
	return &r, nil
}

func decodeMutate(b []byte) (*abi.MutateResponse, error) {
	var r abi.MutateResponse
	if err := decodeResponse(b, &r); err != nil {
		return nil, err
	}
	var q required
	_ = json.Unmarshal(b, &q)
	if q.Allowed == nil {
		return nil, errors.New(`answer lacks "allowed"`)
	}
	for i, op := range r.Patch {
		switch op.Op {
		case "add", "remove", "replace", "move", "copy", "test":
		default:
			return nil, fmt.Errorf("patch[%d]: unknown op %q", i, op.Op)
		}
	}
	return &r, nil
}

func decodeValidate(b []byte) (*abi.ValidateResponse, error) {
	var r abi.ValidateResponse
	if err := decodeResponse(b, &r); err != nil {
		return nil, err
	}
	var q required
	_ = json.Unmarshal(b, &q)
	if q.Allowed == nil {
		return nil, errors.New(`answer lacks "allowed"`)
	}
	return &r, nil
}

func decodeInitialize(b []byte) (*abi.InitializeResponse, error) {
	var r abi.InitializeResponse
	if err := decodeResponse(b, &r); err != nil {
		return nil, err
	}
	if len(r.Object) > 0 && !isObject(r.Object) && string(r.Object) != "null" {
		return nil, errors.New(`"object" is not a JSON object`)
	}
	if string(r.Object) == "null" {
		r.Object = nil
	}
	return &r, nil
}

func decodeFilter(b []byte, nodes int) (*abi.FilterResponse, error) {
	if isPacked(b) {
		return decodePackedFilter(b, nodes)
	}
	var r abi.FilterResponse
	if err := decodeResponse(b, &r); err != nil {
		return nil, err
	}
	if r.Pass == nil {
		return nil, errors.New(`answer lacks "pass"`)
	}
	if len(r.Pass) != nodes {
		return nil, fmt.Errorf(`"pass" has %d entries for %d nodes`, len(r.Pass), nodes)
	}
	if r.Reasons != nil && len(r.Reasons) != nodes {
		return nil, fmt.Errorf(`"reasons" has %d entries for %d nodes`, len(r.Reasons), nodes)
	}
	return &r, nil
}

// decodeScores reads a score answer. The exact shape the SDKs write,
// {"scores":[n,n,…]}, is parsed directly (5,000 scores cost ~40 µs less than
// encoding/json); anything else goes through encoding/json.
func decodeScores(b []byte, nodes int, dst []int64) ([]int64, error) {
	if isPacked(b) {
		return decodePackedScores(b, nodes, dst[:0])
	}
	if s, ok := fastScores(b, dst[:0]); ok {
		if len(s) != nodes {
			return nil, fmt.Errorf(`"scores" has %d entries for %d nodes`, len(s), nodes)
		}
		return s, nil
	}
	var r abi.ScoreResponse
	if err := decodeResponse(b, &r); err != nil {
		return nil, err
	}
	if r.Scores == nil {
		return nil, errors.New(`answer lacks "scores"`)
	}
	if len(r.Scores) != nodes {
		return nil, fmt.Errorf(`"scores" has %d entries for %d nodes`, len(r.Scores), nodes)
	}
	return r.Scores, nil
}

const scoresPrefix = `{"scores":[`

func fastScores(b []byte, dst []int64) ([]int64, bool) {
	if !bytes.HasPrefix(b, []byte(scoresPrefix)) {
		return nil, false
	}
	i := len(scoresPrefix)
	if i+2 == len(b) && b[i] == ']' && b[i+1] == '}' {
		return dst, true
	}
	for i < len(b) {
		neg := false
		if b[i] == '-' {
			neg = true
			i++
		}
		start := i
		var n int64
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			n = n*10 + int64(b[i]-'0')
			i++
		}
		// Leading zeros and more than 18 digits (overflow) are left to encoding/json.
		if i == start || i-start > 18 || (b[start] == '0' && i-start > 1) {
			return nil, false
		}
		if neg {
			n = -n
		}
		dst = append(dst, n)
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i+2 == len(b) && b[i] == ']' && b[i+1] == '}' {
			return dst, true
		}
		return nil, false
	}
	return nil, false
}

func encodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return b, nil
}

// isPacked tells a packed answer (ABI §7.7) from a JSON one, which never starts with NUL.
func isPacked(b []byte) bool { return len(b) > 0 && b[0] == abi.PackedMagic[0] }

// packedCount checks the header of a packed answer and returns its payload.
func packedCount(b []byte, nodes int) ([]byte, error) {
	if len(b) < abi.PackedHeader || string(b[:len(abi.PackedMagic)]) != abi.PackedMagic {
		return nil, errors.New("packed answer has a bad header")
	}
	if n := binary.LittleEndian.Uint32(b[len(abi.PackedMagic):]); uint64(n) != uint64(nodes) {
		return nil, fmt.Errorf("packed answer has %d entries for %d nodes", n, nodes)
	}
	return b[abi.PackedHeader:], nil
}

// decodePackedScores reads a packed score answer: one little-endian int64 per node.
func decodePackedScores(b []byte, nodes int, dst []int64) ([]int64, error) {
	p, err := packedCount(b, nodes)
	if err != nil {
		return nil, err
	}
	if len(p) != 8*nodes {
		return nil, fmt.Errorf("packed score answer has %d bytes of scores for %d nodes", len(p), nodes)
	}
	start := len(dst)
	dst = slices.Grow(dst, nodes)[:start+nodes]
	for i := range dst[start:] {
		dst[start+i] = int64(binary.LittleEndian.Uint64(p[8*i:]))
	}
	return dst, nil
}

// decodePackedFilter reads a packed filter answer: one byte per node (1 pass, 0 fail),
// then optionally a JSON object of reasons keyed by node index.
func decodePackedFilter(b []byte, nodes int) (*abi.FilterResponse, error) {
	p, err := packedCount(b, nodes)
	if err != nil {
		return nil, err
	}
	if len(p) < nodes {
		return nil, fmt.Errorf("packed filter answer has %d flags for %d nodes", len(p), nodes)
	}
	r := &abi.FilterResponse{Pass: make([]bool, nodes)}
	for i, c := range p[:nodes] {
		switch c {
		case 0:
		case 1:
			r.Pass[i] = true
		default:
			return nil, fmt.Errorf("packed filter answer has flag %d for node %d", c, i)
		}
	}
	if rest := p[nodes:]; len(rest) > 0 {
		var reasons map[string]string
		if err := json.Unmarshal(rest, &reasons); err != nil {
			return nil, fmt.Errorf("packed filter reasons: %w", err)
		}
		r.Reasons = make([]string, nodes)
		for k, v := range reasons {
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= nodes {
				return nil, fmt.Errorf("packed filter reason for node %q of %d", k, nodes)
			}
			r.Reasons[i] = v
		}
	}
	return r, nil
}
