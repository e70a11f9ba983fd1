//! A minimal JSON reader and quoter: enough to pick members out of a request and to
//! write an answer with `format!`.
//!
//! A decoded value borrows its strings from the request wherever they need no unescaping
//! (nearly all of a Kubernetes object), so reading a request allocates little beyond the
//! arrays and objects themselves; [`Value::to_static`] copies a value to keep it.

use std::borrow::Cow;
use std::fmt::Write;

/// A decoded JSON value, borrowing from the text it was read from. Numbers keep their
/// source text.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// `null`, and also what lookups of absent members return.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written.
    Number(Cow<'a, str>),
    /// A string, decoded.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<Value<'a>>),
    /// An object's members in order.
    Object(Vec<(Cow<'a, str>, Value<'a>)>),
}

static NULL: Value<'static> = Value::Null;

impl<'a> Value<'a> {
    /// A copy that borrows nothing, to keep beyond the request it was read from.
    pub fn to_static(&self) -> Value<'static> {
        match self {
            Value::Null => Value::Null,
            Value::Bool(b) => Value::Bool(*b),
            Value::Number(n) => Value::Number(Cow::Owned(n.to_string())),
            Value::String(s) => Value::String(Cow::Owned(s.to_string())),
            Value::Array(a) => Value::Array(a.iter().map(Value::to_static).collect()),
            Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (Cow::Owned(k.to_string()), v.to_static())).collect()),
        }
    }

    /// The member named `key` of an object (the first if repeated), else `Null`, so that
    /// paths chain: `req.get("object").get("metadata")`.
    pub fn get(&self, key: &str) -> &Value<'a> {
        match self {
            Value::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v).unwrap_or(&NULL),
            _ => &NULL,
        }
    }

    /// Whether an object has a member named `key`.
    pub fn has(&self, key: &str) -> bool {
        matches!(self, Value::Object(m) if m.iter().any(|(k, _)| k == key))
    }

    /// The elements of an array (empty for any other value).
    pub fn items(&self) -> &[Value<'a>] {
        match self {
            Value::Array(a) => a,
            _ => &[],
        }
    }

    /// A string's value, or `None`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// A string's value, or "" for any other value.
    pub fn str(&self) -> &str {
        self.as_str().unwrap_or("")
    }

    /// An integral number's value.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// A boolean's value, or `None`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Whether the value is `null` (or an absent member).
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The members of an object in order (empty for any other value).
    pub fn members(&self) -> &[(Cow<'a, str>, Value<'a>)] {
        match self {
            Value::Object(m) => m,
            _ => &[],
        }
    }

    /// Encodes the value as JSON text; numbers are written as they were read, so a value
    /// read from a request is echoed unchanged (up to white space and escapes).
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    /// Appends the value's JSON text to `out`.
    pub fn write(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => out.push_str(n),
            Value::String(s) => quote_into(out, s),
            Value::Array(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    quote_into(out, k);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Decodes one JSON value that fills `b`.
pub fn parse(b: &[u8]) -> Result<Value<'_>, String> {
    let mut p = Parser { b, i: 0 };
    let v = p.value(0)?;
    p.ws();
    if p.i != b.len() {
        return Err(p.err("trailing data"));
    }
    Ok(v)
}

/// Returns `s` as a quoted JSON string (for ASCII text, what Go's `%q` shows).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    quote_into(&mut out, s);
    out
}

/// Appends `s` to `out` as a quoted JSON string.
pub fn quote_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

