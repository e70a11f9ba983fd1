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

/** A JSON value read in place: where it starts in the request's bytes, and where the text
 * it is in ends. Nothing is decoded until asked for, and a lookup reads the text only as
 * far as the member it looks for: an object found by get is open — its own end is found
 * only if raw() asks — so a path such as req.get("object").get("spec") reads each byte of
 * the request about once, as the Go SDK's jsonview and the Rust SDK's json::View do.
 * Lookups never return null: an absent value is Missing, so paths chain without checks:
 * req.get("object").get("metadata").get("labels").
 *
 * A Value is valid only during the hook call whose request it reads (the host overwrites
 * the request with the next one). The Values a call's lookups return are taken from a
 * small set that the next call reuses, so a lookup allocates nothing; keep strings
 * (str()), never Values, past the call. */
export class Value {
  constructor(public start: usize, public limit: usize, public item: bool = false) {}

  get kind(): Kind {
    if (this.start >= this.limit) return Kind.Missing;
    const c = load<u8>(this.start);
    if (c == 0x7b) return Kind.Object;
    if (c == 0x5b) return Kind.Array;
    if (c == 0x22) return Kind.String;
    if (c == 0x74 || c == 0x66) return Kind.Bool;
    if (c == 0x6e) return Kind.Null;
    return Kind.Number;
  }

  /** exists tells whether the value is there (null is there). */
  get exists(): bool {
    return this.start < this.limit;
  }

  /** get returns the member named key of an object (the first if repeated). Keys are
   * compared in place, the members before it are skipped and its own value is not read. */
  get(key: string): Value {
    const p = find(this.start, this.limit, key);
    return p == 0 ? MISSING : at(p, this.limit, false);
  }

  /** is tells whether this is the string s, compared in place without decoding it. */
  is(s: string): bool {
    const p = this.start;
    const e = this.limit;
    if (p >= e || load<u8>(p) != 0x22) return false;
    const n = <usize>s.length;
    if (p + 2 + n > e) return false;
    const sp = changetype<usize>(s);
    for (let i: usize = 0; i < n; i++) {
      const b = <u32>load<u8>(p + 1 + i);
      if (b == 0x5c || b >= 0x80) return this.str() == s;
      if (b != <u32>load<u16>(sp + (i << 1))) return false;
    }
    // Every byte up to here matched s; anything but the closing quote makes it longer.
    return load<u8>(p + 1 + n) == 0x22;
  }

  /** has tells whether an object has a member named key (its value is not read). */
  has(key: string): bool {
    return find(this.start, this.limit, key) != 0;
  }

  /** first returns an array's first element (Missing if the array is empty or this is
   * not an array); with next it walks the array without allocating:
   *   for (let c = list.first(); c.exists; c = c.next()) ... */
  first(): Value {
    const e = this.limit;
    let p = this.start;
    if (p >= e || load<u8>(p) != 0x5b) return MISSING;
    p = ws(p + 1, e);
    if (p >= e) return broken(p);
    if (load<u8>(p) == 0x5d) return MISSING;
    return at(p, e, true);
  }

  /** next returns the element after this one in its array (Missing after the last, and
   * for a value that first or next did not return). */
  next(): Value {
    if (!this.item) return MISSING;
    const e = this.limit;
    const ve = skip(this.start, e);
    if (ve == 0) return broken(this.start);
    const p = ws(ve, e);
    if (p < e) {
      const c = load<u8>(p);
      if (c == 0x2c) return at(ws(p + 1, e), e, true);
      if (c == 0x5d) return MISSING;
    }
    return broken(p);
  }

  /** items returns the elements of an array (or the member values of an object). */
  items(): Value[] {
    const out: Value[] = [];
    if (this.kind != Kind.Array && this.kind != Kind.Object) return out;
    const it = new Iter(this);
    while (it.next()) out.push(at(it.vs, this.limit, false));
    return out;
  }

