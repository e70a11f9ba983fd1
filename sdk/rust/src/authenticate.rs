//! Reading `authenticate` requests and writing their answers (ABI §7.2).

use crate::json::{quote_into, Value};

/// A user as the API server sees it (ABI `UserInfo`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct User {
    /// The user name; an authenticated answer needs it non-empty.
    pub username: String,
    /// A unique id of the user.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// Extra attributes, each with its values, in order.
    pub extra: Vec<(String, Vec<String>)>,
}

impl User {
    /// Reads a `UserInfo` object (as found in a config or a request).
    pub fn from_json(v: &Value) -> Result<User, String> {
        if !matches!(v, Value::Object(_)) {
            return Err("a user must be an object".into());
        }
        let s = |key: &str| match v.get(key) {
            Value::Null => Ok(String::new()),
            Value::String(s) => Ok(s.to_string()),
            _ => Err(format!("user.{} must be a string", key)),
        };
        let list = |v: &Value, what: &str| -> Result<Vec<String>, String> {
            match v {
                Value::Null => Ok(Vec::new()),
                Value::Array(a) => a
                    .iter()
                    .map(|x| x.as_str().map(String::from).ok_or_else(|| format!("{} must be a list of strings", what)))
                    .collect(),
                _ => Err(format!("{} must be a list of strings", what)),
            }
        };
        let mut extra = Vec::new();
        for (k, vals) in v.get("extra").members() {
            extra.push((k.to_string(), list(vals, "user.extra values")?));
        }
        Ok(User { username: s("username")?, uid: s("uid")?, groups: list(v.get("groups"), "user.groups")?, extra })
    }

    /// Appends the user's JSON text to `out`.
    pub fn write(&self, out: &mut String) {
        out.push_str("{\"username\":");
        quote_into(out, &self.username);
        if !self.uid.is_empty() {
            out.push_str(",\"uid\":");
            quote_into(out, &self.uid);
        }
        if !self.groups.is_empty() {
            out.push_str(",\"groups\":");
            write_list(out, &self.groups);
        }
        if !self.extra.is_empty() {
            out.push_str(",\"extra\":{");
            for (i, (k, vals)) in self.extra.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                quote_into(out, k);
                out.push(':');
                write_list(out, vals);
            }
            out.push('}');
        }
        out.push('}');
    }
}

fn write_list(out: &mut String, items: &[String]) {
    out.push('[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        quote_into(out, s);
    }
    out.push(']');
}

/// Accepts the credential as `user`; `audiences` (may be empty: the request's) are the
/// audiences it is valid for.
pub fn authenticated(user: &User, audiences: &[String]) -> String {
    let mut out = String::from("{\"authenticated\":true,\"user\":");
    user.write(&mut out);
    if !audiences.is_empty() {
        out.push_str(",\"audiences\":");
        write_list(&mut out, audiences);
    }
    out.push('}');
    out
}

/// Not this plugin's kind of credential: the next authenticator is tried.
pub fn not_mine() -> String {
    "{\"authenticated\":false}".into()
}

/// The credential is this plugin's kind and is not valid; `message` is logged, never
/// sent to the client.
pub fn rejected(message: &str) -> String {
    let mut out = String::from("{\"authenticated\":false,\"message\":");
    quote_into(&mut out, message);
    out.push('}');
    out
}

/// The values of a request header (canonical name, e.g. `Authorization`), in order.
pub fn header<'a>(req: &'a Value, name: &str) -> impl Iterator<Item = &'a str> {
    req.get("headers").get(name).items().iter().filter_map(Value::as_str)
}

/// The token of the first `Authorization: Bearer <token>` header (scheme matched without
/// regard to case), trimmed, or `None` when the request has no bearer token.
pub fn bearer_token<'a>(req: &'a Value) -> Option<&'a str> {
    header(req, "Authorization").find_map(|h| {
        let (scheme, token) = h.split_once(' ')?;
        if scheme.eq_ignore_ascii_case("bearer") {
            Some(token.trim())
        } else {
            None
        }
    })
}