const MAX_DEPTH: usize = 512;

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, what: &str) -> String {
        format!("invalid JSON at offset {}: {}", self.i, what)
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn lit(&mut self, word: &[u8], v: Value<'a>) -> Result<Value<'a>, String> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.err("unexpected literal"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>, String> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deep"));
        }
        self.ws();
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                let mut m = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Value::Object(m));
                }
                loop {
                    self.ws();
                    if self.peek() != Some(b'"') {
                        return Err(self.err("expected a member name"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.peek() != Some(b':') {
                        return Err(self.err("expected ':'"));
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    m.push((k, v));
                    if !self.sep(b'}')? {
                        return Ok(Value::Object(m));
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut a = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Value::Array(a));
                }
                loop {
                    a.push(self.value(depth + 1)?);
                    if !self.sep(b']')? {
                        return Ok(Value::Array(a));
                    }
                }
            }
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.lit(b"true", Value::Bool(true)),
            Some(b'f') => self.lit(b"false", Value::Bool(false)),
            Some(b'n') => self.lit(b"null", Value::Null),
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                while self.i < self.b.len() && matches!(self.b[self.i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                    self.i += 1;
                }
                // The bytes are ASCII, so this cannot fail.
                Ok(Value::Number(String::from_utf8_lossy(&self.b[start..self.i])))
            }
            _ => Err(self.err("expected a value")),
        }
    }

    /// Consumes a comma (true: more follows) or the closing bracket (false).
    fn sep(&mut self, close: u8) -> Result<bool, String> {
        self.ws();
        match self.peek() {
            Some(b',') => {
                self.i += 1;
                Ok(true)
            }
            Some(c) if c == close => {
                self.i += 1;
                Ok(false)
            }
            _ => Err(self.err("expected ',' or a closing bracket")),
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self.b.get(self.i..self.i + 4).ok_or_else(|| self.err("short \\u escape"))?;
        let s = std::str::from_utf8(h).map_err(|_| self.err("bad \\u escape"))?;
        let v = u32::from_str_radix(s, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<Cow<'a, str>, String> {
        self.i += 1; // the opening quote
        let b: &'a [u8] = self.b;
        let first = self.i;
        while self.i < b.len() && b[self.i] != b'"' && b[self.i] != b'\\' {
            self.i += 1;
        }
        if self.peek() == Some(b'"') {
            // No escapes: the string is the source text itself.
            self.i += 1;
            return std::str::from_utf8(&b[first..self.i - 1]).map(Cow::Borrowed).map_err(|_| self.err("string is not UTF-8"));
        }
        let mut out: Vec<u8> = b[first..self.i].to_vec();
        loop {
            let start = self.i;
            while self.i < self.b.len() && self.b[self.i] != b'"' && self.b[self.i] != b'\\' {
                self.i += 1;
            }
            out.extend_from_slice(&self.b[start..self.i]);
            match self.peek() {
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).map(Cow::Owned).map_err(|_| self.err("string is not UTF-8"));
                }
                Some(b'\\') => {
                    let e = *self.b.get(self.i + 1).ok_or_else(|| self.err("unterminated string"))?;
                    self.i += 2;
                    let c = match e {
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'/' | b'\\' | b'"' => e as char,
                        b'u' => {
                            let mut r = self.hex4()?;
                            if (0xD800..0xDC00).contains(&r) && self.b[self.i..].starts_with(b"\\u") {
                                let save = self.i;
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    r = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00);
                                } else {
                                    self.i = save;
                                }
                            }
                            char::from_u32(r).unwrap_or('\u{FFFD}')
                        }
                        _ => return Err(self.err("bad escape")),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                _ => return Err(self.err("unterminated string")),
            }
        }
    }
}

/// A JSON value read in place: nothing is decoded until asked for, and a lookup reads
/// the text only as far as the member it looks for, skipping the values before it. A
/// handler that reads a few members of a request ([`hook_view!`](crate::hook_view)) then
/// neither builds a tree of the whole request nor allocates for it. The text is the
/// host's (valid JSON); on malformed text lookups find nothing rather than fail.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    // From the value's first byte to the end of the text; empty for an absent value.
    b: &'a [u8],
}

impl<'a> View<'a> {
    /// The value that fills `text` (leading white space skipped).
    pub fn new(text: &'a [u8]) -> View<'a> {
        View { b: &text[ws(text, 0)..] }
    }

    fn first(&self) -> u8 {
        self.b.first().copied().unwrap_or(0)
    }

    /// Whether the value is present (an absent member's view is not).
    pub fn exists(&self) -> bool {
        !self.b.is_empty()
    }

    /// Whether the value is an object.
    pub fn is_object(&self) -> bool {
        self.first() == b'{'
    }

    /// Whether the value is `null` or absent.
    pub fn is_null(&self) -> bool {
        self.b.is_empty() || self.first() == b'n'
    }

    /// The member named `key` of an object (the first if repeated); an absent view for any
    /// other value or a missing member, so that paths chain: `req.get("object").get("spec")`.
    pub fn get(&self, key: &str) -> View<'a> {
        let b = self.b;
        if self.first() != b'{' {
            return View { b: &[] };
        }
        let mut i = 1;
        loop {
            i = ws(b, i);
            if b.get(i) != Some(&b'"') {
                return View { b: &[] }; // '}' or malformed
            }
            let end = skip_string(b, i);
            let matches = key_is(&b[i..end], key);
            i = ws(b, end);
            if b.get(i) != Some(&b':') {
                return View { b: &[] };
            }
            i = ws(b, i + 1);
            if matches {
                return View { b: &b[i..] };
            }
            i = ws(b, skip_value(b, i));
            if b.get(i) != Some(&b',') {
                return View { b: &[] };
            }
            i += 1;
        }
    }

    /// Whether an object has a member named `key`.
    pub fn has(&self, key: &str) -> bool {
        self.get(key).exists()
    }