  /** keys returns the member names of an object. */
  keys(): string[] {
    const out: string[] = [];
    if (this.kind != Kind.Object) return out;
    const it = new Iter(this);
    while (it.next()) out.push(decodeString(it.ks + 1, it.ke - 1));
    return out;
  }

  isString(): bool {
    return this.kind == Kind.String;
  }

  /** equalsUTF8 tells whether this is a string whose decoded bytes are the n at p. */
  equalsUTF8(p: usize, n: usize): bool {
    if (this.kind != Kind.String) return false;
    const end = skipString(this.start, this.limit);
    if (end == 0) {
      broken(this.start);
      return false;
    }
    const raw = this.start + 1;
    const rn = end - this.start - 2;
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
    const end = skipString(this.start, this.limit);
    if (end == 0) {
      broken(this.start);
      return "";
    }
    return decodeString(this.start + 1, end - 1);
  }

  /** num returns a number's value, or 0 for any other kind. */
  num(): f64 {
    if (this.kind != Kind.Number) return 0;
    const end = skip(this.start, this.limit);
    if (end == 0) {
      broken(this.start);
      return 0;
    }
    return parseFloat(String.UTF8.decodeUnsafe(this.start, end - this.start));
  }

  /** raw returns the value's JSON text ("" for a missing value). */
  raw(): string {
    if (this.start >= this.limit) return "";
    const end = skip(this.start, this.limit);
    if (end == 0) {
      broken(this.start);
      return "";
    }
    return String.UTF8.decodeUnsafe(this.start, end - this.start);
  }
}

/** MISSING is the value of every absent member. */
export const MISSING = new Value(0, 0);

// The Values lookups return come from this set, in order, and call() starts it over for
// each request: a Value lives only as long as the request it reads, so a call's lookups
// allocate nothing. A call that makes more than POOL Values (a scheduling hook walking
// thousands of nodes) allocates the rest, which the collector frees.
const POOL = 64;
const pool = new StaticArray<Value | null>(POOL);
let used = 0;

// Where the request being read starts, and where the reading found it broken (0: not).
let base: usize = 0;
let bad: usize = 0;

@inline
function at(start: usize, limit: usize, item: bool): Value {
  if (used < POOL) {
    let v = unchecked(pool[used]);
    used++;
    if (v === null) {
      v = new Value(start, limit, item);
      unchecked((pool[used - 1] = v));
      return v;
    }
    v.start = start;
    v.limit = limit;
    v.item = item;
    return v;
  }
  return new Value(start, limit, item);
}

/** broken records that the request's text is not JSON at p (the first such place is
 * reported) and answers as for a missing value. */
function broken(p: usize): Value {
  if (bad == 0) bad = p + 1;
  return MISSING;
}

/** begin starts reading a new request: the Values of the last one are reused. */
export function begin(ptr: usize): void {
  used = 0;
  bad = 0;
  base = ptr;
}

/** readOK tells whether what was read of the request since begin is JSON. */
@inline
export function readOK(): bool {
  return bad == 0;
}

/** malformed returns why the request read since begin is not JSON, or "" if what was
 * read of it is. */
export function malformed(): string {
  if (bad == 0) return "";
  return "request is not valid JSON (at byte " + (bad - 1 - base).toString() + ")";
}

/** parseUTF8 reads the len bytes of UTF-8 JSON at ptr (a hook's request). Text is
 * checked lazily, as far as it is read, and not walked first: an object or array must
 * end with its closing bracket, a scalar is checked whole, and each lookup checks what it
 * passes over. malformed() tells what was found broken. */
export function parseUTF8(ptr: usize, len: i32): Value {
  const s = ws(ptr, ptr + <usize>len);
  let e = ptr + <usize>len;
  while (e > s && isWS(load<u8>(e - 1))) e--;
  if (e <= s) return broken(s);
  const c = load<u8>(s);
  const last = load<u8>(e - 1);
  if (c == 0x7b || c == 0x5b) {
    if (e - s < 2 || last != c + 2) return broken(e - 1); // '{' + 2 == '}', '[' + 2 == ']'
  } else if (skip(s, e) != e) return broken(s);
  return at(s, e, false);
}

