// wasmplane plugin SDK for AssemblyScript, ABI version 1 (sdk/ABI.md). A plugin's entry
// file re-exports the ABI functions and exports one function per hook; see README.md.
export { wasmplane_abi_version, wasmplane_alloc, wasmplane_free, call, log, abort, Handler, DEBUG, INFO, WARN, ERROR } from "./abi";
export { Kind, Value, MISSING, Writer, parseUTF8, quote } from "./json";
export { Patch, Admission, User, pointerEscape, authenticated, unauthenticated, initialized, initializeRejected } from "./answers";
