package langs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// ascReaderAS is a plugin that reports what the AssemblyScript SDK's reader finds in its
// request: each line of its answer's message is one lookup and what it gave.
const ascReaderAS = `import { Kind, Value, Writer, call } from "SDK";
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free } from "SDK";

const KINDS = ["missing", "null", "bool", "number", "string", "array", "object"];

function show(v: Value): string {
  return KINDS[<i32>v.kind] + (v.exists ? " " + v.raw() : "");
}

function onValidate(req: Value, w: Writer): void {
  const out: string[] = [];
  const a = req.get("a");
  const b = a.get("b");
  out.push("a.b " + show(b));
  let walk = "";
  for (let c = b.first(); c.exists; c = c.next()) walk += "[" + show(c) + "]";
  out.push("walk " + walk);
  out.push("a.b[1].c " + b.first().next().get("c").str());
  out.push("a.b[2] " + b.first().next().next().str());
  out.push("a.b[3] " + show(b.first().next().next().next()));
  out.push("a.b.next " + show(b.next()));
  out.push("has key " + (a.has("key") ? "yes" : "no") + ", has b " + (a.has("b") ? "yes" : "no") + ", has nope " + (a.has("nope") ? "yes" : "no"));
  out.push("a.key " + a.get("key").str());
  out.push("a.keys " + a.keys().join(","));
  out.push("a.items " + a.items().length.toString());
  out.push("a.e " + show(a.get("e")) + ", first " + show(a.get("e").first()) + ", keys " + a.get("e").keys().length.toString());
  out.push("a.f " + show(a.get("f")) + ", first " + show(a.get("f").first()) + ", items " + a.get("f").items().length.toString());
  const s = req.get("s");
  out.push("s " + s.str() + " is café " + (s.is("café") ? "yes" : "no") + " is cafe " + (s.is("cafe") ? "yes" : "no") + " is caf " + (s.is("caf") ? "yes" : "no"));
  out.push("plain is " + (req.get("p").is("plain") ? "yes" : "no") + " " + (req.get("p").is("plai") ? "yes" : "no") + " " + (req.get("p").is("plainer") ? "yes" : "no"));
  out.push("n " + req.get("n").num().toString());
  out.push("t " + show(req.get("t")) + ", z " + show(req.get("z")));
  out.push("missing " + show(req.get("nope").get("x").first()));
  // More Values than the reusable set holds, all read after they are all made.
  const many: Value[] = [];
  for (let c = req.get("many").first(); c.exists; c = c.next()) many.push(c);
  let sum = 0.0;
  for (let i = 0; i < many.length; i++) sum += many[i].num() * <f64>(i + 1);
  out.push("many " + many.length.toString() + " " + sum.toString());
  out.push("items " + req.get("many").items().length.toString());
  w.raw('{"allowed":true,"message":');
  w.str(out.join("\n"));
  w.raw("}");
}

export function validate(ptr: usize, len: i32): u64 {
  return call(ptr, len, onValidate);
}
`