    /// The elements of an array, in order (none for any other value).
    pub fn items(&self) -> Items<'a> {
        Items { b: if self.first() == b'[' { self.b } else { &[] }, i: 1 }
    }

    /// A string's value, or "" for any other value; borrowed from the text unless it has
    /// escapes.
    pub fn str(&self) -> Cow<'a, str> {
        if self.first() != b'"' {
            return Cow::Borrowed("");
        }
        let end = skip_string(self.b, 0);
        if end < 2 || self.b[end - 1] != b'"' {
            return Cow::Borrowed(""); // unterminated
        }
        let inner = &self.b[1..end - 1];
        if !inner.contains(&b'\\') {
            if let Ok(s) = std::str::from_utf8(inner) {
                return Cow::Borrowed(s);
            }
        }
        Parser { b: self.b, i: 0 }.string().unwrap_or(Cow::Borrowed(""))
    }

    /// Whether the value is the string `s`.
    pub fn is(&self, s: &str) -> bool {
        self.first() == b'"' && self.str() == s
    }

    /// The value's JSON text (empty for an absent value).
    pub fn raw(&self) -> &'a [u8] {
        if self.b.is_empty() {
            return self.b;
        }
        &self.b[..skip_value(self.b, 0)]
    }

    /// Decodes the value into a [`Value`] (`Null` for an absent one).
    pub fn value(&self) -> Result<Value<'a>, String> {
        if self.b.is_empty() {
            return Ok(Value::Null);
        }
        parse(self.raw())
    }
}

/// The elements of an array [`View`].
#[derive(Debug, Clone)]
pub struct Items<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Iterator for Items<'a> {
    type Item = View<'a>;

    fn next(&mut self) -> Option<View<'a>> {
        let b = self.b;
        let i = ws(b, self.i);
        match b.get(i) {
            None | Some(b']') => {
                self.b = &[];
                return None;
            }
            _ => {}
        }
        let end = skip_value(b, i);
        let next = ws(b, end);
        self.i = if b.get(next) == Some(&b',') { next + 1 } else { b.len() };
        Some(View { b: &b[i..] })
    }
}

/// Whether `quoted`, a JSON string with its quotes, is `key`. A name without escapes is as
/// long as its text and one with escapes longer: most names differ from `key` by their
/// length alone.
fn key_is(quoted: &[u8], key: &str) -> bool {
    let inner = &quoted[1..quoted.len().saturating_sub(1).max(1)];
    let key = key.as_bytes();
    if inner.len() < key.len() {
        return false;
    }
    if inner.len() == key.len() {
        return inner == key && !inner.contains(&b'\\');
    }
    inner.contains(&b'\\') && matches!(Parser { b: quoted, i: 0 }.string(), Ok(s) if s.as_bytes() == key)
}

/// The index of the first byte at or after `i` that is not white space.
fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

// Strings and containers are skipped eight bytes at a time: compiled WebAssembly pays a
// bounds check, a fuel check and a branch per loop iteration, which a byte loop pays per
// byte of the request. The bytes of interest in a word are found with the usual bit tricks.
const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The eight bytes at `i` as a little-endian word (the caller checks they exist).
#[inline]
fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap())
}

/// Flags (high bit) the bytes of `w` equal to `c`. Only the lowest flag is sure: a borrow
/// may flag a byte above a real match, never one below.
#[inline]
fn bytes_eq(w: u64, c: u8) -> u64 {
    let x = w ^ (ONES * c as u64);
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// The index of the lowest flagged byte of a nonzero mask (the first in memory).
#[inline]
fn first_flagged(m: u64) -> usize {
    (m.trailing_zeros() >> 3) as usize
}

/// The index after the string whose opening quote is at `i` (the end of `b` if unclosed).
fn skip_string(b: &[u8], mut i: usize) -> usize {
    i += 1;
    loop {
        while i + 8 <= b.len() {
            let w = word(b, i);
            let m = bytes_eq(w, b'"') | bytes_eq(w, b'\\');
            if m != 0 {
                i += first_flagged(m);
                break;
            }
            i += 8;
        }
        match b.get(i) {
            None => return b.len(),
            Some(b'"') => return i + 1,
            Some(b'\\') => i += 2, // a backslash escapes the byte after it
            Some(_) => i += 1,
        }
    }
}

/// The index after the value that starts at `i` (the end of `b` if it does not end).
fn skip_value(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => skip_string(b, i),
        Some(b'{') | Some(b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                // To the next quote or bracket: '[' and ']' are '{' and '}' with bit 5
                // clear, and no other byte becomes either when it is set.
                while j + 8 <= b.len() {
                    let w = word(b, j);
                    let o = w | (ONES * 0x20);
                    let m = bytes_eq(w, b'"') | bytes_eq(o, b'{') | bytes_eq(o, b'}');
                    if m != 0 {
                        j += first_flagged(m);
                        break;
                    }
                    j += 8;
                }
                match b.get(j) {
                    None => break,
                    Some(b'"') => {
                        j = skip_string(b, j);
                        continue;
                    }
                    Some(b'{') | Some(b'[') => depth += 1,
                    Some(b'}') | Some(b']') => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    Some(_) => {}
                }
                j += 1;
            }
            b.len()
        }
        Some(_) => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                j += 1;
            }
            j
        }
        None => i,
    }
}
