//! require-labels: a wasmplane validate plugin in Rust. Objects must carry the labels
//! listed in `config.labels`, and pods may not use `:latest` (or untagged) images. Same
//! behaviour as examples/plugins/go/require-labels.

use std::cell::RefCell;

use wasmplane::json::{quote, Value, View};

thread_local! {
    // The configured labels, read once per instance by configure.
    static LABELS: RefCell<Vec<String>> = RefCell::new(Vec::new());
}

fn on_configure(req: &Value) -> Result<String, String> {
    let list = req.get("config").get("labels");
    let mut labels = Vec::new();
    match list {
        Value::Null => {}
        Value::Array(items) => {
            for v in items {
                labels.push(v.as_str().ok_or("config.labels must be a list of strings")?.to_string());
            }
        }
        _ => return Err("config.labels must be a list of strings".into()),
    }
    LABELS.with(|l| *l.borrow_mut() = labels);
    // Only labels and container images are read: the compact pod document (ABI §7.5) has
    // them, and costs the server and this plugin a fraction of a whole Pod; "reads"
    // (ABI §7.1) lets the host leave out the request members this plugin never reads.
    Ok(r#"{"compactPods":true,"reads":["operation","kind","object.metadata.labels","object.spec.containers","object.spec.initContainers"]}"#.into())
}

/// Tells whether an image reference resolves to the latest tag.
fn latest(image: &str) -> bool {
    if image.contains("@sha256:") {
        return false;
    }
    let name = image.rsplit('/').next().unwrap_or(image);
    match name.split_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

fn check_images(containers: View, problems: &mut Vec<String>) {
    for c in containers.items() {
        let image = c.get("image").str();
        if latest(&image) {
            problems.push(format!(
                "container {}: image {} must be pinned to a tag other than latest",
                quote(&c.get("name").str()),
                quote(&image)
            ));
        }
    }
}

// The request is read in place (hook_view!): the handler looks at a few members, and
// reading only those is far less guest code than decoding the whole request.
fn on_validate(req: View) -> Result<String, String> {
    let op = req.get("operation");
    if !op.is("CREATE") && !op.is("UPDATE") {
        return Ok(r#"{"allowed":true}"#.into());
    }
    let obj = req.get("object");
    if !obj.is_object() {
        return Err("object is not a JSON object".into());
    }
    let mut problems = Vec::new();
    let have = obj.get("metadata").get("labels");
    LABELS.with(|labels| {
        for l in labels.borrow().iter() {
            if !have.has(l) {
                problems.push(format!("label {} is required", quote(l)));
            }
        }
    });
    if req.get("kind").get("kind").is("Pod") {
        let spec = obj.get("spec");
        check_images(spec.get("initContainers"), &mut problems);
        check_images(spec.get("containers"), &mut problems);
    }
    if problems.is_empty() {
        return Ok(r#"{"allowed":true}"#.into());
    }
    Ok(format!(
        r#"{{"allowed":false,"code":403,"reason":"Forbidden","message":{}}}"#,
        quote(&problems.join("; "))
    ))
}

wasmplane::hook!(configure, on_configure);
wasmplane::hook_view!(validate, on_validate);
