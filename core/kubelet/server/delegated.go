package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Reviewer is the part of the API delegated access needs; a kubernetes.Interface is one.
type Reviewer interface {
	AuthenticationV1() authenticationv1client.AuthenticationV1Interface
	AuthorizationV1() authorizationv1client.AuthorizationV1Interface
}

// Cache lifetimes, the kubelet's defaults (--authentication-token-webhook-cache-ttl,
// --authorization-webhook-cache-authorized-ttl and -unauthorized-ttl).
const (
	tokenTTL   = 2 * time.Minute
	allowedTTL = 5 * time.Minute
	deniedTTL  = 30 * time.Second
	// maxCached bounds each cache (least recently used entries go first: a flood of
	// distinct tokens costs reviews, never memory).
	maxCached = 4096
	// reviewTimeout bounds one TokenReview or SubjectAccessReview.
	reviewTimeout = 10 * time.Second
)

// Delegated is the kubelet's webhook authentication and authorization: a client that is
// not the API server (a metrics-server or Prometheus with a ServiceAccount token, or a
// certificate of the cluster CA) is identified by a TokenReview (or its certificate) and
// allowed by a SubjectAccessReview on this node's `nodes/<subresource>`, as the kubelet
// does with --authentication-token-webhook and --authorization-mode=Webhook.
type Delegated struct {
	reviews Reviewer
	node    string
	// users caches TokenReviews by token hash (cachedUser), decisions SubjectAccessReviews
	// by user, verb and subresource (bool).
	users, decisions *utilcache.LRUExpireCache
}

type cachedUser struct {
	user authenticationv1.UserInfo
	ok   bool
}

// NewDelegated decides requests to node's kubelet through r.
func NewDelegated(r Reviewer, node string) *Delegated {
	return &Delegated{reviews: r, node: node, users: utilcache.NewLRUExpireCache(maxCached), decisions: utilcache.NewLRUExpireCache(maxCached)}
}

// subresourceOf maps a kubelet path to the nodes subresource that guards it, as the
// kubelet's GetRequestAttributes does.
func subresourceOf(path string) string {
	for _, p := range []struct{ prefix, sub string }{{"/stats", "stats"}, {"/metrics", "metrics"}, {"/logs", "log"},
		{"/spec", "spec"}, {"/checkpoint", "checkpoint"}, {"/pods", "pods"}} {
		if path == p.prefix || strings.HasPrefix(path, p.prefix+"/") {
			return p.sub
		}
	}
	return "proxy"
}

// verbOf maps a method to the verb authorized, as the kubelet does.
func verbOf(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "get"
}

// decide answers whether req may go on: nil, or a 401 or 403.
func (d *Delegated) decide(req *http.Request) *Error {
	user, err := d.authenticate(req)
	if err != nil {
		return err
	}
	verb, sub := verbOf(req.Method), subresourceOf(req.URL.Path)
	key := strings.Join([]string{user.Username, user.UID, strings.Join(user.Groups, ","), verb, sub}, "|")
	allowed, found := d.decisions.Get(key)
	if !found {
		ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
		defer cancel()
		extra := map[string]authorizationv1.ExtraValue{}
		for k, v := range user.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		sar, err := d.reviews.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes", Subresource: sub, Name: d.node}}},
			metav1.CreateOptions{})
		if err != nil {
			return &Error{Code: http.StatusInternalServerError, Message: fmt.Sprintf("authorization error (user=%s, verb=%s, resource=nodes, subresource=%s): %v", user.Username, verb, sub, err)}
		}
		ttl := deniedTTL
		if sar.Status.Allowed {
			ttl = allowedTTL
		}
		allowed = sar.Status.Allowed
		d.decisions.Add(key, allowed, ttl)
	}
	if !allowed.(bool) {
		// The kubelet's wording.
		return &Error{Code: http.StatusForbidden, Message: fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s)", user.Username, verb, sub)}
	}
	return nil
}

// authenticate identifies req's client: a verified certificate of the cluster CA by its
// subject, a bearer token by a TokenReview.
func (d *Delegated) authenticate(req *http.Request) (authenticationv1.UserInfo, *Error) {
	if req.TLS != nil && len(req.TLS.VerifiedChains) > 0 {
		c := req.TLS.PeerCertificates[0]
		groups := append(slices.Clone(c.Subject.Organization), "system:authenticated")
		return authenticationv1.UserInfo{Username: c.Subject.CommonName, Groups: groups}, nil
	}
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return authenticationv1.UserInfo{}, &Error{Code: http.StatusUnauthorized, Message: "Unauthorized"}
	}
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	cached, found := d.users.Get(key)
	if !found {
		ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
		defer cancel()
		tr, err := d.reviews.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return authenticationv1.UserInfo{}, &Error{Code: http.StatusInternalServerError, Message: fmt.Sprintf("authentication error: %v", err)}
		}
		cached = cachedUser{user: tr.Status.User, ok: tr.Status.Authenticated}
		d.users.Add(key, cached, tokenTTL)
	}
	c := cached.(cachedUser)
	if !c.ok {
		return authenticationv1.UserInfo{}, &Error{Code: http.StatusUnauthorized, Message: "Unauthorized"}
	}
	return c.user, nil
}
