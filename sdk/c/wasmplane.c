/* wasmplane plugin SDK for C — ABI version 1. See wasmplane.h and sdk/ABI.md. */
#include "wasmplane.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- ABI exports ------------------------------------------------------------------ */

__attribute__((export_name("wasmplane_abi_version"))) int32_t wasmplane_abi_version(void) {
  return WASMPLANE_ABI_VERSION;
}

/* wasi-libc's dlmalloc aligns every block to at least 8 bytes, as ABI §3 asks. */
__attribute__((export_name("wasmplane_alloc"))) void *wasmplane_alloc(uint32_t size) {
  return malloc(size);
}

__attribute__((export_name("wasmplane_free"))) void wasmplane_free(void *ptr, uint32_t size) {
  (void)size;
  free(ptr);
}

__attribute__((import_module("wasmplane"), import_name("log"))) extern void
wasmplane_host_log(int32_t level, const char *ptr, uint32_t len);

void wp_log(int level, const char *msg) { wasmplane_host_log(level, msg, strlen(msg)); }

/* ---- JSON reading ---------------------------------------------------------------- */

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* Strings and containers are skipped eight bytes at a time: compiled WebAssembly pays a
 * bounds check, a fuel check and a branch per loop iteration, which a byte loop pays per
 * byte of the request. A word is loaded with memcpy (no alignment needed) and the bytes
 * of interest found with the usual bit tricks. */
#define WP_ONES 0x0101010101010101ULL
#define WP_HIGHS 0x8080808080808080ULL

static inline uint64_t load_word(const char *p) {
  uint64_t w;
  memcpy(&w, p, sizeof w);
  return w;
}

/* bytes_eq flags (high bit) the bytes of w equal to c. Only the lowest flag is sure: a
 * borrow may flag a byte above a real match, never one below. */
static inline uint64_t bytes_eq(uint64_t w, unsigned char c) {
  uint64_t x = w ^ (WP_ONES * c);
  return (x - WP_ONES) & ~x & WP_HIGHS;
}

/* first_flagged is the index of the lowest flagged byte of a nonzero mask
 * (little-endian: the first in memory). */
static inline size_t first_flagged(uint64_t m) { return (size_t)__builtin_ctzll(m) >> 3; }

/* skip_string returns the byte after the closing quote of the string starting at p. */
static const char *skip_string(const char *p, const char *end) {
  p++;
  for (;;) {
    while (end - p >= 8) {
      uint64_t w = load_word(p);
      uint64_t m = bytes_eq(w, '"') | bytes_eq(w, '\\');
      if (m) {
        p += first_flagged(m);
        break;
      }
      p += 8;
    }
    if (p >= end) return NULL;
    if (*p == '"') return p + 1;
    p += *p == '\\' ? 2 : 1; /* a backslash escapes the byte after it */
  }
}

/* skip_value returns the byte after the value starting at p, or NULL. It checks nesting
 * and strings, not the full grammar: the host only sends JSON it encoded itself. */
static const char *skip_value(const char *p, const char *end) {
  if (p >= end) return NULL;
  if (*p == '"') return skip_string(p, end);
  if (*p == '{' || *p == '[') {
    int depth = 0;
    while (p < end) {
      /* To the next quote or bracket: '[' and ']' are '{' and '}' with bit 5 clear, and
         no other byte becomes either when it is set. */
      while (end - p >= 8) {
        uint64_t w = load_word(p);
        uint64_t b = w | (WP_ONES * 0x20);
        uint64_t m = bytes_eq(w, '"') | bytes_eq(b, '{') | bytes_eq(b, '}');
        if (m) {
          p += first_flagged(m);
          break;
        }
        p += 8;
      }
      if (p >= end) return NULL;
      char c = *p;
      if (c == '"') {
        p = skip_string(p, end);
        if (!p) return NULL;
        continue;
      }
      if (c == '{' || c == '[') {
        depth++;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return p + 1;
      }
      p++;
    }
    return NULL;
  }
  const char *s = p;
  while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' &&
         *p != '\n' && *p != '\r' && *p != ':')
    p++;
  return p > s ? p : NULL;
}

static const wp_json missing = {NULL, 0};

wp_json wp_json_from(const char *p, size_t n) {
  const char *end = p + n;
  p = skip_ws(p, end);
  while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
    end--;
  if (p == end) return missing;
  return (wp_json){p, (size_t)(end - p)};
}

