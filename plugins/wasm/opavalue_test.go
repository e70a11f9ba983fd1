package wasm

import (
	"encoding/json"
	"testing"
)

func TestParseRegoValue(t *testing.T) {
	cases := []struct {
		text    string
		want    string // regoText of the parsed value; "" for an error
		isSet   bool
		wantErr bool
	}{
		{text: `{1, 2, "a"}`, want: `{1,2,"a"}`, isSet: true},
		{text: `set()`, want: `set()`, isSet: true},
		{text: `{1, 1.0, 1}`, want: `{1}`, isSet: true},
		{text: `{"a": {"b"}, "c": [1, null, true, false]}`, want: `{"a":{"b"},"c":[1,null,true,false]}`},
		{text: ` [ "x\"y" , -1.5e3 ] `, want: `["x\"y",-1.5e3]`},
		{text: `{}`, want: `{}`},
		{text: `{1: "a"}`, wantErr: true},
		{text: `[1, 2`, wantErr: true},
		{text: `"open`, wantErr: true},
		{text: `1 2`, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			v, err := parseRegoValue([]byte(c.text))
			if c.wantErr {
				if err == nil {
					t.Fatalf("parsed as %s, want an error", regoText(v))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := regoText(v); got != c.want {
				t.Errorf("regoText = %s, want %s", got, c.want)
			}
			if _, ok := v.(opaSet); ok != c.isSet {
				t.Errorf("set = %v, want %v", ok, c.isSet)
			}
		})
	}
}

func TestRegoEqualAndOrder(t *testing.T) {
	cases := []struct {
		a, b  any
		equal bool
		cmp   int
	}{
		{json.Number("1"), json.Number("1.0"), true, 0},
		{json.Number("9"), json.Number("10"), false, -1},
		{opaSet{"a", "b"}, opaSet{"b", "a"}, true, 0},
		{map[string]any{"x": opaSet{json.Number("1")}}, map[string]any{"x": opaSet{json.Number("1.0")}}, true, 0},
		{nil, false, false, -1},
		{"b", []any{"a"}, false, -1},
		{[]any{"a"}, []any{"a", "b"}, false, -1},
	}
	for _, c := range cases {
		if got := regoEqual(c.a, c.b); got != c.equal {
			t.Errorf("regoEqual(%s, %s) = %v", regoText(c.a), regoText(c.b), got)
		}
		if got := regoCompare(c.a, c.b); (got < 0) != (c.cmp < 0) || (got == 0) != (c.cmp == 0) {
			t.Errorf("regoCompare(%s, %s) = %d, want sign of %d", regoText(c.a), regoText(c.b), got, c.cmp)
		}
	}
}
