//! token-authenticator: a wasmplane authenticate plugin in Rust that accepts the static
//! bearer tokens listed in `config.tokens`. Same behaviour as
//! examples/plugins/go/token-authenticator.

use std::cell::RefCell;
use std::collections::BTreeMap;

use wasmplane::authenticate::{authenticated, bearer_token, not_mine, rejected, User};
use wasmplane::json::Value;

thread_local! {
    // The users by token, read once per instance by configure.
    static TOKENS: RefCell<BTreeMap<String, User>> = RefCell::new(BTreeMap::new());
}

fn on_configure(req: &Value) -> Result<String, String> {
    let tokens = req.get("config").get("tokens");
    if !matches!(tokens, Value::Object(_) | Value::Null) {
        return Err("config.tokens must map tokens to users".into());
    }
    let mut m = BTreeMap::new();
    for (tok, u) in tokens.members() {
        let user = User::from_json(u).map_err(|e| format!("config.tokens: {}", e))?;
        if tok.is_empty() || user.username.is_empty() {
            return Err("every token needs a non-empty token and username".into());
        }
        m.insert(tok.to_string(), user);
    }
    if m.is_empty() {
        return Err("config.tokens is empty".into());
    }
    TOKENS.with(|t| *t.borrow_mut() = m);
    Ok("{}".into())
}

fn on_authenticate(req: &Value) -> Result<String, String> {
    // No bearer token: not ours, let the next authenticator look.
    let token = match bearer_token(req) {
        Some(t) => t,
        None => return Ok(not_mine()),
    };
    TOKENS.with(|tokens| match tokens.borrow().get(token) {
        Some(user) => Ok(authenticated(user, &[])),
        None => Ok(rejected("unknown bearer token")),
    })
}

wasmplane::hook!(configure, on_configure);
wasmplane::hook!(authenticate, on_authenticate);
