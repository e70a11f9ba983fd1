//! probe answers what the Rust SDK's JSON view finds in a document: the request is
//! {"doc": <any JSON>, "path": [<member name or element index>, ...]} and the answer
//! {"raw": <the value's text>, "str": <its decoded string, for a string>} or
//! {"missing": true}. sdk/readers_test.go compares it with Go's reading.

use wasmplane::json::{quote, View};

fn probe(req: View) -> Result<String, String> {
    let mut v = req.get("doc");
    for step in req.get("path").items() {
        v = match step.raw().first() {
            Some(b'"') => v.get(&step.str()),
            _ => {
                let n: usize = std::str::from_utf8(step.raw())
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or("a path step is neither a name nor an index")?;
                match v.raw().first() {
                    Some(b'[') => v.items().nth(n).unwrap_or(View::new(b"")),
                    _ => View::new(b""),
                }
            }
        };
    }
    if !v.exists() {
        return Ok(r#"{"missing":true}"#.into());
    }
    let raw = std::str::from_utf8(v.raw()).map_err(|e| e.to_string())?;
    let mut out = format!(r#"{{"raw":{}"#, quote(raw));
    if v.raw().first() == Some(&b'"') {
        out.push_str(&format!(r#","str":{}"#, quote(&v.str())));
    }
    out.push('}');
    Ok(out)
}

wasmplane::hook_view!(validate, probe);
