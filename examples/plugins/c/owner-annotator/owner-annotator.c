/* owner-annotator: a wasmplane mutate plugin in C. It copies an owner label (e.g. "team")
 * into an annotation, warns the client when the label is missing, and records the owner
 * as an audit annotation. It is idempotent, so it is safe to reinvoke. Same behaviour as
 * examples/plugins/go/owner-annotator. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "wasmplane.h"

/* The configuration, decoded once per instance by configure. */
static char *label, *annotation;

/* config_string decodes config[key], "" when absent or null; NULL when not a string. */
static char *config_string(wp_json config, const char *key) {
  wp_json v = wp_json_get(config, key);
  int t = wp_json_type(v);
  if (t == WP_MISSING || t == WP_NULL) return strdup("");
  return wp_json_strdup(v);
}

static void configure(wp_json req) {
  wp_json config = wp_json_get(req, "config");
  free(label);
  free(annotation);
  label = config_string(config, "label");
  annotation = config_string(config, "annotation");
  if (!label || !annotation) {
    wp_out_error("config \"label\" and \"annotation\" must be strings");
    return;
  }
  if (!*label || !*annotation) {
    wp_out_error("config needs \"label\" and \"annotation\"");
    return;
  }
  wp_out_cstr("{}");
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
  wp_json meta = wp_json_get(obj, "metadata");
  char *owner = wp_json_strdup(wp_json_get(wp_json_get(meta, "labels"), label));
  wp_str s = {0}, v = {0};
  if (!owner || !*owner) {
    char *kind = wp_json_strdup(wp_json_path(req, "kind", "kind", NULL));
    char *name = wp_json_strdup(wp_json_get(req, "name"));
    for (char *p = kind; p && *p; p++) *p = (char)tolower((unsigned char)*p);
    wp_str_addc(&s, kind ? kind : "");
    wp_str_add(&s, " ", 1);
    wp_str_addq(&s, name ? name : "", name ? strlen(name) : 0);
    wp_str_addc(&s, " has no ");
    wp_str_addq(&s, label, strlen(label));
    wp_str_addc(&s, " label: annotation ");
    wp_str_addc(&s, annotation);
    wp_str_addc(&s, " not set");
    wp_str_add(&s, "", 1); /* NUL-terminated for wp_admission_warn */
    if (s.cap != SIZE_MAX) wp_admission_warn(&a, s.p);
    free(kind);
    free(name);
  } else {
    wp_admission_audit(&a, "owner", owner);
    wp_json annotations = wp_json_get(meta, "annotations");
    if (!wp_json_eq(wp_json_get(annotations, annotation), owner)) {
      if (wp_json_type(annotations) != WP_OBJECT) wp_patch_op(&a.patch, "add", "/metadata/annotations", 21, "{}", 2);
      wp_str_addc(&s, "/metadata/annotations/");
      wp_str_addpointer(&s, annotation);
      wp_str_addq(&v, owner, strlen(owner));
      wp_patch_op(&a.patch, "add", s.p, s.n, v.p, v.n);
    }
  }
  if (s.cap == SIZE_MAX || v.cap == SIZE_MAX) {
    wp_out_error("out of memory");
  } else {
    wp_out_allow(&a);
  }
  free(owner);
  wp_str_free(&s);
  wp_str_free(&v);
  wp_admission_free(&a);
}

WASMPLANE_HOOK(configure, configure)
WASMPLANE_HOOK(mutate, mutate)
