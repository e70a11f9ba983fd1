// require-labels: a wasmplane validate plugin in AssemblyScript. Objects must carry the
// labels listed in config.labels, and pods may not use ":latest" (or untagged) images.
// Same behaviour as examples/plugins/go/require-labels.
import { Kind, Value, Writer, call, quote } from "../../../../sdk/assemblyscript/assembly/index";
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free } from "../../../../sdk/assemblyscript/assembly/index";

// The configured labels, read once per instance by configure.
let labels: string[] = [];

function onConfigure(req: Value, w: Writer): void {
  const list = req.get("config").get("labels");
  if (list.kind != Kind.Missing && list.kind != Kind.Null && list.kind != Kind.Array) {
    w.error("config.labels must be a list of strings");
    return;
  }
  const items = list.items();
  for (let i = 0; i < items.length; i++) {
    if (!items[i].isString()) {
      w.error("config.labels must be a list of strings");
      return;
    }
    labels.push(items[i].str());
  }
  // Only labels and container images are read: the compact pod document (ABI §7.5) has
  // them, and costs the server and this plugin a fraction of a whole Pod; "reads"
  // (ABI §7.1) lets the host leave out the request members this plugin never reads.
  w.raw('{"compactPods":true,"reads":["operation","kind","object.metadata.labels","object.spec.containers","object.spec.initContainers"]}');
}

/** latest tells whether an image reference resolves to the latest tag. */
function latest(image: string): bool {
  if (image.includes("@sha256:")) return false;
  const name = image.substring(image.lastIndexOf("/") + 1);
  const colon = name.indexOf(":");
  return colon < 0 || name.substring(colon + 1) == "latest";
}

/** latestImage is latest on an image read in place: a plain string (no escapes) is
 * looked at in the request's bytes, so an allowed image costs no string. */
function latestImage(v: Value): bool {
  if (!v.isString()) return latest("");
  const p = v.start + 1;
  let slash = p; // where the last path segment starts
  let colon: usize = 0; // the first ':' after it, or 0
  let e = p;
  for (; e < v.limit; e++) {
    const c = load<u8>(e);
    if (c == 0x22) break;
    if (c == 0x5c) return latest(v.str()); // escaped: decode it
    if (c == 0x2f) {
      slash = e + 1;
      colon = 0;
    } else if (c == 0x3a && colon == 0) colon = e;
    else if (c == 0x40 && isSHA256(e + 1, v.limit)) return false;
  }
  if (colon == 0) return true;
  // The tag runs from after the colon to the closing quote.
  return e - colon - 1 == 6 && load<u32>(colon + 1) == 0x6574616c && load<u16>(colon + 5) == 0x7473; // "latest"
}

/** isSHA256 tells whether the bytes at p start with "sha256:". */
function isSHA256(p: usize, e: usize): bool {
  return p + 7 <= e && load<u32>(p) == 0x32616873 && load<u16>(p + 4) == 0x3635 && load<u8>(p + 6) == 0x3a;
}

/** checkImages adds a problem for each container whose image is latest; problems is
 * "" until the first one, so an allowed pod builds no string. */
function checkImages(containers: Value, problems: string): string {
  for (let c = containers.first(); c.exists; c = c.next()) {
    const image = c.get("image");
    if (latestImage(image)) {
      problems = add(problems, "container " + quote(c.get("name").str()) + ": image " + quote(image.str()) + " must be pinned to a tag other than latest");
    }
  }
  return problems;
}

function add(problems: string, p: string): string {
  return problems.length == 0 ? p : problems + "; " + p;
}

function onValidate(req: Value, w: Writer): void {
  const op = req.get("operation");
  if (!op.is("CREATE") && !op.is("UPDATE")) {
    w.raw('{"allowed":true}');
    return;
  }
  const obj = req.get("object");
  if (obj.kind != Kind.Object) {
    w.error("object is not a JSON object");
    return;
  }
  let problems = "";
  const have = obj.get("metadata").get("labels");
  for (let i = 0, n = labels.length; i < n; i++) {
    const l = unchecked(labels[i]);
    if (!have.has(l)) problems = add(problems, "label " + quote(l) + " is required");
  }
  if (req.get("kind").get("kind").is("Pod")) {
    const spec = obj.get("spec");
    problems = checkImages(spec.get("initContainers"), problems);
    problems = checkImages(spec.get("containers"), problems);
  }
  if (problems.length == 0) {
    w.raw('{"allowed":true}');
    return;
  }
  w.raw('{"allowed":false,"code":403,"reason":"Forbidden","message":');
  w.str(problems);
  w.raw("}");
}

export function configure(ptr: usize, len: i32): u64 {
  return call(ptr, len, onConfigure);
}

export function validate(ptr: usize, len: i32): u64 {
  return call(ptr, len, onValidate);
}
