//go:build wasm

package jsonview

import (
	"math/rand/v2"
	"testing"
)

// TestScannersAgainstGo: the WebAssembly scanners answer as the Go ones on random JSON,
// broken JSON (cut short, a byte changed) included, at every position and for every key
// of every object in it. It runs in WebAssembly only (TestUnderWebAssembly runs it).
func TestScannersAgainstGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 1000 {
		doc := randomValue(rng, nil, 0)
		docs := [][]byte{doc, doc[:rng.IntN(len(doc)+1)]}
		broken := append([]byte(nil), doc...)
		broken[rng.IntN(len(broken))] = `"\{}[],: x`[rng.IntN(10)]
		docs = append(docs, broken)
		for _, b := range docs {
			for i := 0; i <= len(b); i++ {
				wantEnd, wantOK := skipValueGo(b, i)
				if end := skipAsm(b, i); (end >= 0) != wantOK || wantOK && end != wantEnd {
					t.Fatalf("doc %d: skipAsm(%q, %d) = %d, want %d, %v", n, b, i, end, wantEnd, wantOK)
				}
			}
			keys := []string{"", "nope", "k", "é"}
			for i := 0; i < len(b); i++ {
				if b[i] == '"' {
					if end, ok := skipString(b, i); ok {
						keys = append(keys, string(b[i+1:end-1]))
					}
				}
			}
			for i := 0; i < len(b); i++ {
				if b[i] != '{' {
					continue
				}
				for _, key := range keys {
					wantStart, wantEnd := getMemberGo(b[i:], key)
					start, end := getAsm(b[i:], key)
					if start == -2 {
						start, end = getMemberGo(b[i:], key)
					}
					if start != wantStart || start >= 0 && end != wantEnd {
						t.Fatalf("doc %d: getAsm(%q, %q) = %d, %d, want %d, %d", n, b[i:], key, start, end, wantStart, wantEnd)
					}
				}
			}
			for i := 0; i < len(b); i++ {
				end, ok := skipValueGo(b, i)
				if !ok {
					continue
				}
				for _, s := range keys {
					want := isGo(b[i:end], s)
					if got := isAsm(b[i:end], s); got == -2 && isGo(b[i:end], s) != want || got != -2 && (got == 1) != want {
						t.Fatalf("doc %d: isAsm(%q, %q) = %d, want %v", n, b[i:end], s, got, want)
					}
				}
			}
		}
	}
}

// TestAsmLeavesOnlyEscapesToGo: getAsm and isAsm hand a question to the Go code only
// when a key they pass, or the string, has escapes or bytes outside ASCII.
func TestAsmLeavesOnlyEscapesToGo(t *testing.T) {
	tests := []struct {
		doc, key   string
		start, end int
	}{
		{`{"a":1,"b":{"c":[1,"]"]},"d":"x"}`, "d", 29, 32},
		{`{"a":1,"b":{"c":[1,"]"]},"d":"x"}`, "b", 11, -1},
		{`{"a":1,"b":{"c":[1,"]"]},"d":"x"}`, "e", -1, -1},
		{`{"a":"x`, "a", 5, -2},
		{` {"a":1}`, "a", -1, -1},
		{`{ "a" : 1 }`, "a", 8, 9},
		{`{"\u0061":1,"a":2}`, "a", -2, -1},
		{`{"a":1,"é":2}`, "a", 5, 6},
		{`{"a":1,"é":2}`, "b", -2, -1},
	}
	for _, tt := range tests {
		if start, end := getAsm([]byte(tt.doc), tt.key); start != tt.start || start >= 0 && end != tt.end {
			t.Errorf("getAsm(%q, %q) = %d, %d, want %d, %d", tt.doc, tt.key, start, end, tt.start, tt.end)
		}
	}
	strs := []struct {
		q, s string
		want int
	}{
		{`"CREATE"`, "CREATE", 1},
		{`"CREATE"`, "UPDATE", 0},
		{`"CREATE"`, "CREAT", 0},
		{`"C"`, "", 0},
		{`""`, "", 1},
		{`7`, "7", 0},
		{`"caf\u00e9"`, "café", -2},
		{`"café"`, "café", -2},
	}
	for _, tt := range strs {
		if got := isAsm([]byte(tt.q), tt.s); got != tt.want {
			t.Errorf("isAsm(%q, %q) = %d, want %d", tt.q, tt.s, got, tt.want)
		}
	}
}

// randomValue appends a random JSON value to b: nested objects and arrays, strings with
// escapes and non-ASCII bytes, numbers, literals and whitespace.
func randomValue(rng *rand.Rand, b []byte, depth int) []byte {
	space := func() {
		for rng.IntN(4) == 0 {
			b = append(b, " \t\n\r"[rng.IntN(4)])
		}
	}
	space()
	switch k := rng.IntN(8); {
	case k < 2 && depth < 4:
		b = append(b, '{')
		for i := range rng.IntN(5) {
			if i > 0 {
				b = append(b, ',')
			}
			space()
			b = randomString(rng, b)
			space()
			b = append(b, ':')
			b = randomValue(rng, b, depth+1)
		}
		space()
		b = append(b, '}')
	case k < 4 && depth < 4:
		b = append(b, '[')
		for i := range rng.IntN(5) {
			if i > 0 {
				b = append(b, ',')
			}
			b = randomValue(rng, b, depth+1)
		}
		space()
		b = append(b, ']')
	case k < 6:
		b = randomString(rng, b)
	default:
		b = append(b, []string{"0", "-12.5e3", "true", "false", "null", "7"}[rng.IntN(6)]...)
	}
	space()
	return b
}

func randomString(rng *rand.Rand, b []byte) []byte {
	b = append(b, '"')
	for range rng.IntN(12) {
		switch rng.IntN(12) {
		case 0:
			b = append(b, `\"`...)
		case 1:
			b = append(b, `\\`...)
		case 2:
			b = append(b, `\u00e9`...)
		case 3:
			b = append(b, "é"...)
		case 4:
			b = append(b, "{}[],:"[rng.IntN(6)])
		default:
			b = append(b, byte('a'+rng.IntN(3)))
		}
	}
	return append(b, '"')
}
