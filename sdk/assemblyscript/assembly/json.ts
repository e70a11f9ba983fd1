// A minimal JSON reader and writer for wasmplane plugins (sdk/ABI.md §7): enough to pick
// members out of a request and write an answer, without the size of a general library.
// The reader works in place on the request bytes, like the C SDK's.

/** The type of a JSON value; Missing stands for an absent member or unreadable text. */
export enum Kind {
  Missing,
  Null,
  Bool,
  Number,
  String,
  Array,
  Object,
}

/** A JSON value read in place: a span of the request's bytes. Nothing is decoded until
 * asked for, so a plugin that reads three members of each of 5,000 nodes allocates little.
 * Lookups never return null: an absent value is Missing, so paths chain without checks:
 * req.get("object").get("metadata").get("labels"). A Value is valid only during the hook
 * call whose request it reads. */
export class Value {
  constructor(public start: usize, public end: usize) {}

  get kind(): Kind {
    if (this.end <= this.start) return Kind.Missing;
    const c = load<u8>(this.start);
    if (c == 0x7b) return Kind.Object;
    if (c == 0x5b) return Kind.Array;
    if (c == 0x22) return Kind.String;
    if (c == 0x74 || c == 0x66) return Kind.Bool;
    if (c == 0x6e) return Kind.Null;
    return Kind.Number;
  }

  /** get returns the member named key of an object (the first if repeated). Keys are
   * compared in place, and no Value is made for the members passed over: a lookup
   * allocates only the Value it returns. */
  get(key: string): Value {
    if (this.kind != Kind.Object) return MISSING;
    const it = new Iter(this);
    while (it.next()) {
      if (spanIs(it.ks, it.ke, key)) return new Value(it.vs, it.ve);
    }
    return MISSING;
  }

  /** is tells whether this is the string s, compared in place without decoding it. */
  is(s: string): bool {
    return this.kind == Kind.String && spanIs(this.start, this.end, s);
  }

  /** has tells whether an object has a member named key. */
  has(key: string): bool {
    return this.get(key).kind != Kind.Missing;
  }

  /** items returns the elements of an array (or the member values of an object). */
  items(): Value[] {
    const out: Value[] = [];
    if (this.kind != Kind.Array && this.kind != Kind.Object) return out;
    const it = new Iter(this);
    while (it.next()) out.push(new Value(it.vs, it.ve));
    return out;
  }

  /** keys returns the member names of an object. */
  keys(): string[] {
    const out: string[] = [];
    if (this.kind != Kind.Object) return out;
    const it = new Iter(this);
    while (it.next()) out.push(new Value(it.ks, it.ke).str());
    return out;
  }

  isString(): bool {
    return this.kind == Kind.String;
  }

  /** equalsUTF8 tells whether this is a string whose decoded bytes are the n at p. */
  equalsUTF8(p: usize, n: usize): bool {
    if (this.kind != Kind.String) return false;
    const raw = this.start + 1;
    const rn = this.end - this.start - 2;
    let plain = true;
    for (let i: usize = 0; i < rn; i++) {
      if (load<u8>(raw + i) == 0x5c) {
        plain = false;
        break;
      }
    }
    if (plain) return rn == n && memory.compare(raw, p, n) == 0;
    return this.str() == String.UTF8.decodeUnsafe(p, n);
  }

  /** str returns a string's decoded value, or "" for any other kind. */
  str(): string {
    if (this.kind != Kind.String) return "";
    return decodeString(this.start + 1, this.end - 1);
  }

  /** num returns a number's value, or 0 for any other kind. */
  num(): f64 {
    if (this.kind != Kind.Number) return 0;
    return parseFloat(String.UTF8.decodeUnsafe(this.start, this.end - this.start));
  }

  /** raw returns the value's JSON text. */
  raw(): string {
    return String.UTF8.decodeUnsafe(this.start, this.end - this.start);
  }
}

/** MISSING is the value of every absent member. */
export const MISSING = new Value(0, 0);

