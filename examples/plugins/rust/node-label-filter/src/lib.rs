//! node-label-filter: a wasmplane filter plugin in Rust. A pod fits only on nodes that
//! carry the label named in `config.label` (with one of `config.values`, when values
//! are given). Same behaviour as examples/plugins/go/node-label-filter; uses the node
//! table.

use std::cell::RefCell;

use wasmplane::json::{quote, Value};
use wasmplane::scheduling::{filter_each, CONFIGURE_NODE_TABLE};

#[derive(Default)]
struct Config {
    label: String,
    values: Vec<String>,
}

thread_local! {
    // The config, read once per instance by configure.
    static CONFIG: RefCell<Config> = RefCell::new(Config::default());
}

fn on_configure(req: &Value) -> Result<String, String> {
    let cfg = req.get("config");
    let label = match cfg.get("label") {
        Value::Null => "",
        Value::String(s) => s.as_ref(),
        _ => return Err("config.label must be a string".into()),
    };
    if label.is_empty() {
        return Err("config.label is required".into());
    }
    let mut values = Vec::new();
    match cfg.get("values") {
        Value::Null => {}
        Value::Array(items) => {
            for v in items {
                values.push(v.as_str().ok_or("config.values must be a list of strings")?.to_string());
            }
        }
        _ => return Err("config.values must be a list of strings".into()),
    }
    CONFIG.with(|c| *c.borrow_mut() = Config { label: label.to_string(), values });
    Ok(CONFIGURE_NODE_TABLE.into())
}

fn on_filter(req: &Value) -> Result<String, String> {
    CONFIG.with(|cfg| {
        let cfg = cfg.borrow();
        filter_each(req, |_, node| {
            let v = match node.get("metadata").get("labels").get(&cfg.label) {
                Value::String(v) => v,
                _ => return Some(format!("node lacks label {}", quote(&cfg.label))),
            };
            if !cfg.values.is_empty() && !cfg.values.iter().any(|x| x == v) {
                return Some(format!("node label {}={} is not one of [{}]", cfg.label, v, cfg.values.join(" ")));
            }
            None
        })
    })
}

wasmplane::hook!(configure, on_configure);
wasmplane::hook!(filter, on_filter);