int wp_json_type(wp_json v) {
  if (!v.p || v.n == 0) return WP_MISSING;
  switch (v.p[0]) {
    case '{': return WP_OBJECT;
    case '[': return WP_ARRAY;
    case '"': return WP_STRING;
    case 't':
    case 'f': return WP_BOOL;
    case 'n': return WP_NULL;
    default: return WP_NUMBER;
  }
}

wp_iter wp_json_iter(wp_json v) {
  int t = wp_json_type(v);
  if ((t != WP_ARRAY && t != WP_OBJECT) || v.n < 2) return (wp_iter){NULL, NULL, false};
  return (wp_iter){v.p + 1, v.p + v.n - 1, t == WP_OBJECT};
}

bool wp_json_next(wp_iter *it, wp_json *key, wp_json *val) {
  if (!it->p) return false;
  const char *p = skip_ws(it->p, it->end);
  if (p < it->end && *p == ',') p = skip_ws(p + 1, it->end);
  if (p >= it->end) {
    it->p = NULL;
    return false;
  }
  wp_json k = missing;
  if (it->object) {
    const char *e = *p == '"' ? skip_string(p, it->end) : NULL;
    if (!e) goto bad;
    k = (wp_json){p, (size_t)(e - p)};
    p = skip_ws(e, it->end);
    if (p >= it->end || *p != ':') goto bad;
    p = skip_ws(p + 1, it->end);
  }
  const char *e = skip_value(p, it->end);
  if (!e) goto bad;
  if (key) *key = k;
  if (val) *val = (wp_json){p, (size_t)(e - p)};
  it->p = e;
  return true;
bad:
  it->p = NULL;
  return false;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int hex4(const char *p, const char *end) {
  if (end - p < 4) return -1;
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(p[i]);
    if (h < 0) return -1;
    v = v << 4 | h;
  }
  return v;
}

static size_t put_utf8(char *dst, uint32_t r) {
  char b[4];
  size_t n;
  if (r < 0x80) {
    b[0] = (char)r, n = 1;
  } else if (r < 0x800) {
    b[0] = (char)(0xC0 | r >> 6), b[1] = (char)(0x80 | (r & 0x3F)), n = 2;
  } else if (r < 0x10000) {
    b[0] = (char)(0xE0 | r >> 12), b[1] = (char)(0x80 | (r >> 6 & 0x3F));
    b[2] = (char)(0x80 | (r & 0x3F)), n = 3;
  } else {
    b[0] = (char)(0xF0 | r >> 18), b[1] = (char)(0x80 | (r >> 12 & 0x3F));
    b[2] = (char)(0x80 | (r >> 6 & 0x3F)), b[3] = (char)(0x80 | (r & 0x3F)), n = 4;
  }
  if (dst) memcpy(dst, b, n);
  return n;
}

/* decode writes the decoded bytes of string v to dst (if not NULL) and returns their
 * count, or SIZE_MAX if v is not a string. */
static size_t decode(wp_json v, char *dst) {
  if (wp_json_type(v) != WP_STRING || v.n < 2) return SIZE_MAX;
  const char *p = v.p + 1, *end = v.p + v.n - 1;
  size_t n = 0;
  while (p < end) {
    if (*p != '\\') {
      if (dst) dst[n] = *p;
      n++, p++;
      continue;
    }
    if (++p >= end) return SIZE_MAX;
    char c = *p++, out;
    switch (c) {
      case 'b': out = '\b'; break;
      case 'f': out = '\f'; break;
      case 'n': out = '\n'; break;
      case 'r': out = '\r'; break;
      case 't': out = '\t'; break;
      case 'u': {
        int r = hex4(p, end);
        if (r < 0) return SIZE_MAX;
        p += 4;
        uint32_t rune = (uint32_t)r;
        if (r >= 0xD800 && r < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
          int lo = hex4(p + 2, end);
          if (lo >= 0xDC00 && lo < 0xE000) {
            rune = 0x10000 + ((uint32_t)(r - 0xD800) << 10) + (uint32_t)(lo - 0xDC00);
            p += 6;
          }
        }
        if (rune >= 0xD800 && rune < 0xE000) rune = 0xFFFD; /* lone surrogate */
        n += put_utf8(dst ? dst + n : NULL, rune);
        continue;
      }
      default: out = c; /* \" \\ \/ */
    }
    if (dst) dst[n] = out;
    n++;
  }
  return n;
}

char *wp_json_strdup(wp_json v) {
  size_t n = decode(v, NULL);
  if (n == SIZE_MAX) return NULL;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  decode(v, s);
  s[n] = 0;
  return s;
}

