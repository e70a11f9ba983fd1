// Builders for hook answers (sdk/ABI.md §7): JSON patches, admission answers with
// warnings and audit annotations, authentication answers and initialization answers.
// They write JSON text directly, so a plugin never assembles answers by hand.
import { Kind, Value, Writer, quote } from "./json";

/** pointerEscape encodes one JSON Pointer reference token (RFC 6901): "~" becomes "~0"
 * and "/" becomes "~1", so a label key like "example.com/owner" is one path step. */
export function pointerEscape(token: string): string {
  if (!token.includes("~") && !token.includes("/")) return token;
  return token.replaceAll("~", "~0").replaceAll("/", "~1");
}

/** Patch collects RFC 6902 operations, in order. Values are JSON text: pass quote(s)
 * for a string, "{}" for an empty object. */
export class Patch {
  private ops: string[] = [];

  /** add appends {"op":"add"}: it creates a member, replaces an existing one, or
   * appends to an array with a path ending in "/-". */
  add(path: string, valueJSON: string): void {
    this.op("add", path, valueJSON);
  }

  /** replace appends {"op":"replace"}; the target must exist. */
  replace(path: string, valueJSON: string): void {
    this.op("replace", path, valueJSON);
  }

  /** remove appends {"op":"remove"}. */
  remove(path: string): void {
    this.ops.push('{"op":"remove","path":' + quote(path) + "}");
  }

  private op(op: string, path: string, valueJSON: string): void {
    this.ops.push('{"op":"' + op + '","path":' + quote(path) + ',"value":' + valueJSON + "}");
  }

  /** length is the number of operations. */
  get length(): i32 {
    return this.ops.length;
  }

  /** write writes the patch as a JSON array. */
  write(w: Writer): void {
    w.byte(0x5b);
    for (let i = 0; i < this.ops.length; i++) {
      if (i > 0) w.byte(0x2c);
      w.raw(this.ops[i]);
    }
    w.byte(0x5d);
  }
}

/** Admission builds a mutate or validate answer (ABI §7.3): an optional patch, warnings
 * returned to the client, and audit annotations recorded by the server. */
export class Admission {
  patch: Patch = new Patch();
  warnings: string[] = [];
  private auditKeys: string[] = [];
  private auditValues: string[] = [];

  /** warn adds a Warning for the client (also sent when the request is refused). */
  warn(message: string): void {
    this.warnings.push(message);
  }

  /** annotate records an audit annotation; the server names it <plugin>/<key>. */
  annotate(key: string, value: string): void {
    for (let i = 0; i < this.auditKeys.length; i++) {
      if (this.auditKeys[i] == key) {
        this.auditValues[i] = value;
        return;
      }
    }
    this.auditKeys.push(key);
    this.auditValues.push(value);
  }

  /** allow answers {"allowed":true,…} with the patch (mutate), warnings and annotations. */
  allow(w: Writer): void {
    w.raw('{"allowed":true');
    if (this.patch.length > 0) {
      w.raw(',"patch":');
      this.patch.write(w);
    }
    this.extras(w);
    w.byte(0x7d);
  }

  /** deny refuses the request; the client sees message (code 403, reason Forbidden unless
   * given). Any patch is dropped, as the host ignores it. */
  deny(w: Writer, message: string, code: i32 = 403, reason: string = "Forbidden"): void {
    w.raw('{"allowed":false,"code":');
    w.int(code);
    w.raw(',"reason":');
    w.str(reason);
    w.raw(',"message":');
    w.str(message);
    this.extras(w);
    w.byte(0x7d);
  }

  private extras(w: Writer): void {
    if (this.warnings.length > 0) {
      w.raw(',"warnings":[');
      for (let i = 0; i < this.warnings.length; i++) {
        if (i > 0) w.byte(0x2c);
        w.str(this.warnings[i]);
      }
      w.byte(0x5d);
    }
    if (this.auditKeys.length > 0) {
      w.raw(',"auditAnnotations":{');
      for (let i = 0; i < this.auditKeys.length; i++) {
        if (i > 0) w.byte(0x2c);
        w.str(this.auditKeys[i]);
        w.byte(0x3a);
        w.str(this.auditValues[i]);
      }
      w.byte(0x7d);
    }
  }
}

