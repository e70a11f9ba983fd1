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
  // them, and costs the server and this plugin a fraction of a whole Pod.
  w.raw('{"compactPods":true}');
}

/** latest tells whether an image reference resolves to the latest tag. */
function latest(image: string): bool {
  if (image.includes("@sha256:")) return false;
  const name = image.substring(image.lastIndexOf("/") + 1);
  const colon = name.indexOf(":");
  return colon < 0 || name.substring(colon + 1) == "latest";
}

function checkImages(containers: Value, problems: string[]): void {
  const list = containers.items();
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    const image = c.get("image").str();
    if (latest(image)) {
      problems.push("container " + quote(c.get("name").str()) + ": image " + quote(image) + " must be pinned to a tag other than latest");
    }
  }
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
  const problems: string[] = [];
  const have = obj.get("metadata").get("labels");
  for (let i = 0; i < labels.length; i++) {
    if (!have.has(labels[i])) problems.push("label " + quote(labels[i]) + " is required");
  }
  if (req.get("kind").get("kind").is("Pod")) {
    const spec = obj.get("spec");
    checkImages(spec.get("initContainers"), problems);
    checkImages(spec.get("containers"), problems);
  }
  if (problems.length == 0) {
    w.raw('{"allowed":true}');
    return;
  }
  w.raw('{"allowed":false,"code":403,"reason":"Forbidden","message":');
  w.str(problems.join("; "));
  w.raw("}");
}

export function configure(ptr: usize, len: i32): u64 {
  return call(ptr, len, onConfigure);
}

export function validate(ptr: usize, len: i32): u64 {
  return call(ptr, len, onValidate);
}
