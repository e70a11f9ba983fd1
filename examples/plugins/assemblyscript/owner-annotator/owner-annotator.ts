// owner-annotator: a wasmplane mutate plugin in AssemblyScript. It copies an owner label
// (e.g. "team") into an annotation, warns the client when the label is missing, and
// records the owner as an audit annotation. It is idempotent, so it is safe to reinvoke.
// Same behaviour as examples/plugins/go/owner-annotator.
import { Admission, Kind, Value, Writer, call, pointerEscape, quote } from "../../../../sdk/assemblyscript/assembly/index";
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free } from "../../../../sdk/assemblyscript/assembly/index";

// The configuration, read once per instance by configure.
let label = "";
let annotation = "";

function onConfigure(req: Value, w: Writer): void {
  const config = req.get("config");
  const l = config.get("label");
  const a = config.get("annotation");
  if ((l.kind != Kind.Missing && l.kind != Kind.Null && !l.isString()) || (a.kind != Kind.Missing && a.kind != Kind.Null && !a.isString())) {
    w.error('config "label" and "annotation" must be strings');
    return;
  }
  label = l.str();
  annotation = a.str();
  if (label.length == 0 || annotation.length == 0) {
    w.error('config needs "label" and "annotation"');
    return;
  }
  w.raw("{}");
}

/** lowerASCII lowers A-Z only: kinds are ASCII identifiers, and String#toLowerCase would
 * pull the Unicode case tables into the module (~8 KB). */
function lowerASCII(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    out += String.fromCharCode(c >= 0x41 && c <= 0x5a ? c | 0x20 : c);
  }
  return out;
}

function onMutate(req: Value, w: Writer): void {
  const a = new Admission();
  const op = req.get("operation").str();
  if (op != "CREATE" && op != "UPDATE") {
    a.allow(w);
    return;
  }
  const obj = req.get("object");
  if (obj.kind != Kind.Object) {
    w.error("object is not a JSON object");
    return;
  }
  const meta = obj.get("metadata");
  const owner = meta.get("labels").get(label).str();
  if (owner.length == 0) {
    a.warn(lowerASCII(req.get("kind").get("kind").str()) + " " + quote(req.get("name").str()) + " has no " + quote(label) + " label: annotation " + annotation + " not set");
    a.allow(w);
    return;
  }
  a.annotate("owner", owner);
  const annotations = meta.get("annotations");
  if (annotations.get(annotation).str() != owner) {
    if (annotations.kind != Kind.Object) a.patch.add("/metadata/annotations", "{}");
    a.patch.add("/metadata/annotations/" + pointerEscape(annotation), quote(owner));
  }
  a.allow(w);
}

export function configure(ptr: usize, len: i32): u64 {
  return call(ptr, len, onConfigure);
}

export function mutate(ptr: usize, len: i32): u64 {
  return call(ptr, len, onMutate);
}
