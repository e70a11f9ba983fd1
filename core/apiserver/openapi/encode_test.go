package openapi

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestJSONStrings(t *testing.T) {
	for _, s := range []string{"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rcr", "\x00\x01\x1f", "<html> & ünïcödé ✓", "bad \xff utf8", "sep \u2028 \u2029"} {
		w := jsonWriter{}
		w.str(s)
		var got string
		if err := json.Unmarshal(w.b, &got); err != nil {
			t.Errorf("%q encodes to invalid JSON %s: %v", s, w.b, err)
			continue
		}
		want, _ := json.Marshal(s)
		var wantS string
		_ = json.Unmarshal(want, &wantS)
		if got != wantS {
			t.Errorf("%q round-trips to %q, want %q", s, got, wantS)
		}
	}
}

// TestSchemaWriterMatchesKubeOpenAPI holds the hand-written schema encoder to
// kube-openapi's own marshaller for every definition either flavour produces.
func TestSchemaWriterMatchesKubeOpenAPI(t *testing.T) {
	gvks := gvksByType(testScheme(t))
	for _, v3 := range []bool{false, true} {
		b := newSchemaBuilder(v3, gvks)
		routes, err := buildRoutes(testScheme(t), testResources())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			for _, op := range r.ops {
				for _, resp := range op.responses {
					if resp.typ != nil {
						b.refName(resp.typ)
					}
				}
			}
		}
		if len(b.defs) < 100 {
			t.Fatalf("only %d definitions", len(b.defs))
		}
		for name, def := range b.defs {
			w := jsonWriter{}
			w.schema(def)
			want, err := def.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var got, exp any
			if err := json.Unmarshal(w.b, &got); err != nil {
				t.Fatalf("v3=%v %s: invalid JSON: %v", v3, name, err)
			}
			if err := json.Unmarshal(want, &exp); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("v3=%v %s:\n got %s\nwant %s", v3, name, w.b, want)
			}
		}
	}
}
