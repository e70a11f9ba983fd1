//! Answers of the `initialize` hook (ABI §7.4).

use crate::json::{quote_into, Value};
use crate::patch::Patch;

/// Nothing to change.
pub fn unchanged() -> String {
    "{}".into()
}

/// Changes the object with a patch (an empty patch changes nothing).
pub fn patched(patch: &Patch) -> String {
    if patch.is_empty() {
        return unchanged();
    }
    format!("{{\"patch\":{}}}", patch.to_json())
}

/// Replaces the object by `object`, the whole initialized object.
pub fn replaced(object: &Value) -> String {
    format!("{{\"object\":{}}}", object.to_json())
}

/// Fails the object's initialization (it is deleted); code 0 and reason "" take the
/// host's defaults (422 Invalid).
pub fn rejected(code: i32, reason: &str, message: &str) -> String {
    let mut out = String::from("{\"rejected\":true");
    if code != 0 {
        out.push_str(",\"code\":");
        out.push_str(&code.to_string());
    }
    if !reason.is_empty() {
        out.push_str(",\"reason\":");
        quote_into(&mut out, reason);
    }
    out.push_str(",\"message\":");
    quote_into(&mut out, message);
    out.push('}');
    out
}
