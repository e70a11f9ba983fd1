/* label-score: a wasmplane score plugin in C. It prefers nodes by the numeric value of
 * the label named in config.label (0–100; missing or invalid is 0). Same behaviour as
 * examples/plugins/go/label-score. */
#include <stdlib.h>

#include "wasmplane.h"

static char *label;

static void configure(wp_json req) {
  label = wp_json_strdup(wp_json_path(req, "config", "label", NULL));
  if (!label || !*label) {
    wp_out_error("config.label is required");
    return;
  }
  wp_out_cstr("{}");
}

/* label_score turns a label value into a score: its integer value clamped to 0–100. */
static int64_t label_score(wp_json v) {
  if (wp_json_type(v) != WP_STRING) return 0;
  int64_t n = 0;
  for (size_t i = 1; i + 1 < v.n; i++) {
    char c = v.p[i];
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
    if (n > 100) return 100;
  }
  return n;
}

static void score(wp_json req) {
  wp_out_cstr("{\"scores\":[");
  wp_iter it = wp_json_iter(wp_json_get(req, "nodes"));
  wp_json node;
  for (int i = 0; wp_json_next(&it, NULL, &node); i++) {
    if (i) wp_out_char(',');
    wp_out_int(label_score(wp_json_get(wp_json_path(node, "metadata", "labels", NULL), label)));
  }
  wp_out_cstr("]}");
}

WASMPLANE_HOOK(configure, configure)
WASMPLANE_HOOK(score, score)
