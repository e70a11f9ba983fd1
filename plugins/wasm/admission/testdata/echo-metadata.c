/* echo-metadata: asks for object metadata documents (ABI 7.3) and denies every request
 * with the object it received as the message, so that a test sees what reached the guest. */
#include "wasmplane.h"

static void configure(wp_json req) {
  (void)req;
  wp_out_cstr("{\"objectMetadata\":true}");
}

static void validate(wp_json req) {
  wp_json obj = wp_json_get(req, "object");
  wp_out_cstr("{\"allowed\":false,\"code\":403,\"message\":");
  wp_out_string(obj.p, obj.n);
  wp_out_char('}');
}

WASMPLANE_HOOK(configure, configure)
WASMPLANE_HOOK(validate, validate)
