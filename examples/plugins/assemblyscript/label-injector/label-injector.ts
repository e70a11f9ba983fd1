// label-injector: a wasmplane mutate plugin in AssemblyScript. It adds the configured
// labels to every created or updated object, and the configured toleration to every pod,
// as a JSON patch. Same behaviour as examples/plugins/go/label-injector.
import { Admission, Kind, Value, Writer, call, pointerEscape, quote } from "../../../../sdk/assemblyscript/assembly/index";
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free } from "../../../../sdk/assemblyscript/assembly/index";

// The configuration, read once per instance by configure: label keys and values in
// config order, and the toleration (its JSON text and its four compared fields).
let keys: string[] = [];
let values: string[] = [];
let toleration: string = "";
let tolKey = "";
let tolOperator = "";
let tolValue = "";
let tolEffect = "";

const tolerationFields = ["key", "operator", "value", "effect"];

function onConfigure(req: Value, w: Writer): void {
  const config = req.get("config");
  const labels = config.get("labels");
  if (labels.kind != Kind.Missing && labels.kind != Kind.Null && labels.kind != Kind.Object) {
    w.error("config.labels must be an object of strings");
    return;
  }
  const ks = labels.keys();
  const vs = labels.items();
  for (let i = 0; i < vs.length; i++) {
    if (!vs[i].isString()) {
      w.error("config.labels must be an object of strings");
      return;
    }
    keys.push(ks[i]);
    values.push(vs[i].str());
  }
  const t = config.get("toleration");
  if (t.kind == Kind.Object) {
    // Re-encoded field by field, in the Go twin's order, leaving out empty ones.
    let text = "";
    for (let i = 0; i < tolerationFields.length; i++) {
      const f = t.get(tolerationFields[i]);
      if (f.kind != Kind.Missing && f.kind != Kind.Null && !f.isString()) {
        w.error("config.toleration." + tolerationFields[i] + " must be a string");
        return;
      }
      const s = f.str();
      if (s.length == 0) continue;
      text += (text.length > 0 ? "," : "") + quote(tolerationFields[i]) + ":" + quote(s);
    }
    const secs = t.get("tolerationSeconds");
    if (secs.kind == Kind.Number) text += (text.length > 0 ? "," : "") + '"tolerationSeconds":' + secs.raw();
    toleration = "{" + text + "}";
    tolKey = t.get("key").str();
    tolOperator = t.get("operator").str();
    tolValue = t.get("value").str();
    tolEffect = t.get("effect").str();
  } else if (t.kind != Kind.Missing && t.kind != Kind.Null) {
    w.error("config.toleration must be an object");
    return;
  }
  w.raw("{}");
}

/** tolerated tells whether the list already holds the configured toleration. */
function tolerated(list: Value): bool {
  const ts = list.items();
  for (let i = 0; i < ts.length; i++) {
    const t = ts[i];
    if (t.get("key").str() == tolKey && t.get("operator").str() == tolOperator && t.get("value").str() == tolValue && t.get("effect").str() == tolEffect) return true;
  }
  return false;
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
  const have = obj.get("metadata").get("labels");
  if (have.kind != Kind.Object && keys.length > 0) a.patch.add("/metadata/labels", "{}");
  for (let i = 0; i < keys.length; i++) {
    const cur = have.get(keys[i]);
    if (cur.str() != values[i]) a.patch.add("/metadata/labels/" + pointerEscape(keys[i]), quote(values[i]));
  }
  if (toleration.length > 0 && req.get("kind").get("kind").str() == "Pod") {
    const list = obj.get("spec").get("tolerations");
    if (list.kind != Kind.Array) a.patch.add("/spec/tolerations", "[" + toleration + "]");
    else if (!tolerated(list)) a.patch.add("/spec/tolerations/-", toleration);
  }
  a.allow(w);
}

export function configure(ptr: usize, len: i32): u64 {
  return call(ptr, len, onConfigure);
}

export function mutate(ptr: usize, len: i32): u64 {
  return call(ptr, len, onMutate);
}
