// probe answers what the AssemblyScript SDK's JSON reader finds in a document: the
// request is {"doc": <any JSON>, "path": [<member name or element index>, ...]} and the
// answer {"raw": <the value's text>, "str": <its decoded string, for a string>} or
// {"missing": true}. sdk/readers_test.go compares it with Go's reading.
import { Kind, MISSING, Value, Writer, call } from "../assemblyscript/assembly/index";
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free } from "../assemblyscript/assembly/index";

function element(v: Value, n: i32): Value {
  if (v.kind != Kind.Array) return MISSING;
  let e = v.first();
  for (let i = 0; i < n && e.exists; i++) e = e.next();
  return e;
}

function onValidate(req: Value, w: Writer): void {
  let v = req.get("doc");
  const path = req.get("path");
  for (let s = path.first(); s.exists; s = s.next()) {
    v = s.isString() ? v.get(s.str()) : element(v, <i32>s.num());
  }
  if (!v.exists) {
    w.raw('{"missing":true}');
    return;
  }
  w.raw('{"raw":');
  w.str(v.raw());
  if (v.isString()) {
    w.raw(',"str":');
    w.str(v.str());
  }
  w.raw("}");
}

export function validate(ptr: usize, len: i32): u64 {
  return call(ptr, len, onValidate);
}
