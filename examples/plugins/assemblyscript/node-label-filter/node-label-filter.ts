// node-label-filter: a wasmplane filter plugin in AssemblyScript. A pod fits only on
// nodes that carry the label named in config.label (with one of config.values, when
// values are given). Same behaviour as examples/plugins/go/node-label-filter.
import { Value, Writer, call, quote } from "../../../../sdk/assemblyscript/assembly/index";
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free } from "../../../../sdk/assemblyscript/assembly/index";

let label = "";
let values: string[] = [];

function onConfigure(req: Value, w: Writer): void {
  const cfg = req.get("config");
  label = cfg.get("label").str();
  if (label.length == 0) {
    w.error("config.label is required");
    return;
  }
  const list = cfg.get("values");
  const items = list.items();
  for (let i = 0; i < items.length; i++) {
    if (!items[i].isString()) {
      w.error("config.values must be a list of strings");
      return;
    }
    values.push(items[i].str());
  }
  w.raw("{}");
}

function onFilter(req: Value, w: Writer): void {
  const nodes = req.get("nodes").items();
  const reasons: string[] = [];
  w.raw('{"pass":[');
  for (let i = 0; i < nodes.length; i++) {
    const v = nodes[i].get("metadata").get("labels").get(label);
    let why = "";
    if (!v.isString()) {
      why = "node lacks label " + quote(label);
    } else if (values.length > 0 && !values.includes(v.str())) {
      why = "node label " + label + "=" + v.str() + " is not one of [" + values.join(" ") + "]";
    }
    if (i > 0) w.byte(0x2c);
    w.bool(why.length == 0);
    reasons.push(why);
  }
  w.raw('],"reasons":[');
  for (let i = 0; i < reasons.length; i++) {
    if (i > 0) w.byte(0x2c);
    w.str(reasons[i]);
  }
  w.raw("]}");
}

export function configure(ptr: usize, len: i32): u64 {
  return call(ptr, len, onConfigure);
}

export function filter(ptr: usize, len: i32): u64 {
  return call(ptr, len, onFilter);
}
