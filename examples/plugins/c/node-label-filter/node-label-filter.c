/* node-label-filter: a wasmplane filter plugin in C. A pod fits only on nodes that carry
 * the label named in config.label (with one of config.values, when values are given).
 * Same behaviour as examples/plugins/go/node-label-filter. */
#include <stdlib.h>
#include <string.h>

#include "wasmplane.h"

static char *label;
static char **values;
static size_t nvalues;

static void configure(wp_json req) {
  wp_json cfg = wp_json_get(req, "config");
  label = wp_json_strdup(wp_json_get(cfg, "label"));
  if (!label || !*label) {
    wp_out_error("config.label is required");
    return;
  }
  wp_iter it = wp_json_iter(wp_json_get(cfg, "values"));
  wp_json v;
  while (wp_json_next(&it, NULL, &v)) {
    char *s = wp_json_strdup(v);
    char **grown = realloc(values, (nvalues + 1) * sizeof *values);
    if (!s || !grown) {
      free(s);
      wp_out_error("config.values must be a list of strings");
      return;
    }
    values = grown;
    values[nvalues++] = s;
  }
  wp_out_cstr("{}");
}

static bool allowed(wp_json v) {
  for (size_t i = 0; i < nvalues; i++)
    if (wp_json_eq(v, values[i])) return true;
  return false;
}

static void filter(wp_json req) {
  /* Reasons are collected apart so that the answer is written in one pass. */
  wp_str reasons = {0};
  wp_out_cstr("{\"pass\":[");
  wp_iter it = wp_json_iter(wp_json_get(req, "nodes"));
  wp_json node;
  for (int i = 0; wp_json_next(&it, NULL, &node); i++) {
    wp_json v = wp_json_get(wp_json_path(node, "metadata", "labels", NULL), label);
    wp_str why = {0};
    if (wp_json_type(v) != WP_STRING) {
      wp_str_addc(&why, "node lacks label ");
      wp_str_addq(&why, label, strlen(label));
    } else if (nvalues && !allowed(v)) {
      char *s = wp_json_strdup(v);
      wp_str_addc(&why, "node label ");
      wp_str_addc(&why, label);
      wp_str_addc(&why, "=");
      wp_str_addc(&why, s ? s : "");
      wp_str_addc(&why, " is not one of [");
      for (size_t j = 0; j < nvalues; j++) {
        if (j) wp_str_addc(&why, " ");
        wp_str_addc(&why, values[j]);
      }
      wp_str_addc(&why, "]");
      free(s);
    }
    if (i) {
      wp_out_char(',');
      wp_str_addc(&reasons, ",");
    }
    wp_out_bool(why.n == 0);
    wp_str_addq(&reasons, why.p, why.n);
    wp_str_free(&why);
  }
  wp_out_cstr("],\"reasons\":[");
  wp_out_raw(reasons.p, reasons.n);
  wp_out_cstr("]}");
  wp_str_free(&reasons);
}

WASMPLANE_HOOK(configure, configure)
WASMPLANE_HOOK(filter, filter)
