//! wasmplane plugin SDK for Rust, ABI version 1 (see `sdk/ABI.md`).
//!
//! Linking this crate into a `cdylib` for `wasm32-wasi` exports `wasmplane_abi_version`,
//! `wasmplane_alloc` and `wasmplane_free`; a plugin adds one [`hook!`] per hook:
//!
//! ```ignore
//! fn on_validate(req: &wasmplane::json::Value) -> Result<String, String> { Ok(r#"{"allowed":true}"#.into()) }
//! wasmplane::hook!(validate, on_validate);
//! ```
//!
//! The crate has no dependencies: [`json`] is a small reader and writer. Typed answers:
//! [`admission`] (mutate, validate), [`authenticate`], [`initialize`], [`scheduling`]
//! (filter, score, with the node table), and [`patch`] for JSON Patches.

pub mod admission;
pub mod authenticate;
pub mod initialize;
pub mod json;
pub mod patch;
pub mod scheduling;

use std::alloc::{alloc, dealloc, Layout};
use std::cell::RefCell;

/// The ABI version this SDK speaks.
pub const ABI_VERSION: i32 = 1;

/// Names the ABI version of the module (ABI §2).
#[no_mangle]
pub extern "C" fn wasmplane_abi_version() -> i32 {
    ABI_VERSION
}

/// Hands the host `size` bytes aligned to 8 (ABI §3); 0 when memory is exhausted.
#[no_mangle]
pub extern "C" fn wasmplane_alloc(size: u32) -> *mut u8 {
    match Layout::from_size_align(size.max(1) as usize, 8) {
        // SAFETY: the layout has a non-zero size.
        Ok(layout) => unsafe { alloc(layout) },
        Err(_) => std::ptr::null_mut(),
    }
}

/// Releases a buffer from `wasmplane_alloc`; the host passes the same size back.
#[no_mangle]
pub extern "C" fn wasmplane_free(ptr: *mut u8, size: u32) {
    if ptr.is_null() {
        return;
    }
    if let Ok(layout) = Layout::from_size_align(size.max(1) as usize, 8) {
        // SAFETY: the host frees only what wasmplane_alloc returned, with its size.
        unsafe { dealloc(ptr, layout) }
    }
}

#[link(wasm_import_module = "wasmplane")]
extern "C" {
    #[link_name = "log"]
    fn host_log(level: i32, ptr: *const u8, len: u32);
}

/// Log levels of [`log`].
pub const DEBUG: i32 = 0;
/// Informational messages.
pub const INFO: i32 = 1;
/// Warnings.
pub const WARN: i32 = 2;
/// Errors.
pub const ERROR: i32 = 3;

/// Sends a message to the server log under the plugin's name (ABI §5).
pub fn log(level: i32, msg: &str) {
    // SAFETY: the host reads msg.len() bytes at msg.as_ptr() during the call only.
    unsafe { host_log(level, msg.as_ptr(), msg.len() as u32) }
}

/// A hook handler: the request, decoded; `Ok` with the answer's JSON text, or `Err` with
/// a message when the plugin could not do its work (the call fails with kind `guest`).
pub type Handler = fn(&json::Value) -> Result<String, String>;

thread_local! {
    // The answer of the last call: the host copies it out before the next call (ABI §3).
    static OUT: RefCell<Vec<u8>> = RefCell::new(Vec::new());
}

/// A hook handler that reads the request in place ([`json::View`]): it decodes only what
/// it looks at, which for a handler reading a few members is far less guest code and no
/// allocation per member. Answers as [`Handler`].
pub type ViewHandler = fn(json::View) -> Result<String, String>;

/// Runs a handler on the request at `(ptr, len)` and returns the packed location of its
/// answer. Use it through [`hook!`].
pub fn call(ptr: u32, len: u32, handler: Handler) -> u64 {
    let answer = match json::parse(request(ptr, len)) {
        Ok(v) => handler(&v),
        Err(e) => Err(format!("request: {}", e)),
    };
    answer_with(answer)
}

/// Runs a [`ViewHandler`] on the request at `(ptr, len)`, as [`call`] runs a [`Handler`].
/// Use it through [`hook_view!`].
pub fn call_view(ptr: u32, len: u32, handler: ViewHandler) -> u64 {
    answer_with(handler(json::View::new(request(ptr, len))))
}

fn request<'a>(ptr: u32, len: u32) -> &'a [u8] {
    // SAFETY: the host wrote len bytes at ptr, valid for the duration of this call.
    unsafe { std::slice::from_raw_parts(ptr as usize as *const u8, len as usize) }
}

/// Keeps a handler's answer (or its error as an error answer) until the next call and
/// returns its packed location.
fn answer_with(answer: Result<String, String>) -> u64 {
    let text = match answer {
        Ok(s) if !s.is_empty() => s,
        Ok(_) => error_answer("plugin wrote no answer"),
        Err(m) => error_answer(&m),
    };
    OUT.with(|out| {
        let mut out = out.borrow_mut();
        *out = text.into_bytes();
        (out.as_ptr() as usize as u64) << 32 | out.len() as u64
    })
}

fn error_answer(msg: &str) -> String {
    format!("{{\"error\":{}}}", json::quote(if msg.is_empty() { "plugin error" } else { msg }))
}

/// Exports a hook whose handler reads the request in place: `hook_view!(validate,
/// my_validate)` defines the export `validate` calling `my_validate`, a [`ViewHandler`].
#[macro_export]
macro_rules! hook_view {
    ($name:ident, $handler:path) => {
        #[no_mangle]
        pub extern "C" fn $name(ptr: u32, len: u32) -> u64 {
            $crate::call_view(ptr, len, $handler)
        }
    };
}

/// Exports a hook: `hook!(validate, my_validate)` defines the export `validate` calling
/// `my_validate`, a [`Handler`]. Hook names: configure authenticate mutate validate
/// initialize filter score.
#[macro_export]
macro_rules! hook {
    ($name:ident, $handler:path) => {
        #[no_mangle]
        pub extern "C" fn $name(ptr: u32, len: u32) -> u64 {
            $crate::call(ptr, len, $handler)
        }
    };
}
