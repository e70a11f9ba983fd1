// podimage-initializer: the seed's podimage.example.com initializer as a wasmplane
// initialize plugin in AssemblyScript. It rewrites every (init) container image of a new
// pod to pull from the mirror registry named in its configuration. Same behaviour as
// examples/plugins/go/podimage-initializer.
import { Kind, Patch, Value, Writer, call, initialized, quote } from "../../../../sdk/assemblyscript/assembly/index";
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free } from "../../../../sdk/assemblyscript/assembly/index";

// The mirror registry, without a trailing slash, read once per instance by configure.
let registry = "";

function onConfigure(req: Value, w: Writer): void {
  const m = req.get("config").get("mirror");
  if (m.kind != Kind.Missing && m.kind != Kind.Null && !m.isString()) {
    w.error("config.mirror must be a string");
    return;
  }
  registry = m.str();
  if (registry.endsWith("/")) registry = registry.substring(0, registry.length - 1);
  if (registry.length == 0) {
    w.error("config.mirror is required");
    return;
  }
  w.raw("{}");
}

/** mirror rewrites an image reference to pull from the mirror registry: "nginx:1.27"
 * becomes "<mirror>/library/nginx:1.27", "quay.io/x/y" becomes "<mirror>/x/y". */
function mirror(image: string): string {
  if (image.length == 0 || image.startsWith(registry + "/")) return image;
  const slash = image.indexOf("/");
  if (slash < 0) return registry + "/library/" + image;
  const first = image.substring(0, slash);
  if (first.includes(".") || first.includes(":") || first == "localhost") return registry + "/" + image.substring(slash + 1);
  return registry + "/" + image;
}

function rewrite(spec: Value, field: string, patch: Patch): void {
  const cs = spec.get(field).items();
  for (let i = 0; i < cs.length; i++) {
    const image = cs[i].get("image").str();
    const img = mirror(image);
    if (img != image) patch.replace("/spec/" + field + "/" + i.toString() + "/image", quote(img));
  }
}

function onInitialize(req: Value, w: Writer): void {
  if (req.get("kind").get("kind").str() != "Pod") {
    w.raw("{}");
    return;
  }
  const obj = req.get("object");
  if (obj.kind != Kind.Object) {
    w.error("object is not a JSON object");
    return;
  }
  const patch = new Patch();
  const spec = obj.get("spec");
  rewrite(spec, "initContainers", patch);
  rewrite(spec, "containers", patch);
  initialized(w, patch);
}

export function configure(ptr: usize, len: i32): u64 {
  return call(ptr, len, onConfigure);
}

export function initialize(ptr: usize, len: i32): u64 {
  return call(ptr, len, onInitialize);
}
