/* label-injector: a wasmplane mutate plugin in C. It adds the configured labels to every
 * created or updated object, and the configured toleration to every pod, as a JSON patch.
 * Same behaviour as examples/plugins/go/label-injector. */
#include <stdlib.h>
#include <string.h>

#include "wasmplane.h"

/* The configuration, decoded once per instance by configure: labels in config order, and
 * the toleration as JSON text with its four compared fields. */
static char **keys, **values;
static size_t nlabels;
static wp_str toleration;
static char *tol_fields[4]; /* key, operator, value, effect */
static const char *const tol_names[4] = {"key", "operator", "value", "effect"};

static bool optional(wp_json v, int t) {
  int vt = wp_json_type(v);
  return vt == WP_MISSING || vt == WP_NULL || vt == t;
}

static void configure(wp_json req) {
  wp_json config = wp_json_get(req, "config");
  wp_json labels = wp_json_get(config, "labels");
  if (!optional(labels, WP_OBJECT)) {
    wp_out_error("config.labels must be an object of strings");
    return;
  }
  wp_iter it = wp_json_iter(labels);
  wp_json k, v;
  while (wp_json_next(&it, &k, &v)) {
    if (wp_json_type(v) != WP_STRING) {
      wp_out_error("config.labels must be an object of strings");
      return;
    }
    char **gk = realloc(keys, (nlabels + 1) * sizeof *keys);
    if (gk) keys = gk;
    char **gv = realloc(values, (nlabels + 1) * sizeof *values);
    if (gv) values = gv;
    char *ks = wp_json_strdup(k), *vs = wp_json_strdup(v);
    if (!gk || !gv || !ks || !vs) {
      free(ks);
      free(vs);
      wp_out_error("out of memory");
      return;
    }
    keys[nlabels] = ks;
    values[nlabels++] = vs;
  }
  wp_json t = wp_json_get(config, "toleration");
  if (!optional(t, WP_OBJECT)) {
    wp_out_error("config.toleration must be an object");
    return;
  }
  if (wp_json_type(t) != WP_OBJECT) {
    wp_out_cstr("{}");
    return;
  }
  /* Re-encoded field by field, in the Go twin's order, leaving out empty ones. */
  wp_str_add(&toleration, "{", 1);
  for (int i = 0; i < 4; i++) {
    wp_json f = wp_json_get(t, tol_names[i]);
    if (!optional(f, WP_STRING)) {
      wp_out_error("config.toleration members must be strings");
      return;
    }
    tol_fields[i] = wp_json_type(f) == WP_STRING ? wp_json_strdup(f) : strdup("");
    if (!tol_fields[i]) {
      wp_out_error("out of memory");
      return;
    }
    if (!*tol_fields[i]) continue;
    if (toleration.n > 1) wp_str_add(&toleration, ",", 1);
    wp_str_addq(&toleration, tol_names[i], strlen(tol_names[i]));
    wp_str_add(&toleration, ":", 1);
    wp_str_addq(&toleration, tol_fields[i], strlen(tol_fields[i]));
  }
  wp_json secs = wp_json_get(t, "tolerationSeconds");
  if (wp_json_type(secs) == WP_NUMBER) {
    if (toleration.n > 1) wp_str_add(&toleration, ",", 1);
    wp_str_addc(&toleration, "\"tolerationSeconds\":");
    wp_str_add(&toleration, secs.p, secs.n);
  }
  wp_str_add(&toleration, "}", 1);
  if (toleration.cap == SIZE_MAX) {
    wp_out_error("out of memory");
    return;
  }
  wp_out_cstr("{}");
}

/* tolerated tells whether the list already holds the configured toleration. */
static bool tolerated(wp_json list) {
  wp_iter it = wp_json_iter(list);
  wp_json t;
  while (wp_json_next(&it, NULL, &t)) {
    bool same = true;
    for (int i = 0; i < 4 && same; i++) {
      wp_json f = wp_json_get(t, tol_names[i]);
      /* An absent field reads as "", as the Go twin decodes it. */
      same = wp_json_type(f) == WP_STRING ? wp_json_eq(f, tol_fields[i]) : !*tol_fields[i];
    }
    if (same) return true;
  }
  return false;
}

/* label_is tells whether labels[key] reads as value; an absent label reads as "". */
static bool label_is(wp_json labels, const char *key, const char *value) {
  wp_json cur = wp_json_get(labels, key);
  return wp_json_type(cur) == WP_STRING ? wp_json_eq(cur, value) : !*value;
}

static void mutate(wp_json req) {
  wp_admission a = {0};
  wp_json op = wp_json_get(req, "operation");
  if (!wp_json_eq(op, "CREATE") && !wp_json_eq(op, "UPDATE")) {
    wp_out_allow(&a);
    return;
  }
  wp_json obj = wp_json_get(req, "object");
  if (wp_json_type(obj) != WP_OBJECT) {
    wp_out_error("object is not a JSON object");
    return;
  }
  wp_json have = wp_json_path(obj, "metadata", "labels", NULL);
  if (wp_json_type(have) != WP_OBJECT && nlabels) wp_patch_op(&a.patch, "add", "/metadata/labels", 16, "{}", 2);
  wp_str path = {0}, value = {0};
  for (size_t i = 0; i < nlabels; i++) {
    if (label_is(have, keys[i], values[i])) continue;
    path.n = value.n = 0;
    wp_str_addc(&path, "/metadata/labels/");
    wp_str_addpointer(&path, keys[i]);
    wp_str_addq(&value, values[i], strlen(values[i]));
    wp_patch_op(&a.patch, "add", path.p, path.n, value.p, value.n);
  }
  if (toleration.n && wp_json_eq(wp_json_path(req, "kind", "kind", NULL), "Pod")) {
    wp_json list = wp_json_path(obj, "spec", "tolerations", NULL);
    if (wp_json_type(list) != WP_ARRAY) {
      value.n = 0;
      wp_str_add(&value, "[", 1);
      wp_str_add(&value, toleration.p, toleration.n);
      wp_str_add(&value, "]", 1);
      wp_patch_op(&a.patch, "add", "/spec/tolerations", 17, value.p, value.n);
    } else if (!tolerated(list)) {
      wp_patch_op(&a.patch, "add", "/spec/tolerations/-", 19, toleration.p, toleration.n);
    }
  }
  if (path.cap == SIZE_MAX || value.cap == SIZE_MAX) {
    wp_out_error("out of memory");
  } else {
    wp_out_allow(&a);
  }
  wp_str_free(&path);
  wp_str_free(&value);
  wp_admission_free(&a);
}

WASMPLANE_HOOK(configure, configure)
WASMPLANE_HOOK(mutate, mutate)