/** find returns where the value of the member key of the object at p starts, or 0 if
 * p is not an object or it has no such member. It is one loop, the values it passes over
 * skipped inline: in a guest every call costs its code's cold cache lines. */
@inline
function find(p: usize, e: usize, key: string): usize {
  if (p >= e || load<u8>(p) != 0x7b) return 0;
  p = ws(p + 1, e);
  if (p < e && load<u8>(p) == 0x7d) return 0;
  while (true) {
    if (p >= e || load<u8>(p) != 0x22) return brokenAt(p);
    const ke = skipString(p, e);
    if (ke == 0) return brokenAt(p);
    const match = spanIs(p, ke, key);
    p = ws(ke, e);
    if (p >= e || load<u8>(p) != 0x3a) return brokenAt(p);
    p = ws(p + 1, e);
    if (match) return p < e ? p : brokenAt(p);
    const ve = skipValue(p, e);
    if (ve == 0) return brokenAt(p);
    p = ws(ve, e);
    if (p >= e) return brokenAt(p);
    const c = load<u8>(p);
    if (c == 0x7d) return 0;
    if (c != 0x2c) return brokenAt(p);
    p = ws(p + 1, e);
  }
  return 0;
}

@inline
function brokenAt(p: usize): usize {
  broken(p);
  return 0;
}

/** Iter walks the elements of an array or the members of an object: after next, the
 * key's span (quotes included) is ks..ke and the value starts at vs. */
class Iter {
  p: usize;
  end: usize;
  object: bool;
  started: bool = false;
  ks: usize = 0;
  ke: usize = 0;
  vs: usize = 0;

  constructor(v: Value) {
    this.p = v.start + 1;
    this.end = v.limit;
    this.object = v.kind == Kind.Object;
  }

  next(): bool {
    const e = this.end;
    let p = ws(this.p, e);
    if (p >= e) return this.stop(p);
    let c = load<u8>(p);
    if (c == 0x7d || c == 0x5d) return this.stop(0);
    if (this.started) {
      if (c != 0x2c) return this.stop(p);
      p = ws(p + 1, e);
    }
    this.started = true;
    if (this.object) {
      if (p >= e || load<u8>(p) != 0x22) return this.stop(p);
      const ke = skipString(p, e);
      if (ke == 0) return this.stop(p);
      this.ks = p;
      this.ke = ke;
      p = ws(ke, e);
      if (p >= e || load<u8>(p) != 0x3a) return this.stop(p);
      p = ws(p + 1, e);
    }
    const ve = skip(p, e);
    if (ve == 0) return this.stop(p);
    this.vs = p;
    this.p = ve;
    return true;
  }

  /** stop ends the walk, recording that the text is broken at p unless p is 0. */
  stop(p: usize): bool {
    if (p != 0) broken(p);
    this.p = this.end;
    return false;
  }
}

/** spanIs tells whether the JSON string at start..end (quotes included) decodes to s. A
 * plain ASCII string (no escapes) is compared in place with s's UTF-16 code units;
 * anything else is decoded first. */
@inline
function spanIs(start: usize, end: usize, s: string): bool {
  const raw = start + 1;
  const n = end - start - 2;
  const m = <usize>s.length;
  // Decoding never lengthens a string (an escape or a multi-byte character becomes at
  // most as many UTF-16 code units as it has bytes): a shorter text cannot be s.
  let same = n >= m;
  if (same) {
    const sp = changetype<usize>(s);
    for (let i: usize = 0; i < n; i++) {
      const b = <u32>load<u8>(raw + i);
      if (b == 0x5c || b >= 0x80) return decodedIs(raw, end - 1, s);
      if (i >= m || b != <u32>load<u16>(sp + (i << 1))) {
        same = false;
        // Unless an escape or a multi-byte character follows, the text is not s.
        if (n == m) break;
      }
    }
  }
  return same;
}

