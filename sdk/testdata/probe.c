/* probe answers what the C SDK's JSON reader finds in a document: the request is
 * {"doc": <any JSON>, "path": [<member name or element index>, ...]} and the answer
 * {"raw": <the value's text>, "str": <its decoded string, for a string>} or
 * {"missing": true}. sdk/readers_test.go compares it with Go's reading. */
#include <stdlib.h>

#include "wasmplane.h"

static const wp_json missing;

static wp_json element(wp_json v, int64_t n) {
  if (wp_json_type(v) != WP_ARRAY) return missing;
  wp_iter it = wp_json_iter(v);
  wp_json e;
  for (int64_t i = 0; wp_json_next(&it, NULL, &e); i++)
    if (i == n) return e;
  return missing;
}

static void probe(wp_json req) {
  wp_json v = wp_json_get(req, "doc");
  wp_iter it = wp_json_iter(wp_json_get(req, "path"));
  wp_json step;
  while (wp_json_next(&it, NULL, &step)) {
    int64_t n;
    if (wp_json_int(step, &n)) {
      v = element(v, n);
      continue;
    }
    char *key = wp_json_strdup(step);
    v = key ? wp_json_get(v, key) : missing;
    free(key);
  }
  if (wp_json_type(v) == WP_MISSING) {
    wp_out_cstr("{\"missing\":true}");
    return;
  }
  wp_out_cstr("{\"raw\":");
  wp_out_string(v.p, v.n);
  if (wp_json_type(v) == WP_STRING) {
    char *s = wp_json_strdup(v);
    wp_out_cstr(",\"str\":");
    wp_out_qcstr(s ? s : "");
    free(s);
  }
  wp_out_char('}');
}

WASMPLANE_HOOK(validate, probe)
