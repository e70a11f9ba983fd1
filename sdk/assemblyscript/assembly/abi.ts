// The wasmplane ABI v1 plumbing for AssemblyScript (sdk/ABI.md §2–§5).
import { Value, Writer, begin, malformed, parseUTF8, readOK } from "./json";

/** wasmplane_abi_version names the ABI this module speaks (§2). */
export function wasmplane_abi_version(): i32 {
  return 1;
}

/** wasmplane_alloc hands the host a buffer. It is pinned, so the collector neither frees
 * nor reuses it while the host writes requests into it (§3). */
export function wasmplane_alloc(size: i32): usize {
  const ptr = __new(<usize>size, idof<ArrayBuffer>());
  __pin(ptr);
  // The runtime aligns objects to 16 bytes; the ABI asks for 8.
  if (ptr & 7) unreachable();
  return ptr;
}

/** wasmplane_free releases a buffer from wasmplane_alloc. */
export function wasmplane_free(ptr: usize, size: i32): void {
  __unpin(ptr);
}

@external("wasmplane", "log")
declare function hostLog(level: i32, ptr: usize, len: usize): void;

export const DEBUG = 0;
export const INFO = 1;
export const WARN = 2;
export const ERROR = 3;

/** log sends a message to the server log under the plugin's name (§5). */
export function log(level: i32, msg: string): void {
  const b = String.UTF8.encode(msg);
  hostLog(level, changetype<usize>(b), <usize>b.byteLength);
}

/** A hook handler reads the request and writes the whole answer to w. */
export type Handler = (req: Value, w: Writer) => void;

// The answer of the last call; a global, so the collector keeps it until the host has
// copied it out, which it does before the next call (§3).
const out = new Writer();

/** call runs a hook handler on the request at (ptr, len) and returns the packed location
 * of its answer: export each hook as
 *   export function validate(ptr: usize, len: i32): u64 { return call(ptr, len, onValidate); }
 * The request is read as the handler reads it, not checked whole first; if what is read
 * of it is not JSON, the answer is an error saying where, whatever the handler wrote. */
export function call(ptr: usize, len: i32, handler: Handler): u64 {
  out.reset();
  begin(ptr);
  const req = parseUTF8(ptr, len);
  if (readOK()) handler(req, out);
  if (!readOK()) out.error(malformed());
  else if (out.len == 0) out.error("plugin wrote no answer");
  return (<u64>changetype<usize>(out.buf) << 32) | <u64>out.len;
}

/** abort is the runtime's abort handler (asc --use abort=...): it logs the message and
 * traps, which fails the one call (ABI §4 kind "trap"). */
export function abort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  let m = "abort";
  if (message !== null) m += ": " + message;
  if (fileName !== null) m += " at " + fileName + ":" + line.toString() + ":" + column.toString();
  log(3, m); // ERROR: a literal, as abort may run before globals are initialized
  unreachable();
}
