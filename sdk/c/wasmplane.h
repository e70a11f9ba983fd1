/*
 * wasmplane plugin SDK for C — ABI version 1 (see sdk/ABI.md).
 *
 * Build a plugin (a WASI reactor) with:
 *   clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wl,--strip-all \
 *         -I sdk/c plugin.c sdk/c/wasmplane.c -o plugin.wasm
 *
 * wasmplane.c exports wasmplane_abi_version, wasmplane_alloc and wasmplane_free. A plugin
 * defines its hooks with WASMPLANE_HOOK and writes its answer into the output buffer
 * with the wp_out_* functions. The JSON reader never copies: a wp_json is a span of the
 * request text, valid only during the hook call that received it.
 */
#ifndef WASMPLANE_H
#define WASMPLANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WASMPLANE_ABI_VERSION 1

/* ---- JSON reading ---------------------------------------------------------------- */

/* A JSON value: the bytes of its text, without surrounding white space. A missing value
 * (absent member, out-of-range index, malformed text) has p == NULL. */
typedef struct {
  const char *p;
  size_t n;
} wp_json;

/* Value types, as returned by wp_json_type. */
enum {
  WP_MISSING = 0,
  WP_NULL,
  WP_BOOL,
  WP_NUMBER,
  WP_STRING,
  WP_ARRAY,
  WP_OBJECT,
};

/* An iterator over the elements of an array or the members of an object. */
typedef struct {
  const char *p, *end;
  bool object;
} wp_iter;

wp_json wp_json_from(const char *p, size_t n);
int wp_json_type(wp_json v);
/* wp_json_get returns the member named key of an object (the first one if repeated). */
wp_json wp_json_get(wp_json obj, const char *key);
/* wp_json_path follows nested members: wp_json_path(req, "object", "metadata", NULL). */
wp_json wp_json_path(wp_json v, ...);
wp_iter wp_json_iter(wp_json v);
/* wp_json_next yields the next element (key is left missing) or member; false at the end. */
bool wp_json_next(wp_iter *it, wp_json *key, wp_json *val);
/* wp_json_eq tells whether v is a JSON string whose decoded value equals s. */
bool wp_json_eq(wp_json v, const char *s);
/* wp_json_strdup decodes a JSON string into a malloc'd, NUL-terminated copy (NULL if v
 * is not a string). Embedded NULs (\u0000) end the C string early. */
char *wp_json_strdup(wp_json v);
/* wp_json_int reads an integral JSON number. */
bool wp_json_int(wp_json v, int64_t *out);
bool wp_json_true(wp_json v);

/* ---- The output buffer ------------------------------------------------------------ */

/* One growable buffer per instance holds the answer of the last call; the host copies it
 * out before the next call, so it is simply rewound (ABI §3). */
void wp_out_reset(void);
void wp_out_raw(const char *s, size_t n);
void wp_out_cstr(const char *s); /* raw text, no quoting */
void wp_out_char(char c);
/* wp_out_string writes s (n bytes of UTF-8) as a quoted, escaped JSON string. */
void wp_out_string(const char *s, size_t n);
void wp_out_qcstr(const char *s); /* quoted C string */
void wp_out_int(int64_t v);
void wp_out_bool(bool v);
/* wp_out_json copies a value of the request verbatim. */
void wp_out_json(wp_json v);
/* wp_out_error replaces the answer with {"error": msg}: the plugin failed (ABI §4). */
void wp_out_error(const char *msg);
/* wp_out_failed reports whether the buffer could not grow (the hook then fails). */
bool wp_out_failed(void);

/* A growable byte string for building messages. */
typedef struct {
  char *p;
  size_t n, cap;
} wp_str;
void wp_str_add(wp_str *s, const char *p, size_t n);
void wp_str_addc(wp_str *s, const char *cstr);
/* wp_str_addq adds s quoted and escaped like a JSON string (as Go's %q shows ASCII). */
void wp_str_addq(wp_str *s, const char *p, size_t n);
void wp_str_free(wp_str *s);
/* wp_str_addint adds v in decimal. */
void wp_str_addint(wp_str *s, int64_t v);

/* wp_str_addpointer adds s as one JSON Pointer reference token (RFC 6901): "~" becomes
 * "~0" and "/" becomes "~1", so a label key like "example.com/owner" is one path step. */
