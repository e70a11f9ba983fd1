// label-score: a wasmplane score plugin in AssemblyScript. It prefers nodes by the numeric
// value of the label named in config.label (0–100; missing or invalid is 0). Same
// behaviour as examples/plugins/go/label-score.
import { Value, Writer, call } from "../../../../sdk/assemblyscript/assembly/index";
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free } from "../../../../sdk/assemblyscript/assembly/index";

let label = "";

function onConfigure(req: Value, w: Writer): void {
  label = req.get("config").get("label").str();
  if (label.length == 0) {
    w.error("config.label is required");
    return;
  }
  w.raw("{}");
}

/** labelScore turns a label value into a score: its integer value clamped to 0–100. */
function labelScore(v: string): i64 {
  let n: i64 = 0;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return 0;
    n = n * 10 + <i64>(c - 0x30);
    if (n > 100) return 100;
  }
  return n;
}

function onScore(req: Value, w: Writer): void {
  const nodes = req.get("nodes").items();
  w.raw('{"scores":[');
  for (let i = 0; i < nodes.length; i++) {
    if (i > 0) w.byte(0x2c);
    w.int(labelScore(nodes[i].get("metadata").get("labels").get(label).str()));
  }
  w.raw("]}");
}

export function configure(ptr: usize, len: i32): u64 {
  return call(ptr, len, onConfigure);
}

export function score(ptr: usize, len: i32): u64 {
  return call(ptr, len, onScore);
}
