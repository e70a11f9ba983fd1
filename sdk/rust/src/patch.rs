//! RFC 6902 JSON Patches, as `mutate` and `initialize` answers carry them (ABI §7.3, §7.4).

use crate::json::quote_into;

/// A JSON Patch under construction: operations in order, each already encoded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Patch {
    ops: Vec<String>,
}

impl Patch {
    /// An empty patch.
    pub fn new() -> Patch {
        Patch::default()
    }

    /// Adds an `add` operation; `value` is JSON text (`quote(s)`, `v.to_json()`, `"{}"`).
    pub fn add(&mut self, path: &str, value: &str) -> &mut Patch {
        self.op("add", path, Some(value))
    }

    /// Adds a `replace` operation; `value` is JSON text.
    pub fn replace(&mut self, path: &str, value: &str) -> &mut Patch {
        self.op("replace", path, Some(value))
    }

    /// Adds a `remove` operation.
    pub fn remove(&mut self, path: &str) -> &mut Patch {
        self.op("remove", path, None)
    }

    fn op(&mut self, op: &str, path: &str, value: Option<&str>) -> &mut Patch {
        let mut s = String::with_capacity(32 + path.len() + value.map_or(0, str::len));
        s.push_str("{\"op\":\"");
        s.push_str(op);
        s.push_str("\",\"path\":");
        quote_into(&mut s, path);
        if let Some(v) = value {
            s.push_str(",\"value\":");
            s.push_str(v);
        }
        s.push('}');
        self.ops.push(s);
        self
    }

    /// Whether the patch has no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// The patch as a JSON array.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(2 + self.ops.iter().map(|o| o.len() + 1).sum::<usize>());
        out.push('[');
        out.push_str(&self.ops.join(","));
        out.push(']');
        out
    }
}

/// Escapes one JSON Pointer reference token (RFC 6901): `example.com/owner` becomes
/// `example.com~1owner`, so a label key can be part of a patch path.
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}