bool wp_json_eq(wp_json v, const char *s) {
  if (wp_json_type(v) != WP_STRING || v.n < 2) return false;
  size_t sn = strlen(s);
  if (!memchr(v.p, '\\', v.n)) return v.n - 2 == sn && memcmp(v.p + 1, s, sn) == 0;
  char *d = wp_json_strdup(v);
  bool eq = d && strcmp(d, s) == 0;
  free(d);
  return eq;
}

/* key_is tells whether k, a member name with its quotes, is key (of length kn, holding a
 * backslash or not). A name without escapes is as long as its text and one with escapes
 * longer: most names differ from key by their length alone. */
static bool key_is(wp_json k, const char *key, size_t kn, bool key_bs) {
  size_t n = k.n - 2;
  if (n < kn) return false;
  if (n == kn) return !key_bs && memcmp(k.p + 1, key, kn) == 0;
  return memchr(k.p + 1, '\\', n) != NULL && wp_json_eq(k, key);
}

wp_json wp_json_get(wp_json obj, const char *key) {
  if (wp_json_type(obj) != WP_OBJECT) return missing;
  size_t kn = strlen(key);
  bool key_bs = memchr(key, '\\', kn) != NULL;
  wp_iter it = wp_json_iter(obj);
  wp_json k, v;
  while (wp_json_next(&it, &k, &v))
    if (key_is(k, key, kn, key_bs)) return v;
  return missing;
}

wp_json wp_json_path(wp_json v, ...) {
  va_list ap;
  va_start(ap, v);
  for (const char *k; (k = va_arg(ap, const char *)) != NULL;) v = wp_json_get(v, k);
  va_end(ap);
  return v;
}

bool wp_json_int(wp_json v, int64_t *out) {
  if (wp_json_type(v) != WP_NUMBER) return false;
  const char *p = v.p, *end = v.p + v.n;
  bool neg = p < end && *p == '-';
  if (neg) p++;
  if (p == end) return false;
  int64_t n = 0;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9') return false;
    if (n > (INT64_MAX - 9) / 10) return false;
    n = n * 10 + (*p - '0');
  }
  *out = neg ? -n : n;
  return true;
}

bool wp_json_true(wp_json v) { return v.p && v.n == 4 && memcmp(v.p, "true", 4) == 0; }

/* ---- Strings and the output buffer ------------------------------------------------ */

static bool str_grow(wp_str *s, size_t more) {
  if (s->cap == SIZE_MAX) return false; /* an earlier allocation failed */
  if (s->n + more <= s->cap) return true;
  size_t cap = s->cap ? s->cap : 256;
  while (cap < s->n + more) cap *= 2;
  char *p = realloc(s->p, cap);
  if (!p) {
    s->cap = SIZE_MAX;
    return false;
  }
  s->p = p, s->cap = cap;
  return true;
}

void wp_str_add(wp_str *s, const char *p, size_t n) {
  if (!str_grow(s, n)) return;
  memcpy(s->p + s->n, p, n);
  s->n += n;
}

void wp_str_addc(wp_str *s, const char *cstr) { wp_str_add(s, cstr, strlen(cstr)); }

void wp_str_addq(wp_str *s, const char *p, size_t n) {
  static const char hex[] = "0123456789abcdef";
  wp_str_add(s, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    const char *esc = NULL;
    switch (c) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
    }
    if (esc) {
      wp_str_addc(s, esc);
    } else if (c < 0x20) {
      char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      wp_str_add(s, u, 6);
    } else {
      wp_str_add(s, (const char *)&c, 1);
    }
  }
  wp_str_add(s, "\"", 1);
}

void wp_str_free(wp_str *s) {
  if (s->cap != SIZE_MAX) free(s->p);
  *s = (wp_str){0};
}

void wp_str_addpointer(wp_str *s, const char *token) {
  for (const char *p = token; *p; p++) {
    if (*p == '~') {
      wp_str_add(s, "~0", 2);
    } else if (*p == '/') {
      wp_str_add(s, "~1", 2);
    } else {
      wp_str_add(s, p, 1);
    }
  }
}

/* The answer of the current call; it stays allocated between calls (ABI §3). */
static wp_str out;