// TestASCReader checks the AssemblyScript SDK's in-place reader through the host: paths
// into open objects, walks of arrays, escaped keys and strings, empty containers, more
// Values in one call than the reader reuses, and the same lookups again on a second
// request (the Values of the first are reused).
func TestASCReader(t *testing.T) {
	t.Parallel()
	p := mustLoad(t, hostRuntime(t), "reader", buildASSource(t, "reader", ascReaderAS), `{}`)
	var many []string
	sum := 0
	for i := range 100 {
		many = append(many, strings.Repeat(" ", i%3)+strconv.Itoa(i%10))
		sum += (i % 10) * (i + 1)
	}
	req := func(x string) string {
		return `{"uid":"u1","skipped":{"deep":[{"x":"}]\"{"},[[]],{}]},"a":{"b":[1, {"c":"` + x + `"} ,"y\"z"],"k\u0065y":"v","e":{ },"f":[ ]},` +
			`"s":"caf\u00e9","p":"plain","n":-1.5e3,"t":true,"z":null,"many":[` + strings.Join(many, ",") + `]}`
	}
	want := func(x string) string {
		return strings.Join([]string{
			`a.b array [1, {"c":"` + x + `"} ,"y\"z"]`,
			`walk [number 1][object {"c":"` + x + `"}][string "y\"z"]`,
			`a.b[1].c ` + x,
			`a.b[2] y"z`,
			`a.b[3] missing`,
			`a.b.next missing`,
			`has key yes, has b yes, has nope no`,
			`a.key v`,
			`a.keys b,key,e,f`,
			`a.items 4`,
			`a.e object { }, first missing, keys 0`,
			`a.f array [ ], first missing, items 0`,
			`s café is café yes is cafe no is caf no`,
			`plain is yes no no`,
			`n -1500.0`,
			`t bool true, z null null`,
			`missing missing`,
			`many 100 ` + strconv.Itoa(sum) + `.0`,
			`items 100`,
		}, "\n")
	}
	for _, x := range []string{"x", "second"} {
		out, err := p.Call(context.Background(), "validate", []byte(req(x)))
		if err != nil {
			t.Fatal(err)
		}
		var resp struct{ Message string }
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Message != want(x) {
			t.Errorf("request with %q:\n got %s\nwant %s", x, resp.Message, want(x))
		}
	}
}

// TestASCMalformedRequests sends the AssemblyScript require-labels example requests that
// are not JSON: the SDK reads a request only as far as the handler looks (it does not
// walk it first), yet a request whose outer brackets do not match, or whose text is
// broken where a lookup passes, fails the call with an error that says where. Broken
// text the handler never reaches is not looked at.
func TestASCMalformedRequests(t *testing.T) {
	t.Parallel()
	p := mustLoad(t, hostRuntime(t), "require-labels", wasmtest.AssemblyScript(t, "require-labels"), `{"labels":["team"]}`)
	const pod = `{"metadata":{"labels":{"team":"a"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}`
	tests := []struct {
		name, req string
		err       string // part of the guest error; "" = allowed
	}{
		{"valid", `{"uid":"u","operation":"CREATE","object":` + pod + `,"kind":{"kind":"Pod"}}`, ""},
		{"truncated at the end", `{"uid":"u","operation":"CREATE","object":` + pod + `,"kind":{"kind":"Pod"`, "request is not valid JSON (at byte 155)"},
		{"empty", ``, "request is not valid JSON (at byte 0)"},
		{"blank", " \n ", "request is not valid JSON"},
		{"truncated", `{"uid":"u","operation":"CREATE","object":{"metadata":{"labels":{"team":"a"}}`, "request is not valid JSON (at byte 41)"}, // "object" never ends: found skipping it to "kind"
		{"not an object's end", `{"operation":"CREATE"]`, "request is not valid JSON"},
		{"scalar with junk", `"CREATE" x`, "request is not valid JSON (at byte 0)"},
		{"comma missing before the member read", `{"uid":"u" "operation":"CREATE"}`, "request is not valid JSON (at byte 11)"},
		{"colon missing on the path", `{"operation":"CREATE","object":{"metadata" {"labels":{"team":"a"}}},"kind":{"kind":"Pod"}}`, "request is not valid JSON (at byte 43)"},
		{"unterminated string passed over", `{"uid":"u,"operation":"CREATE"}`, "request is not valid JSON"},
		{"comma missing between containers", `{"operation":"CREATE","object":{"metadata":{"labels":{"team":"a"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"} {"name":"d","image":"nginx:1.27"}]}},"kind":{"kind":"Pod"}}`, "request is not valid JSON"},
		{"broken after what is read", `{"operation":"DELETE","rest":{]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := p.Call(context.Background(), "validate", []byte(tt.req))
			if tt.err == "" {
				if err != nil || !strings.Contains(string(out), `"allowed":true`) {
					t.Fatalf("got %s, %v; want allowed", out, err)
				}
				return
			}
			if !errors.Is(err, wasm.ErrGuest) || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("got %s, %v; want a guest error containing %q", out, err, tt.err)
			}
		})
	}
}