/** parseUTF8 reads the len bytes of UTF-8 JSON at ptr (a hook's request). Text is
 * checked lazily, as far as it is read: the host only sends JSON it encoded itself. */
export function parseUTF8(ptr: usize, len: i32): Value {
  let s = ws(ptr, ptr + <usize>len);
  let e = ptr + <usize>len;
  while (e > s && isWS(load<u8>(e - 1))) e--;
  const end = skip(s, e);
  return end == e && e > s ? new Value(s, e) : MISSING;
}

/** Iter walks the elements of an array or the members of an object: after next, the
 * key's span (quotes included) is ks..ke and the value's vs..ve. */
class Iter {
  p: usize;
  end: usize;
  object: bool;
  ks: usize = 0;
  ke: usize = 0;
  vs: usize = 0;
  ve: usize = 0;

  constructor(v: Value) {
    this.p = v.start + 1;
    this.end = v.end - 1;
    this.object = v.kind == Kind.Object;
  }

  next(): bool {
    let p = ws(this.p, this.end);
    if (p < this.end && load<u8>(p) == 0x2c) p = ws(p + 1, this.end);
    if (p >= this.end) return false;
    if (this.object) {
      if (load<u8>(p) != 0x22) return this.stop();
      const ke = skip(p, this.end);
      if (ke == 0) return this.stop();
      this.ks = p;
      this.ke = ke;
      p = ws(ke, this.end);
      if (p >= this.end || load<u8>(p) != 0x3a) return this.stop();
      p = ws(p + 1, this.end);
    }
    const ve = skip(p, this.end);
    if (ve == 0) return this.stop();
    this.vs = p;
    this.ve = ve;
    this.p = ve;
    return true;
  }

  stop(): bool {
    this.p = this.end;
    return false;
  }
}

/** spanIs tells whether the JSON string at start..end (quotes included) decodes to s. A
 * plain ASCII string (no escapes) is compared in place with s's UTF-16 code units;
 * anything else is decoded first. */
function spanIs(start: usize, end: usize, s: string): bool {
  const raw = start + 1;
  const n = <i32>(end - start) - 2;
  for (let i = 0; i < n; i++) {
    const b = load<u8>(raw + <usize>i);
    if (b == 0x5c || b >= 0x80) return decodeString(raw, end - 1) == s;
  }
  if (n != s.length) return false;
  for (let i = 0; i < n; i++) {
    if (<i32>load<u8>(raw + <usize>i) != <i32>s.charCodeAt(i)) return false;
  }
  return true;
}

function isWS(c: u8): bool {
  return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d;
}

function ws(p: usize, e: usize): usize {
  while (p < e && isWS(load<u8>(p))) p++;
  return p;
}

function skipString(p: usize, e: usize): usize {
  for (p++; p < e; p++) {
    const c = load<u8>(p);
    if (c == 0x5c) p++;
    else if (c == 0x22) return p + 1;
  }
  return 0;
}

/** skip returns the byte after the value at p, or 0. It checks nesting and strings. */
function skip(p: usize, e: usize): usize {
  if (p >= e) return 0;
  const c = load<u8>(p);
  if (c == 0x22) return skipString(p, e);
  if (c == 0x7b || c == 0x5b) {
    let depth = 0;
    while (p < e) {
      const d = load<u8>(p);
      if (d == 0x22) {
        p = skipString(p, e);
        if (p == 0) return 0;
        continue;
      }
      if (d == 0x7b || d == 0x5b) depth++;
      else if (d == 0x7d || d == 0x5d) {
        if (--depth == 0) return p + 1;
      }
      p++;
    }
    return 0;
  }
  const s = p;
  while (p < e) {
    const d = load<u8>(p);
    if (d == 0x2c || d == 0x7d || d == 0x5d || d == 0x3a || isWS(d)) break;
    p++;
  }
  return p > s ? p : 0;
}

function hexDigit(c: u8): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