void wp_out_reset(void) {
  if (out.cap == SIZE_MAX) out = (wp_str){0};
  out.n = 0;
}
void wp_out_raw(const char *s, size_t n) { wp_str_add(&out, s, n); }
void wp_out_cstr(const char *s) { wp_str_addc(&out, s); }
void wp_out_char(char c) { wp_str_add(&out, &c, 1); }
void wp_out_string(const char *s, size_t n) { wp_str_addq(&out, s, n); }
void wp_out_qcstr(const char *s) { wp_str_addq(&out, s, strlen(s)); }
void wp_out_bool(bool v) { wp_out_cstr(v ? "true" : "false"); }
void wp_out_json(wp_json v) {
  if (v.p) {
    wp_out_raw(v.p, v.n);
  } else {
    wp_out_cstr("null");
  }
}

void wp_str_addint(wp_str *s, int64_t v) {
  char b[24], *p = b + sizeof b;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    *--p = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) *--p = '-';
  wp_str_add(s, p, (size_t)(b + sizeof b - p));
}

void wp_out_int(int64_t v) { wp_str_addint(&out, v); }

void wp_out_error(const char *msg) {
  wp_out_reset();
  wp_out_cstr("{\"error\":");
  wp_out_qcstr(msg && *msg ? msg : "plugin error");
  wp_out_char('}');
}

bool wp_out_failed(void) { return out.cap == SIZE_MAX; }

uint64_t wp_call(wp_handler h, const char *ptr, uint32_t len) {
  wp_out_reset();
  h(wp_json_from(ptr, len));
  if (out.n == 0 && !wp_out_failed()) wp_out_error("plugin wrote no answer");
  /* The host cannot tell a half-written answer from a whole one: fail the call. */
  if (wp_out_failed()) __builtin_trap();
  return (uint64_t)(uintptr_t)out.p << 32 | (uint64_t)out.n;
}

/* ---- Answers ---------------------------------------------------------------------- */

void wp_patch_op(wp_patch *p, const char *op, const char *path, size_t path_n, const char *value,
                 size_t value_n) {
  if (p->n++) wp_str_add(&p->ops, ",", 1);
  wp_str_addc(&p->ops, "{\"op\":");
  wp_str_addq(&p->ops, op, strlen(op));
  wp_str_addc(&p->ops, ",\"path\":");
  wp_str_addq(&p->ops, path, path_n);
  if (value) {
    wp_str_addc(&p->ops, ",\"value\":");
    wp_str_add(&p->ops, value, value_n);
  }
  wp_str_add(&p->ops, "}", 1);
}

void wp_patch_free(wp_patch *p) {
  wp_str_free(&p->ops);
  p->n = 0;
}

/* A failed allocation leaves a wp_str with cap SIZE_MAX: the answer would be wrong, so the
 * output buffer is marked failed too and wp_call traps. */
static void out_str(const wp_str *s) {
  if (s->cap == SIZE_MAX) {
    out.cap = SIZE_MAX;
    return;
  }
  wp_out_raw(s->p, s->n);
}

static void out_patch(const wp_patch *p) {
  wp_out_char('[');
  out_str(&p->ops);
  wp_out_char(']');
}

void wp_admission_warn(wp_admission *a, const char *msg) {
  if (a->warnings.n) wp_str_add(&a->warnings, ",", 1);
  wp_str_addq(&a->warnings, msg, strlen(msg));
}

void wp_admission_audit(wp_admission *a, const char *key, const char *value) {
  if (a->audit.n) wp_str_add(&a->audit, ",", 1);
  wp_str_addq(&a->audit, key, strlen(key));
  wp_str_add(&a->audit, ":", 1);
  wp_str_addq(&a->audit, value, strlen(value));
}

static void out_extras(const wp_admission *a) {
  if (!a) return;
  if (a->warnings.n || a->warnings.cap == SIZE_MAX) {
    wp_out_cstr(",\"warnings\":[");
    out_str(&a->warnings);
    wp_out_char(']');
  }
  if (a->audit.n || a->audit.cap == SIZE_MAX) {
    wp_out_cstr(",\"auditAnnotations\":{");
    out_str(&a->audit);
    wp_out_char('}');
  }
}

void wp_out_allow(const wp_admission *a) {
  wp_out_cstr("{\"allowed\":true");
  if (a && (a->patch.n || a->patch.ops.cap == SIZE_MAX)) {
    wp_out_cstr(",\"patch\":");
    out_patch(&a->patch);
  }
  out_extras(a);
  wp_out_char('}');
}

void wp_out_deny(const wp_admission *a, int code, const char *reason, const char *message) {
  wp_out_cstr("{\"allowed\":false,\"code\":");
  wp_out_int(code ? code : 403);
  wp_out_cstr(",\"reason\":");
  wp_out_qcstr(reason ? reason : "Forbidden");
  wp_out_cstr(",\"message\":");
  wp_out_qcstr(message ? message : "");
  out_extras(a);
  wp_out_char('}');
}

