//! Reading `filter` and `score` requests, with or without the node table, and writing
//! their answers (ABI §7.5, §7.6).
//!
//! A plugin opts into the node table by answering `configure` with
//! [`CONFIGURE_NODE_TABLE`]; [`each_node`] then keeps each defined node document decoded
//! between calls, so a node is parsed once per version per instance instead of on every
//! call. The same code reads requests that carry the documents inline.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write;
use std::hash::{BuildHasherDefault, Hasher};

use crate::json::{quote_into, Value};

/// Hashes node-table keys. The host picks them (distinct integers, not chosen by
/// clients), so a multiplicative hash is safe, and far cheaper than std's SipHash in
/// WebAssembly.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(self.0 ^ u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        // Fold the high half into the low one: the table indexes buckets by low bits,
        // and the host's keys all share their lowest bit.
        let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }
}

type Table = HashMap<u64, Value<'static>, BuildHasherDefault<KeyHasher>>;

thread_local! {
    // The node documents this instance holds, by key (ABI §7.6). The host tracks the
    // same set and resets it when it grows, which bounds its size.
    static TABLE: RefCell<Table> = RefCell::new(Table::default());
}

/// The `configure` answer that accepts the config and asks for the node table.
pub const CONFIGURE_NODE_TABLE: &str = r#"{"nodeTable":true}"#;

fn key(v: &Value) -> Result<u64, String> {
    match v {
        Value::Number(n) => n.parse().map_err(|_| format!("node key {} is not a non-negative integer", n)),
        _ => Err("node key is not a number".into()),
    }
}

/// Applies the request's `reset`, `forget` and `define` to the node table, then calls
/// `f(i, node)` for each candidate node in order, whether `nodes` names it by key or
/// carries it inline; returns the number of nodes. A key the instance does not hold, or
/// an error of `f`, fails the call.
pub fn each_node(req: &Value, mut f: impl FnMut(usize, &Value) -> Result<(), String>) -> Result<usize, String> {
    TABLE.with(|table| {
        let mut table = table.borrow_mut();
        if req.get("reset").as_bool() == Some(true) {
            table.clear();
        }
        for k in req.get("forget").items() {
            table.remove(&key(k)?);
        }
        for d in req.get("define").items() {
            // The request is borrowed, so a defined document is copied once, when it
            // first crosses into this instance.
            table.insert(key(d.get("key"))?, d.get("node").to_static());
        }
        let nodes = req.get("nodes").items();
        for (i, n) in nodes.iter().enumerate() {
            match n {
                Value::Number(_) => {
                    let k = key(n)?;
                    let doc = table.get(&k).ok_or_else(|| format!("node key {} is not defined on this instance", k))?;
                    f(i, doc)?;
                }
                _ => f(i, n)?,
            }
        }
        Ok(nodes.len())
    })
}

/// The number of node documents this instance holds in its node table.
pub fn table_len() -> usize {
    TABLE.with(|t| t.borrow().len())
}

/// A `filter` answer: `pass` and, unless empty, `reasons`, parallel to the request's nodes.
pub fn filter_answer(pass: &[bool], reasons: &[String]) -> String {
    let mut out = String::with_capacity(16 + pass.len() * 8);
    out.push_str("{\"pass\":[");
    for (i, p) in pass.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(if *p { "true" } else { "false" });
    }
    out.push(']');
    if !reasons.is_empty() {
        out.push_str(",\"reasons\":[");
        for (i, r) in reasons.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            quote_into(&mut out, r);
        }
        out.push(']');
    }
    out.push('}');
    out
}

/// A `score` answer: one score per node of the request, in order.
pub fn score_answer(scores: &[i64]) -> String {
    let mut out = String::with_capacity(16 + scores.len() * 4);
    out.push_str("{\"scores\":[");
    for (i, s) in scores.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}", s);
    }
    out.push_str("]}");
    out
}

/// Answers a `filter` request by judging each node on its own: `judge(pod, node)` returns
/// `None` when the pod fits on the node, else the reason it does not.
pub fn filter_each(req: &Value, mut judge: impl FnMut(&Value, &Value) -> Option<String>) -> Result<String, String> {
    let pod = req.get("pod");
    let (mut pass, mut reasons) = (Vec::new(), Vec::new());
    each_node(req, |_, node| {
        let why = judge(pod, node);
        pass.push(why.is_none());
        reasons.push(why.unwrap_or_default());
        Ok(())
    })?;
    Ok(filter_answer(&pass, &reasons))
}

/// Answers a `score` request with `score(pod, node)` for each node.
pub fn score_each(req: &Value, mut score: impl FnMut(&Value, &Value) -> i64) -> Result<String, String> {
    let pod = req.get("pod");
    let mut scores = Vec::new();
    each_node(req, |_, node| {
        scores.push(score(pod, node));
        Ok(())
    })?;
    Ok(score_answer(&scores))
}
