package wasm

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

var osReadFile = os.ReadFile

// FuzzDecodeAnswers feeds arbitrary bytes to every decoder of guest answers: none may
// panic, an accepted answer must be a JSON object, and the fast score path must agree
// with encoding/json (a packed answer, ABI §7.7, with its plain little-endian reading).
func FuzzDecodeAnswers(f *testing.F) {
	for _, s := range []string{
		`{"allowed":true}`, `{"allowed":false,"code":403,"message":"no"}`, `{"error":"boom"}`,
		`{"authenticated":true,"user":{"username":"a","groups":["g"]}}`, `{"authenticated":false}`,
		`{"patch":[{"op":"add","path":"/a","value":1}],"allowed":true}`, `{"object":{"a":1}}`,
		`{"pass":[true,false],"reasons":["","x"]}`, `{"scores":[1,-2,3]}`, `{"scores":[]}`,
		`{"scores":[01]}`, `{"scores":[1,2]} `, `{"scores":[99999999999999999999]}`,
		`[]`, `null`, `"x"`, ``, `{`, `{"error":""}`, `{"allowed":true}{}`, "\xff{}",
		// packed answers (ABI §7.7)
		abi.PackedMagic + "\x02\x00\x00\x00\x01\x00", abi.PackedMagic + "\x02\x00\x00\x00\x01\x00{\"1\":\"x\"}",
		abi.PackedMagic + "\x02\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff",
		abi.PackedMagic + "\xff\xff\xff\xff", "\x00",
	} {
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		nodes := int(n % 4)
		if r, err := decodeAuthenticate(b); err == nil && (r.Authenticated && r.User.Username == "") {
			t.Fatalf("accepted authenticated answer without user: %q", b)
		}
		_, _ = decodeMutate(b)
		_, _ = decodeValidate(b)
		_, _ = decodeInitialize(b)
		if r, err := decodeFilter(b, nodes); err == nil && len(r.Pass) != nodes {
			t.Fatalf("filter accepted %d results for %d nodes", len(r.Pass), nodes)
		}
		scores, err := decodeScores(b, nodes, nil)
		if err == nil {
			if len(scores) != nodes {
				t.Fatalf("score accepted %d scores for %d nodes", len(scores), nodes)
			}
			var ref abi.ScoreResponse
			var jerr error
			if isPacked(b) {
				for i := range nodes {
					ref.Scores = append(ref.Scores, int64(binary.LittleEndian.Uint64(b[abi.PackedHeader+8*i:])))
				}
			} else {
				jerr = json.Unmarshal(b, &ref)
			}
			if jerr != nil || !slices.Equal(ref.Scores, scores) {
				t.Fatalf("decodeScores(%q) = %v, reference says %v (%v)", b, scores, ref.Scores, jerr)
			}
		}
		if checkEnvelope(b) == nil {
			var v map[string]any
			if json.Unmarshal(b, &v) != nil {
				t.Fatalf("envelope accepted a non-object %q", b)
			}
		}
	})
}