void wp_admission_free(wp_admission *a) {
  wp_patch_free(&a->patch);
  wp_str_free(&a->warnings);
  wp_str_free(&a->audit);
}

/* optional tells whether v is absent, null or of type t. */
static bool optional(wp_json v, int t) {
  int vt = wp_json_type(v);
  return vt == WP_MISSING || vt == WP_NULL || vt == t;
}

/* string_lists tells whether v is an object whose members are all lists of strings. */
static bool string_lists(wp_json v) {
  wp_iter it = wp_json_iter(v);
  wp_json list, s;
  while (wp_json_next(&it, NULL, &list)) {
    if (wp_json_type(list) != WP_ARRAY) return false;
    wp_iter li = wp_json_iter(list);
    while (wp_json_next(&li, NULL, &s))
      if (wp_json_type(s) != WP_STRING) return false;
  }
  return true;
}

bool wp_user_read(wp_json v, wp_user *u) {
  *u = (wp_user){0};
  wp_json name = wp_json_get(v, "username"), uid = wp_json_get(v, "uid");
  wp_json groups = wp_json_get(v, "groups"), extra = wp_json_get(v, "extra");
  if (wp_json_type(v) != WP_OBJECT || wp_json_type(name) != WP_STRING || !optional(uid, WP_STRING) ||
      !optional(groups, WP_ARRAY) || !optional(extra, WP_OBJECT) || !string_lists(extra))
    return false;
  u->username = wp_json_strdup(name);
  u->uid = wp_json_type(uid) == WP_STRING ? wp_json_strdup(uid) : strdup("");
  if (!u->username || !u->uid) goto bad;
  wp_iter it = wp_json_iter(groups);
  wp_json g;
  while (wp_json_next(&it, NULL, &g)) {
    char *s = wp_json_strdup(g);
    char **grown = s ? realloc(u->groups, (u->ngroups + 1) * sizeof *u->groups) : NULL;
    if (!grown) {
      free(s);
      goto bad;
    }
    u->groups = grown;
    u->groups[u->ngroups++] = s;
  }
  if (wp_json_type(extra) == WP_OBJECT) {
    /* JSON text copied verbatim: it is valid JSON and is written back as is. */
    u->extra = strndup(extra.p, extra.n);
    if (!u->extra) goto bad;
  }
  return true;
bad:
  wp_user_free(u);
  return false;
}

void wp_user_free(wp_user *u) {
  free(u->username);
  free(u->uid);
  for (size_t i = 0; i < u->ngroups; i++) free(u->groups[i]);
  free(u->groups);
  free(u->extra);
  *u = (wp_user){0};
}

void wp_out_authenticated(const wp_user *u) {
  wp_out_cstr("{\"authenticated\":true,\"user\":{\"username\":");
  wp_out_qcstr(u->username);
  if (u->uid && *u->uid) {
    wp_out_cstr(",\"uid\":");
    wp_out_qcstr(u->uid);
  }
  if (u->ngroups) {
    wp_out_cstr(",\"groups\":[");
    for (size_t i = 0; i < u->ngroups; i++) {
      if (i) wp_out_char(',');
      wp_out_qcstr(u->groups[i]);
    }
    wp_out_char(']');
  }
  if (u->extra) {
    wp_out_cstr(",\"extra\":");
    wp_out_cstr(u->extra);
  }
  wp_out_cstr("}}");
}

void wp_out_unauthenticated(const char *message) {
  if (!message) {
    wp_out_cstr("{\"authenticated\":false}");
    return;
  }
  wp_out_cstr("{\"authenticated\":false,\"message\":");
  wp_out_qcstr(message);
  wp_out_char('}');
}

void wp_out_initialized(const wp_patch *p) {
  if (!p || (!p->n && p->ops.cap != SIZE_MAX)) {
    wp_out_cstr("{}");
    return;
  }
  wp_out_cstr("{\"patch\":");
  out_patch(p);
  wp_out_char('}');
}

void wp_out_initialize_rejected(int code, const char *reason, const char *message) {
  wp_out_cstr("{\"rejected\":true,\"code\":");
  wp_out_int(code ? code : 422);
  wp_out_cstr(",\"reason\":");
  wp_out_qcstr(reason ? reason : "Invalid");
  wp_out_cstr(",\"message\":");
  wp_out_qcstr(message ? message : "");
  wp_out_char('}');
}
