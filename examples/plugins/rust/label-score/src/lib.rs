//! label-score: a wasmplane score plugin in Rust. Nodes are preferred by the integer
//! value of the label named in `config.label`, clamped to 0–100 (missing or not a number:
//! 0). Same behaviour as examples/plugins/go/label-score; uses the node table.

use std::cell::RefCell;

use wasmplane::json::Value;
use wasmplane::scheduling::{score_each, CONFIGURE_NODE_TABLE};

thread_local! {
    // The configured label, read once per instance by configure.
    static LABEL: RefCell<String> = RefCell::new(String::new());
}

fn on_configure(req: &Value) -> Result<String, String> {
    let label = match req.get("config").get("label") {
        Value::Null => "",
        Value::String(s) => s.as_ref(),
        _ => return Err("config.label must be a string".into()),
    };
    if label.is_empty() {
        return Err("config.label is required".into());
    }
    LABEL.with(|l| *l.borrow_mut() = label.to_string());
    Ok(CONFIGURE_NODE_TABLE.into())
}

/// Turns a label value into a score: its decimal value clamped to 0–100, 0 if it is not
/// made of digits only.
fn label_score(v: &str) -> i64 {
    let mut n: i64 = 0;
    for c in v.bytes() {
        if !c.is_ascii_digit() {
            return 0;
        }
        n = n * 10 + i64::from(c - b'0');
        if n > 100 {
            return 100;
        }
    }
    n
}

fn on_score(req: &Value) -> Result<String, String> {
    LABEL.with(|label| {
        let label = label.borrow();
        score_each(req, |_, node| label_score(node.get("metadata").get("labels").get(&label).str()))
    })
}

wasmplane::hook!(configure, on_configure);
wasmplane::hook!(score, on_score);
