//! label-injector: a wasmplane mutate plugin in Rust. It adds the labels of
//! `config.labels` to every created or updated object and the toleration of
//! `config.toleration` to every pod, as a JSON Patch. Same behaviour as
//! examples/plugins/go/label-injector.

use std::cell::RefCell;

use wasmplane::admission::Answer;
use wasmplane::json::{quote, quote_into, Value};
use wasmplane::patch::{escape, Patch};

/// A pod toleration, compared and written as Kubernetes (and the Go twin) do.
#[derive(Default, PartialEq)]
struct Toleration {
    key: String,
    operator: String,
    value: String,
    effect: String,
    seconds: Option<String>,
}

impl Toleration {
    fn from_json(v: &Value) -> Result<Toleration, String> {
        if !matches!(v, Value::Object(_)) {
            return Err("config.toleration must be an object".into());
        }
        let s = |k: &str| match v.get(k) {
            Value::Null => Ok(String::new()),
            Value::String(s) => Ok(s.to_string()),
            _ => Err(format!("config.toleration.{} must be a string", k)),
        };
        let seconds = match v.get("tolerationSeconds") {
            Value::Null => None,
            n @ Value::Number(_) if n.as_i64().is_some() => Some(n.to_json()),
            _ => return Err("config.toleration.tolerationSeconds must be an integer".into()),
        };
        Ok(Toleration {
            key: s("key")?,
            operator: s("operator")?,
            value: s("value")?,
            effect: s("effect")?,
            seconds,
        })
    }

    /// Whether `v`, a toleration of the pod, is this one (tolerationSeconds aside, as
    /// the Go twin compares).
    fn matches(&self, v: &Value) -> bool {
        v.get("key").str() == self.key
            && v.get("operator").str() == self.operator
            && v.get("value").str() == self.value
            && v.get("effect").str() == self.effect
    }

    /// The toleration's JSON text, members in Kubernetes' order, empty ones left out.
    fn to_json(&self) -> String {
        let mut out = String::from("{");
        let members = [("key", &self.key), ("operator", &self.operator), ("value", &self.value), ("effect", &self.effect)];
        for (k, v) in members {
            if !v.is_empty() {
                if out.len() > 1 {
                    out.push(',');
                }
                out.push_str(&quote(k));
                out.push(':');
                quote_into(&mut out, v);
            }
        }
        if let Some(s) = &self.seconds {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str("\"tolerationSeconds\":");
            out.push_str(s);
        }
        out.push('}');
        out
    }
}

#[derive(Default)]
struct Config {
    labels: Vec<(String, String)>,
    toleration: Option<Toleration>,
}

thread_local! {
    // The config, read once per instance by configure.
    static CONFIG: RefCell<Config> = RefCell::new(Config::default());
}

fn on_configure(req: &Value) -> Result<String, String> {
    let cfg = req.get("config");
    let mut c = Config::default();
    match cfg.get("labels") {
        Value::Null => {}
        Value::Object(m) => {
            for (k, v) in m {
                let v = v.as_str().ok_or("config.labels must map names to strings")?;
                // A repeated name keeps its last value, as a decoded JSON map does.
                c.labels.retain(|(have, _)| have != k);
                c.labels.push((k.to_string(), v.to_string()));
            }
        }
        _ => return Err("config.labels must map names to strings".into()),
    }
    if !cfg.get("toleration").is_null() {
        c.toleration = Some(Toleration::from_json(cfg.get("toleration"))?);
    }
    CONFIG.with(|cur| *cur.borrow_mut() = c);
    Ok("{}".into())
}

fn on_mutate(req: &Value) -> Result<String, String> {
    let op = req.get("operation").str();
    if op != "CREATE" && op != "UPDATE" {
        return Ok(Answer::allow().to_json());
    }
    let obj = req.get("object");
    if !matches!(obj, Value::Object(_)) {
        return Err("object is not a JSON object".into());
    }
    let labels = obj.get("metadata").get("labels");
    let tolerations = obj.get("spec").get("tolerations");
    let mut patch = Patch::new();
    CONFIG.with(|cfg| {
        let cfg = cfg.borrow();
        if labels.is_null() && !cfg.labels.is_empty() {
            patch.add("/metadata/labels", "{}");
        }
        for (k, v) in &cfg.labels {
            if labels.get(k).as_str() != Some(v.as_str()) {
                patch.add(&format!("/metadata/labels/{}", escape(k)), &quote(v));
            }
        }
        if let Some(t) = &cfg.toleration {
            if req.get("kind").get("kind").str() == "Pod" && !tolerations.items().iter().any(|x| t.matches(x)) {
                if tolerations.is_null() {
                    patch.add("/spec/tolerations", &format!("[{}]", t.to_json()));
                } else {
                    patch.add("/spec/tolerations/-", &t.to_json());
                }
            }
        }
    });
    Ok(Answer::patched(patch).to_json())
}

wasmplane::hook!(configure, on_configure);
wasmplane::hook!(mutate, on_mutate);
