/* podimage-initializer: the seed's podimage.example.com initializer as a wasmplane
 * initialize plugin in C. It rewrites every (init) container image of a new pod to pull
 * from the mirror registry named in its configuration. Same behaviour as
 * examples/plugins/go/podimage-initializer. */
#include <stdlib.h>
#include <string.h>

#include "wasmplane.h"

/* The mirror registry, without a trailing slash, decoded once per instance. */
static char *registry;

static void configure(wp_json req) {
  wp_json m = wp_json_path(req, "config", "mirror", NULL);
  int t = wp_json_type(m);
  if (t != WP_MISSING && t != WP_NULL && t != WP_STRING) {
    wp_out_error("config.mirror must be a string");
    return;
  }
  free(registry);
  registry = t == WP_STRING ? wp_json_strdup(m) : NULL;
  size_t n = registry ? strlen(registry) : 0;
  if (n && registry[n - 1] == '/') registry[--n] = 0;
  if (!n) {
    wp_out_error("config.mirror is required");
    return;
  }
  wp_out_cstr("{}");
}

/* mirror writes to out the image reference pulled from the mirror registry: "nginx:1.27"
 * becomes "<mirror>/library/nginx:1.27", "quay.io/x/y" becomes "<mirror>/x/y". It returns
 * false when the image stays as it is. */
static bool mirror(const char *image, wp_str *out) {
  size_t rn = strlen(registry);
  if (!*image || (strncmp(image, registry, rn) == 0 && image[rn] == '/')) return false;
  wp_str_addc(out, registry);
  const char *slash = strchr(image, '/');
  if (!slash) {
    wp_str_addc(out, "/library/");
    wp_str_addc(out, image);
    return true;
  }
  size_t fn = (size_t)(slash - image);
  bool host = memchr(image, '.', fn) || memchr(image, ':', fn) || (fn == 9 && strncmp(image, "localhost", 9) == 0);
  wp_str_add(out, "/", 1);
  wp_str_addc(out, host ? slash + 1 : image);
  return true;
}

static void rewrite(wp_json spec, const char *field, wp_patch *patch) {
  wp_iter it = wp_json_iter(wp_json_get(spec, field));
  wp_json c;
  wp_str img = {0}, path = {0}, value = {0};
  for (int i = 0; wp_json_next(&it, NULL, &c); i++) {
    char *image = wp_json_strdup(wp_json_get(c, "image"));
    img.n = path.n = value.n = 0;
    if (image && mirror(image, &img)) {
      wp_str_addc(&path, "/spec/");
      wp_str_addc(&path, field);
      wp_str_add(&path, "/", 1);
      wp_str_addint(&path, i);
      wp_str_addc(&path, "/image");
      wp_str_addq(&value, img.p, img.n);
      wp_patch_op(patch, "replace", path.p, path.n, value.p, value.n);
    }
    free(image);
  }
  wp_str_free(&img);
  wp_str_free(&path);
  wp_str_free(&value);
}

static void initialize(wp_json req) {
  if (!wp_json_eq(wp_json_path(req, "kind", "kind", NULL), "Pod")) {
    wp_out_cstr("{}");
    return;
  }
  wp_json obj = wp_json_get(req, "object");
  if (wp_json_type(obj) != WP_OBJECT) {
    wp_out_error("object is not a JSON object");
    return;
  }
  wp_patch patch = {0};
  wp_json spec = wp_json_get(obj, "spec");
  rewrite(spec, "initContainers", &patch);
  rewrite(spec, "containers", &patch);
  wp_out_initialized(&patch);
  wp_patch_free(&patch);
}

WASMPLANE_HOOK(configure, configure)
WASMPLANE_HOOK(initialize, initialize)