void wp_str_addpointer(wp_str *s, const char *token);

/* ---- Answers (ABI §7) ------------------------------------------------------------- */

/* A JSON patch (RFC 6902) being built: operations in order, as JSON text. Zero-initialize
 * it ({0}) and release it with wp_patch_free. */
typedef struct {
  wp_str ops; /* the operations joined by commas, without brackets */
  size_t n;   /* number of operations */
} wp_patch;
/* wp_patch_op appends {"op":op,"path":path,"value":value}; value is JSON text (quote a
 * string with wp_str_addq), or NULL for an operation without one ("remove"). */
void wp_patch_op(wp_patch *p, const char *op, const char *path, size_t path_n, const char *value,
                 size_t value_n);
void wp_patch_free(wp_patch *p);

/* A mutate or validate answer being built (ABI §7.3): a patch, warnings for the client and
 * audit annotations. Zero-initialize it ({0}) and release it with wp_admission_free. */
typedef struct {
  wp_patch patch;
  wp_str warnings; /* quoted strings joined by commas */
  wp_str audit;    /* "key":"value" members joined by commas */
} wp_admission;
/* wp_admission_warn adds a Warning returned to the client (also when refused). */
void wp_admission_warn(wp_admission *a, const char *msg);
/* wp_admission_audit records an audit annotation; the server names it <plugin>/<key>. */
void wp_admission_audit(wp_admission *a, const char *key, const char *value);
/* wp_out_allow answers {"allowed":true,…} with the patch, warnings and annotations. */
void wp_out_allow(const wp_admission *a);
/* wp_out_deny refuses the request with message; code 0 means 403 and reason NULL means
 * "Forbidden". The patch is left out (the host ignores it). a may be NULL. */
void wp_out_deny(const wp_admission *a, int code, const char *reason, const char *message);
void wp_admission_free(wp_admission *a);

/* A UserInfo (ABI §7): an identity decoded into owned strings, so it outlives the request
 * it came from (e.g. a configuration). */
typedef struct {
  char *username, *uid;
  char **groups;
  size_t ngroups;
  char *extra; /* the JSON text of "extra" (an object of string lists), or NULL */
} wp_user;
/* wp_user_read decodes a UserInfo object into *u; false (u left empty) when v is not one. */
bool wp_user_read(wp_json v, wp_user *u);
void wp_user_free(wp_user *u);
/* wp_out_authenticated answers an authenticate call with the user (ABI §7.2). */
void wp_out_authenticated(const wp_user *u);
/* wp_out_unauthenticated refuses: with message NULL the credential is not this plugin's
 * kind (the next authenticator is tried); with a message it was recognised and is not
 * valid. */
void wp_out_unauthenticated(const char *message);

/* wp_out_initialized answers an initialize call (ABI §7.4): {} for an empty patch, else
 * {"patch":[…]}. */
void wp_out_initialized(const wp_patch *p);
/* wp_out_initialize_rejected fails the object's initialization; code 0 means 422 and
 * reason NULL means "Invalid". */
void wp_out_initialize_rejected(int code, const char *reason, const char *message);

/* ---- Host functions --------------------------------------------------------------- */

enum { WP_DEBUG = 0, WP_INFO = 1, WP_WARN = 2, WP_ERROR = 3 };
/* wp_log sends a message to the server log under the plugin's name (ABI §5). */
void wp_log(int level, const char *msg);

/* ---- Hooks ------------------------------------------------------------------------ */

/* A hook handler reads the request and writes the whole answer with wp_out_*. */
typedef void (*wp_handler)(wp_json req);

/* wp_call runs a handler on the request at (ptr, len) and packs the answer location. */
uint64_t wp_call(wp_handler h, const char *ptr, uint32_t len);

/* WASMPLANE_HOOK(validate, my_validate) exports the hook "validate" calling my_validate.
 * Hook names: configure authenticate mutate validate initialize filter score. */
#define WASMPLANE_HOOK(name, handler)                                                   \
  __attribute__((export_name(#name))) uint64_t wasmplane_hook_##name(const char *ptr, \
                                                                      uint32_t len) { \
    return wp_call(handler, ptr, len);                                                \
  }

#ifdef __cplusplus
}
#endif
#endif