/** User is a UserInfo (ABI §7): the identity an authenticate hook answers with. */
export class User {
  username: string = "";
  uid: string = "";
  groups: string[] = [];
  /** extraJSON is the JSON text of "extra" (an object of string lists), or "". */
  extraJSON: string = "";

  /** read decodes a UserInfo object; null when it is not one (not an object, a member
   * of the wrong type). The result owns its strings: it outlives the request. */
  static read(v: Value): User | null {
    if (v.kind != Kind.Object) return null;
    const u = new User();
    const name = v.get("username");
    const uid = v.get("uid");
    const groups = v.get("groups");
    const extra = v.get("extra");
    if (!name.isString() || !optional(uid, Kind.String) || !optional(groups, Kind.Array) || !optional(extra, Kind.Object)) return null;
    u.username = name.str();
    u.uid = uid.str();
    const gs = groups.items();
    for (let i = 0; i < gs.length; i++) {
      if (!gs[i].isString()) return null;
      u.groups.push(gs[i].str());
    }
    const lists = extra.items();
    for (let i = 0; i < lists.length; i++) {
      if (lists[i].kind != Kind.Array) return null;
      const vals = lists[i].items();
      for (let j = 0; j < vals.length; j++) if (!vals[j].isString()) return null;
    }
    if (extra.kind == Kind.Object) u.extraJSON = extra.raw();
    return u;
  }

  /** write writes the user as a UserInfo object. */
  write(w: Writer): void {
    w.raw('{"username":');
    w.str(this.username);
    if (this.uid.length > 0) {
      w.raw(',"uid":');
      w.str(this.uid);
    }
    if (this.groups.length > 0) {
      w.raw(',"groups":[');
      for (let i = 0; i < this.groups.length; i++) {
        if (i > 0) w.byte(0x2c);
        w.str(this.groups[i]);
      }
      w.byte(0x5d);
    }
    if (this.extraJSON.length > 0) {
      w.raw(',"extra":');
      w.raw(this.extraJSON);
    }
    w.byte(0x7d);
  }
}

function optional(v: Value, kind: Kind): bool {
  return v.kind == Kind.Missing || v.kind == Kind.Null || v.kind == kind;
}

/** authenticated answers an authenticate call with the user (ABI §7.2). */
export function authenticated(w: Writer, user: User): void {
  w.raw('{"authenticated":true,"user":');
  user.write(w);
  w.byte(0x7d);
}

/** unauthenticated answers an authenticate call with a refusal. Without a message the
 * credential is not this plugin's kind and the next authenticator is tried; with one the
 * plugin recognised the credential and it is not valid. */
export function unauthenticated(w: Writer, message: string = ""): void {
  if (message.length == 0) {
    w.raw('{"authenticated":false}');
    return;
  }
  w.raw('{"authenticated":false,"message":');
  w.str(message);
  w.byte(0x7d);
}

/** initialized answers an initialize call (ABI §7.4): {} when the patch is empty, else
 * {"patch":[…]}. */
export function initialized(w: Writer, patch: Patch): void {
  if (patch.length == 0) {
    w.raw("{}");
    return;
  }
  w.raw('{"patch":');
  patch.write(w);
  w.byte(0x7d);
}

/** initializeRejected fails the object's initialization: it is deleted and the creator
 * sees message (code 422, reason Invalid unless given). */
export function initializeRejected(w: Writer, message: string, code: i32 = 422, reason: string = "Invalid"): void {
  w.raw('{"rejected":true,"code":');
  w.int(code);
  w.raw(',"reason":');
  w.str(reason);
  w.raw(',"message":');
  w.str(message);
  w.byte(0x7d);
}
