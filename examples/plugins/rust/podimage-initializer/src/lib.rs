//! podimage-initializer: the seed's podimage.example.com initializer as a wasmplane
//! initialize plugin in Rust. It rewrites every (init) container image of a new pod to
//! pull from the mirror registry of `config.mirror`. Same behaviour as
//! examples/plugins/go/podimage-initializer.

use std::cell::RefCell;

use wasmplane::initialize::patched;
use wasmplane::json::{quote, Value};
use wasmplane::patch::Patch;

thread_local! {
    // The mirror registry, read once per instance by configure.
    static MIRROR: RefCell<String> = RefCell::new(String::new());
}

fn on_configure(req: &Value) -> Result<String, String> {
    let mirror = match req.get("config").get("mirror") {
        Value::Null => "",
        Value::String(s) => s.as_ref(),
        _ => return Err("config.mirror must be a string".into()),
    };
    let mirror = mirror.strip_suffix('/').unwrap_or(mirror);
    if mirror.is_empty() {
        return Err("config.mirror is required".into());
    }
    MIRROR.with(|m| *m.borrow_mut() = mirror.to_string());
    Ok("{}".into())
}

/// Rewrites an image reference to pull from the mirror registry: `nginx:1.27` becomes
/// `<mirror>/library/nginx:1.27`, `quay.io/x/y` becomes `<mirror>/x/y`.
fn mirror(registry: &str, image: &str) -> String {
    if image.is_empty() || (image.starts_with(registry) && image[registry.len()..].starts_with('/')) {
        return image.to_string();
    }
    match image.split_once('/') {
        Some((first, rest)) if first.contains(|c| c == '.' || c == ':') || first == "localhost" => {
            format!("{}/{}", registry, rest)
        }
        Some(_) => format!("{}/{}", registry, image),
        None => format!("{}/library/{}", registry, image),
    }
}

fn on_initialize(req: &Value) -> Result<String, String> {
    if req.get("kind").get("kind").str() != "Pod" {
        return Ok(patched(&Patch::new()));
    }
    let obj = req.get("object");
    if !matches!(obj, Value::Object(_)) {
        return Err("object is not a JSON object".into());
    }
    let mut patch = Patch::new();
    MIRROR.with(|m| {
        let registry = m.borrow();
        for field in ["initContainers", "containers"] {
            for (i, c) in obj.get("spec").get(field).items().iter().enumerate() {
                let image = c.get("image").str();
                let img = mirror(&registry, image);
                if img != image {
                    patch.replace(&format!("/spec/{}/{}/image", field, i), &quote(&img));
                }
            }
        }
    });
    Ok(patched(&patch))
}

wasmplane::hook!(configure, on_configure);
wasmplane::hook!(initialize, on_initialize);