function hex4(p: usize, e: usize): i32 {
  if (p + 4 > e) return -1;
  let v = 0;
  for (let i: usize = 0; i < 4; i++) {
    const h = hexDigit(load<u8>(p + i));
    if (h < 0) return -1;
    v = (v << 4) | h;
  }
  return v;
}

/** decodeString decodes the raw text p..e of a JSON string (between its quotes). */
function decodeString(p: usize, e: usize): string {
  let out = "";
  let start = p;
  while (p < e) {
    if (load<u8>(p) != 0x5c) {
      p++;
      continue;
    }
    out += String.UTF8.decodeUnsafe(start, p - start);
    if (p + 1 >= e) break;
    const c = load<u8>(p + 1);
    p += 2;
    if (c == 0x75 /* u */) {
      const h = hex4(p, e);
      if (h < 0) break;
      out += String.fromCharCode(h); // a UTF-16 code unit: surrogate pairs join by themselves
      p += 4;
    } else if (c == 0x6e) out += "\n";
    else if (c == 0x74) out += "\t";
    else if (c == 0x72) out += "\r";
    else if (c == 0x62) out += "\b";
    else if (c == 0x66) out += "\f";
    else out += String.fromCharCode(c);
    start = p;
  }
  return out + String.UTF8.decodeUnsafe(start, e - start);
}

/** Writer builds UTF-8 JSON text in a growable buffer. */
export class Writer {
  buf: ArrayBuffer = new ArrayBuffer(1024);
  len: i32 = 0;

  reset(): void {
    this.len = 0;
  }

  private grow(more: i32): void {
    if (this.len + more <= this.buf.byteLength) return;
    let cap = this.buf.byteLength * 2;
    while (cap < this.len + more) cap *= 2;
    const b = new ArrayBuffer(cap);
    memory.copy(changetype<usize>(b), changetype<usize>(this.buf), <usize>this.len);
    this.buf = b;
  }

  byte(c: i32): void {
    this.grow(1);
    store<u8>(changetype<usize>(this.buf) + <usize>this.len, <u8>c);
    this.len++;
  }

  /** raw writes s as is (it must already be JSON text). */
  raw(s: string): void {
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) {
        this.rawUTF8(s.substr(i));
        return;
      }
      this.byte(c);
    }
  }

  private rawUTF8(s: string): void {
    const b = String.UTF8.encode(s);
    this.grow(b.byteLength);
    memory.copy(changetype<usize>(this.buf) + <usize>this.len, changetype<usize>(b), <usize>b.byteLength);
    this.len += b.byteLength;
  }

  /** str writes s as a quoted, escaped JSON string. */
  str(s: string): void {
    this.byte(0x22);
    this.raw(quoteBody(s));
    this.byte(0x22);
  }

  int(v: i64): void {
    this.raw(v.toString());
  }

  bool(v: bool): void {
    this.raw(v ? "true" : "false");
  }

  /** error replaces the answer with {"error": msg}: the plugin failed (ABI §4). */
  error(msg: string): void {
    this.reset();
    this.raw('{"error":');
    this.str(msg.length > 0 ? msg : "plugin error");
    this.byte(0x7d);
  }
}

const HEX = "0123456789abcdef";

/** quoteBody escapes s for the inside of a JSON string. */
function quoteBody(s: string): string {
  let clean = true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c == 0x22 || c == 0x5c) {
      clean = false;
      break;
    }
  }
  if (clean) return s;
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22) out += '\\"';
    else if (c == 0x5c) out += "\\\\";
    else if (c == 0x0a) out += "\\n";
    else if (c == 0x0d) out += "\\r";
    else if (c == 0x09) out += "\\t";
    else if (c < 0x20) out += "\\u00" + HEX.charAt(c >> 4) + HEX.charAt(c & 15);
    else out += String.fromCharCode(c);
  }
  return out;
}

/** quote returns s as a quoted JSON string (as Go's %q shows ASCII text). */
export function quote(s: string): string {
  return '"' + quoteBody(s) + '"';
}