/** decodedIs tells whether the raw text p..e of a JSON string decodes to s. */
function decodedIs(p: usize, e: usize, s: string): bool {
  return decodeString(p, e) == s;
}

@inline
function isWS(c: u8): bool {
  return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d;
}

@inline
function ws(p: usize, e: usize): usize {
  while (p < e && isWS(load<u8>(p))) p++;
  return p;
}

// Strings and containers are skipped eight bytes at a time: compiled WebAssembly pays a
// bounds check, a fuel check and a branch per loop iteration, which a byte loop pays per
// byte of the request. The bytes of interest in a word are found with the usual bit tricks.
const ONES: u64 = 0x0101010101010101;
const HIGHS: u64 = 0x8080808080808080;

/** bytesEq flags (high bit) the bytes of w equal to c. Only the lowest flag is sure: a
 * borrow may flag a byte above a real match, never one below. */
@inline
function bytesEq(w: u64, c: u64): u64 {
  const x = w ^ (ONES * c);
  return (x - ONES) & ~x & HIGHS;
}

/** firstFlagged is the offset of the lowest flagged byte of a nonzero mask (the first in
 * memory). */
@inline
function firstFlagged(m: u64): usize {
  return <usize>(ctz<u64>(m) >> 3);
}

/** skipString returns the byte after the string whose opening quote is at p, or 0. */
@inline
function skipString(p: usize, e: usize): usize {
  p++;
  while (true) {
    while (p + 8 <= e) {
      const w = load<u64>(p);
      const m = bytesEq(w, 0x22) | bytesEq(w, 0x5c);
      if (m != 0) {
        p += firstFlagged(m);
        break;
      }
      p += 8;
    }
    if (p >= e) return 0;
    const c = load<u8>(p);
    if (c == 0x22) return p + 1;
    p += c == 0x5c ? 2 : 1; // a backslash escapes the byte after it
  }
  return 0;
}

/** skip returns the byte after the value at p, or 0. It checks nesting and strings. */
function skip(p: usize, e: usize): usize {
  return skipValue(p, e);
}

@inline
function skipValue(p: usize, e: usize): usize {
  if (p >= e) return 0;
  const c = load<u8>(p);
  if (c == 0x22) return skipString(p, e);
  if (c == 0x7b || c == 0x5b) {
    let depth = 0;
    while (p < e) {
      // To the next quote or bracket: '[' and ']' are '{' and '}' with bit 5 clear, and
      // no other byte becomes either when it is set.
      while (p + 8 <= e) {
        const w = load<u64>(p);
        const o = w | (ONES * 0x20);
        const m = bytesEq(w, 0x22) | bytesEq(o, 0x7b) | bytesEq(o, 0x7d);
        if (m != 0) {
          p += firstFlagged(m);
          break;
        }
        p += 8;
      }
      if (p >= e) return 0;
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

  @inline
  private grow(more: i32): void {
    if (this.len + more > this.buf.byteLength) this.enlarge(more);
  }

  private enlarge(more: i32): void {
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

  /** raw writes s as is (it must already be JSON text). ASCII text is copied in one
   * loop; from the first other character on, s is encoded as UTF-8. */
  raw(s: string): void {
    const n = s.length;
    this.grow(n);
    const src = changetype<usize>(s);
    const dst = changetype<usize>(this.buf) + <usize>this.len;
    for (let i = 0; i < n; i++) {
      const c = load<u16>(src + (<usize>i << 1));
      if (c >= 0x80) {
        this.len += i;
        this.rawUTF8(s.substr(i));
        return;
      }
      store<u8>(dst + <usize>i, <u8>c);
    }
    this.len += n;
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
