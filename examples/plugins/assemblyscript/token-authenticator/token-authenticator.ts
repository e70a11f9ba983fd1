// token-authenticator: a wasmplane authenticate plugin in AssemblyScript that accepts
// static bearer tokens listed in its configuration. Same behaviour as
// examples/plugins/go/token-authenticator.
import { Kind, User, Value, Writer, authenticated, call, unauthenticated } from "../../../../sdk/assemblyscript/assembly/index";
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free } from "../../../../sdk/assemblyscript/assembly/index";

// The tokens, decoded once per instance by configure.
const tokens = new Map<string, User>();

function onConfigure(req: Value, w: Writer): void {
  const list = req.get("config").get("tokens");
  if (list.kind != Kind.Missing && list.kind != Kind.Null && list.kind != Kind.Object) {
    w.error("config.tokens must be an object of users");
    return;
  }
  const names = list.keys();
  const users = list.items();
  if (users.length == 0) {
    w.error("config.tokens is empty");
    return;
  }
  for (let i = 0; i < users.length; i++) {
    const u = User.read(users[i]);
    if (u === null) {
      w.error("config.tokens: the user of a token is not a UserInfo");
      return;
    }
    if (names[i].length == 0 || u.username.length == 0) {
      w.error("every token needs a non-empty token and username");
      return;
    }
    tokens.set(names[i], u);
  }
  w.raw("{}");
}

function isSpace(c: i32): bool {
  return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0b || c == 0x0c || c == 0x0d;
}

/** trimSpace drops ASCII white space at both ends, as Go's strings.TrimSpace does. */
function trimSpace(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && isSpace(s.charCodeAt(a))) a++;
  while (b > a && isSpace(s.charCodeAt(b - 1))) b--;
  return s.substring(a, b);
}

/** isBearer tells whether scheme is "Bearer" in any case. An ASCII comparison is exact
 * (no other character folds to these letters) and spares the Unicode case tables. */
function isBearer(scheme: string): bool {
  const want = "bearer";
  if (scheme.length != want.length) return false;
  for (let i = 0; i < want.length; i++) {
    if ((scheme.charCodeAt(i) | 0x20) != want.charCodeAt(i)) return false;
  }
  return true;
}

function onAuthenticate(req: Value, w: Writer): void {
  const values = req.get("headers").get("Authorization").items();
  for (let i = 0; i < values.length; i++) {
    const h = values[i].str();
    const sp = h.indexOf(" ");
    if (sp < 0 || !isBearer(h.substring(0, sp))) continue;
    const tok = trimSpace(h.substring(sp + 1));
    if (!tokens.has(tok)) {
      unauthenticated(w, "unknown bearer token");
      return;
    }
    authenticated(w, tokens.get(tok));
    return;
  }
  // No bearer token: not ours, let the next authenticator look.
  unauthenticated(w);
}

export function configure(ptr: usize, len: i32): u64 {
  return call(ptr, len, onConfigure);
}

export function authenticate(ptr: usize, len: i32): u64 {
  return call(ptr, len, onAuthenticate);
}
