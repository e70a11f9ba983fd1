/* token-authenticator: a wasmplane authenticate plugin in C that accepts static bearer
 * tokens listed in its configuration. Same behaviour as
 * examples/plugins/go/token-authenticator. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "wasmplane.h"

/* The tokens and their users, decoded once per instance by configure. */
static char **tokens;
static wp_user *users;
static size_t ntokens;

static void configure(wp_json req) {
  wp_json list = wp_json_path(req, "config", "tokens", NULL);
  int t = wp_json_type(list);
  if (t != WP_MISSING && t != WP_NULL && t != WP_OBJECT) {
    wp_out_error("config.tokens must be an object of users");
    return;
  }
  wp_iter it = wp_json_iter(list);
  wp_json k, v;
  while (wp_json_next(&it, &k, &v)) {
    char **gt = realloc(tokens, (ntokens + 1) * sizeof *tokens);
    if (gt) tokens = gt;
    wp_user *gu = realloc(users, (ntokens + 1) * sizeof *users);
    if (gu) users = gu;
    char *tok = wp_json_strdup(k);
    if (!gt || !gu || !tok) {
      free(tok);
      wp_out_error("out of memory");
      return;
    }
    if (!wp_user_read(v, &users[ntokens])) {
      free(tok);
      wp_out_error("config.tokens: the user of a token is not a UserInfo");
      return;
    }
    tokens[ntokens++] = tok;
    if (!*tok || !*users[ntokens - 1].username) {
      wp_out_error("every token needs a non-empty token and username");
      return;
    }
  }
  if (ntokens == 0) {
    wp_out_error("config.tokens is empty");
    return;
  }
  wp_out_cstr("{}");
}

/* find returns the user of token tok (n bytes), or NULL. */
static const wp_user *find(const char *tok, size_t n) {
  for (size_t i = 0; i < ntokens; i++)
    if (strlen(tokens[i]) == n && memcmp(tokens[i], tok, n) == 0) return &users[i];
  return NULL;
}

static void authenticate(wp_json req) {
  wp_iter it = wp_json_iter(wp_json_path(req, "headers", "Authorization", NULL));
  wp_json v;
  while (wp_json_next(&it, NULL, &v)) {
    char *h = wp_json_strdup(v);
    if (!h) continue;
    char *sp = strchr(h, ' ');
    if (!sp || sp - h != 6 || strncasecmp(h, "bearer", 6) != 0) {
      free(h);
      continue;
    }
    /* The token with white space trimmed, as Go's strings.TrimSpace does. */
    const char *tok = sp + 1, *end = h + strlen(h);
    while (tok < end && isspace((unsigned char)*tok)) tok++;
    while (end > tok && isspace((unsigned char)end[-1])) end--;
    const wp_user *u = find(tok, (size_t)(end - tok));
    free(h);
    if (!u) {
      wp_out_unauthenticated("unknown bearer token");
      return;
    }
    wp_out_authenticated(u);
    return;
  }
  /* No bearer token: not ours, let the next authenticator look. */
  wp_out_unauthenticated(NULL);
}

WASMPLANE_HOOK(configure, configure)
WASMPLANE_HOOK(authenticate, authenticate)
