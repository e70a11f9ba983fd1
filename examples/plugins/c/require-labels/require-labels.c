/* require-labels: a wasmplane validate plugin in C. Objects must carry the labels listed
 * in config.labels, and pods may not use ":latest" (or untagged) images. Same behaviour
 * as examples/plugins/go/require-labels. */
#include <stdlib.h>
#include <string.h>

#include "wasmplane.h"

/* The configured labels, decoded once per instance by configure. */
static char **labels;
static size_t nlabels;

static void configure(wp_json req) {
  wp_json list = wp_json_path(req, "config", "labels", NULL);
  int t = wp_json_type(list);
  if (t != WP_MISSING && t != WP_NULL && t != WP_ARRAY) {
    wp_out_error("config.labels must be a list of strings");
    return;
  }
  wp_iter it = wp_json_iter(list);
  wp_json v;
  while (wp_json_next(&it, NULL, &v)) {
    char *s = wp_json_strdup(v);
    char **grown = realloc(labels, (nlabels + 1) * sizeof *labels);
    if (!s || !grown) {
      free(s);
      wp_out_error("config.labels must be a list of strings");
      return;
    }
    labels = grown;
    labels[nlabels++] = s;
  }
  /* Only labels and container images are read: the compact pod document (ABI 7.5) has
     them, and costs the server and this plugin a fraction of a whole Pod; "reads"
     (ABI 7.1) lets the host leave out the request members this plugin never reads. */
  wp_out_cstr("{\"compactPods\":true,\"reads\":[\"operation\",\"kind\",\"object.metadata.labels\",\"object.spec.containers\",\"object.spec.initContainers\"]}");
}

/* latest tells whether an image reference resolves to the latest tag. */
static bool latest(const char *image) {
  if (strstr(image, "@sha256:")) return false;
  const char *slash = strrchr(image, '/');
  const char *name = slash ? slash + 1 : image;
  const char *colon = strchr(name, ':');
  return !colon || strcmp(colon + 1, "latest") == 0;
}

static void problem(wp_str *msg, const char *s) {
  if (msg->n) wp_str_addc(msg, "; ");
  wp_str_addc(msg, s);
}

static void check_images(wp_json containers, wp_str *msg) {
  wp_iter it = wp_json_iter(containers);
  wp_json c;
  while (wp_json_next(&it, NULL, &c)) {
    char *name = wp_json_strdup(wp_json_get(c, "name"));
    char *image = wp_json_strdup(wp_json_get(c, "image"));
    if (latest(image ? image : "")) {
      problem(msg, "container ");
      wp_str_addq(msg, name ? name : "", name ? strlen(name) : 0);
      wp_str_addc(msg, ": image ");
      wp_str_addq(msg, image ? image : "", image ? strlen(image) : 0);
      wp_str_addc(msg, " must be pinned to a tag other than latest");
    }
    free(name);
    free(image);
  }
}

static void validate(wp_json req) {
  wp_json op = wp_json_get(req, "operation");
  if (!wp_json_eq(op, "CREATE") && !wp_json_eq(op, "UPDATE")) {
    wp_out_cstr("{\"allowed\":true}");
    return;
  }
  wp_json obj = wp_json_get(req, "object");
  if (wp_json_type(obj) != WP_OBJECT) {
    wp_out_error("object is not a JSON object");
    return;
  }
  wp_str msg = {0};
  wp_json have = wp_json_path(obj, "metadata", "labels", NULL);
  for (size_t i = 0; i < nlabels; i++) {
    if (!wp_json_get(have, labels[i]).p) {
      problem(&msg, "label ");
      wp_str_addq(&msg, labels[i], strlen(labels[i]));
      wp_str_addc(&msg, " is required");
    }
  }
  if (wp_json_eq(wp_json_path(req, "kind", "kind", NULL), "Pod")) {
    wp_json spec = wp_json_get(obj, "spec");
    check_images(wp_json_get(spec, "initContainers"), &msg);
    check_images(wp_json_get(spec, "containers"), &msg);
  }
  if (msg.n == 0) {
    wp_out_cstr("{\"allowed\":true}");
  } else {
    wp_out_cstr("{\"allowed\":false,\"code\":403,\"reason\":\"Forbidden\",\"message\":");
    wp_out_string(msg.p, msg.n);
    wp_out_char('}');
  }
  wp_str_free(&msg);
}

WASMPLANE_HOOK(configure, configure)
WASMPLANE_HOOK(validate, validate)
