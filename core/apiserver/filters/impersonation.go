package filters

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	"github.com/wasmplane/wasmplane/core/trace"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
)

// WithImpersonation honours the Impersonate-User, Impersonate-Group, Impersonate-Uid and
// Impersonate-Extra-<key> headers as kube-apiserver v1.37 does (constrained impersonation,
// on by default there, which includes legacy impersonation): the requester must be
// allowed to impersonate every requested field, then the request goes on as the
// impersonated user, so authorization, admission, traces and everything that reads the
// user see that identity. It runs after authentication and request info, before
// authorization.
//
// Modes are tried in Kubernetes' order; the first that applies and is allowed wins:
//
//   - associated-node: a ServiceAccount impersonates the node its token is bound to
//     (verbs impersonate-on:associated-node:<verb>, impersonate:associated-node on nodes "*");
//   - arbitrary-node: system:node:NAME (impersonate:arbitrary-node on nodes NAME);
//   - serviceaccount: system:serviceaccount:NS:NAME (impersonate:serviceaccount on
//     serviceaccounts NAME in NS);
//   - user-info: any other user, with groups, uid and extra (impersonate:user-info);
//   - legacy: the impersonate verb on users, groups, serviceaccounts (core group) and
//     uids, userextras/<key> (authentication.k8s.io).
//
// The constrained modes also need impersonate-on:<mode>:<verb> on the request's own
// resource (e.g. impersonate-on:user-info:list on pods), apply only when nothing but the
// user name is requested (except user-info), and refuse system:masters as a group. When
// no mode allows the request, the first refusal is returned as a 403.
//
// An allowed impersonation is remembered for ten seconds (impersonationTTL), by the
// requester, the wanted user and the request's attributes, as kube-apiserver remembers
// it.
func WithImpersonation(h http.Handler, a authz.Authorizer, writeErr ErrorWriter) http.Handler {
	return withImpersonation(h, a, writeErr, clock.RealClock{})
}

func withImpersonation(h http.Handler, a authz.Authorizer, writeErr ErrorWriter, clk clock.Clock) http.Handler {
	allowed := newImpersonationCache(clk)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		wanted, err := impersonationHeaders(req.Header)
		if err != nil {
			writeErr(w, req, err)
			return
		}
		if wanted == nil {
			h.ServeHTTP(w, req)
			return
		}
		start := time.Now()
		attrs := AttributesFrom(req)
		if attrs.User == nil {
			writeErr(w, req, apierrors.NewInternalError(fmt.Errorf("no User found in the context")))
			return
		}
		requester := attrs.User
		key := impersonationKey(requester, wanted, attrs)
		u, mode, ok := allowed.get(key)
		if !ok {
			if u, mode, err = impersonate(req.Context(), a, wanted, attrs); err != nil {
				trace.From(req.Context()).Add(start, "impersonation", wanted.Name, "denied", err.Error())
				slog.Debug("impersonation refused", "requester", requester.Name, "user", wanted.Name, "err", err)
				writeErr(w, req, err)
				return
			}
			allowed.set(key, u, mode)
		}
		u.Authenticator = requester.Authenticator
		// The trace and the debug line are only formatted when someone reads them: most
		// impersonated requests (reads) are not traced.
		if t := trace.From(req.Context()); t != nil {
			t.Add(start, "impersonation", mode, "impersonated",
				fmt.Sprintf("user %q groups %v as requested by %q", u.Name, u.Groups, requester.Name))
		}
		if slog.Default().Enabled(req.Context(), slog.LevelDebug) {
			slog.Debug("impersonating", "requester", userString(requester), "user", userString(u), "mode", mode)
		}
		h.ServeHTTP(w, req.WithContext(WithUser(req.Context(), u)))
	})
}

// impersonationHeaders reads the wanted user from the headers and removes them, so that
// nothing downstream behaves differently because impersonation was used. It returns nil
// when no impersonation was asked for, and a 400 when groups, uid or extra come without
// a user name.
func impersonationHeaders(headers http.Header) (*User, error) {
	wanted := &User{Name: headers.Get(authenticationv1.ImpersonateUserHeader), UID: headers.Get(authenticationv1.ImpersonateUIDHeader)}
	wanted.Groups = append(wanted.Groups, headers[authenticationv1.ImpersonateGroupHeader]...)
	hasExtra := false
	for name, values := range headers {
		if !strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			continue
		}
		hasExtra = true
		if len(values) == 0 {
			continue
		}
		key := unescapeExtraKey(strings.ToLower(name[len(authenticationv1.ImpersonateUserExtraHeaderPrefix):]))
		if wanted.Extra == nil {
			wanted.Extra = map[string][]string{}
		}
		wanted.Extra[key] = append(wanted.Extra[key], values...)
	}
	if wanted.Name == "" {
		if wanted.UID != "" || len(wanted.Groups) > 0 || hasExtra {
			// Worded as Kubernetes words it (it prints its user.DefaultInfo with %#v).
			return nil, apierrors.NewBadRequest(fmt.Sprintf("requested &user.DefaultInfo{Name:%q, UID:%q, Groups:%#v, Extra:%#v} without impersonating a user name",
				wanted.Name, wanted.UID, wanted.Groups, wanted.Extra))
		}
		return nil, nil
	}
	headers.Del(authenticationv1.ImpersonateUserHeader)
	headers.Del(authenticationv1.ImpersonateUIDHeader)
	headers.Del(authenticationv1.ImpersonateGroupHeader)
	for name := range headers {
		if strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			headers.Del(name)
		}
	}
	return wanted, nil
}

// unescapeExtraKey decodes a %-encoded extra key (header names cannot hold "/"); a
// malformed encoding is kept as it is.
func unescapeExtraKey(encoded string) string {
	key, err := url.PathUnescape(encoded)
	if err != nil {
		return encoded
	}
	return key
}

// impersonationMode is one way a requester may be allowed to impersonate.
type impersonationMode struct {
	// name is the constrained mode ("" = legacy impersonation).
	name string
	// applies tells whether the mode can impersonate wanted for requester at all.
	applies func(wanted, requester *User) bool
}

var impersonationModes = []impersonationMode{
	{name: "associated-node", applies: func(wanted, requester *User) bool {
		node, ok := nodeUsername(wanted.Name)
		if !onlyUsername(wanted) || !ok {
			return false
		}
		if _, _, sa := serviceAccountUsername(requester.Name); !sa {
			return false
		}
		v := requester.Extra[authn.ExtraNodeName]
		return len(v) == 1 && v[0] == node
	}},
	{name: "arbitrary-node", applies: func(wanted, _ *User) bool {
		_, ok := nodeUsername(wanted.Name)
		return ok && onlyUsername(wanted)
	}},
	{name: "serviceaccount", applies: func(wanted, _ *User) bool {
		_, _, ok := serviceAccountUsername(wanted.Name)
		return ok && onlyUsername(wanted)
	}},
	{name: "user-info", applies: func(wanted, _ *User) bool {
		_, node := nodeUsername(wanted.Name)
		_, _, sa := serviceAccountUsername(wanted.Name)
		return !node && !sa
	}},
	{name: "", applies: func(*User, *User) bool { return true }},
}

// impersonate returns the user the request runs as and the verb that allowed it.
func impersonate(ctx context.Context, a authz.Authorizer, wanted *User, attrs authz.Attributes) (*User, string, error) {
	var first error
	for _, m := range impersonationModes {
		if !m.applies(wanted, attrs.User) {
			continue
		}
		u, err := m.check(ctx, a, wanted, attrs)
		if err == nil {
			verb := "impersonate"
			if m.name != "" {
				verb += ":" + m.name
			}
			return u, verb, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, "", first
}

// check runs the mode's authorization checks and builds the impersonated user.
func (m impersonationMode) check(ctx context.Context, a authz.Authorizer, wanted *User, attrs authz.Attributes) (*User, error) {
	requester := attrs.User
	verb, userGroup := "impersonate", ""
	if m.name != "" {
		verb, userGroup = "impersonate:"+m.name, authenticationv1.GroupName
		if m.name == "associated-node" {
			// Kubernetes authorizes this mode for any node the ServiceAccount is bound
			// to (name "*") and shows the authorizer only which extra keys it holds.
			requester = associatedNodeRequester(requester)
		}
		on := attrs
		on.User = requester
		on.Verb = "impersonate-on:" + m.name + ":" + attrs.Verb
		if err := checkImpersonation(ctx, a, on); err != nil {
			return nil, err
		}
	}
	actual := &User{Name: wanted.Name, UID: wanted.UID, Groups: slices.Clone(wanted.Groups), Extra: wanted.Extra}
	base := func(group, resource, name string) authz.Attributes {
		return authz.Attributes{User: requester, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "v1", Resource: resource, Name: name}
	}

	// The user name.
	ua := base(userGroup, "users", wanted.Name)
	if node, ok := nodeUsername(wanted.Name); ok && m.name != "" {
		ua.Resource, ua.Name = "nodes", node
		if m.name == "associated-node" {
			ua.Name = "*"
		}
		actual.Groups = []string{authn.GroupNodes}
	}
	if ns, name, ok := serviceAccountUsername(wanted.Name); ok {
		ua.Resource, ua.Namespace, ua.Name = "serviceaccounts", ns, name
		if len(wanted.Groups) == 0 {
			actual.Groups = []string{authn.GroupServiceAccounts, authn.GroupServiceAccounts + ":" + ns}
		}
	}
	if err := checkImpersonation(ctx, a, ua); err != nil {
		return nil, err
	}
	// The uid.
	if wanted.UID != "" {
		if err := checkImpersonation(ctx, a, base(authenticationv1.GroupName, "uids", wanted.UID)); err != nil {
			return nil, err
		}
	}
	// The groups.
	if len(wanted.Groups) > 0 {
		ga := base(userGroup, "groups", "")
		if m.name != "" {
			if slices.Contains(wanted.Groups, "") {
				return nil, ForbiddenError(ga, "impersonating the empty string group is not allowed")
			}
			if slices.Contains(wanted.Groups, authn.GroupMasters) {
				ga.Name = authn.GroupMasters
				return nil, ForbiddenError(ga, "impersonating the system:masters group is not allowed")
			}
		}
		wild := ga
		wild.Name = "*"
		if !(m.name != "" && len(wanted.Groups) >= manyChecks && allowedWildcard(ctx, a, wild)) {
			for _, g := range wanted.Groups {
				ga.Name = g
				if err := checkImpersonation(ctx, a, ga); err != nil {
					return nil, err
				}
			}
		}
	}
	// The extra.
	if len(wanted.Extra) > 0 {
		ea := base(authenticationv1.GroupName, "userextras", "")
		if m.name != "" {
			if err := validateImpersonatedExtra(wanted.Extra); err != nil {
				return nil, ForbiddenError(ea, err.Error())
			}
		}
		wild := ea
		wild.Subresource, wild.Name = "*", "*"
		if !(m.name != "" && largeExtra(wanted.Extra) && allowedWildcard(ctx, a, wild)) {
			keys := make([]string, 0, len(wanted.Extra))
			for k := range wanted.Extra {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				ea.Subresource = k
				for _, v := range wanted.Extra[k] {
					ea.Name = v
					if err := checkImpersonation(ctx, a, ea); err != nil {
						return nil, err
					}
				}
			}
		}
	}

	switch {
	case actual.Name == authn.Anonymous:
		actual.Groups = ensureGroup(actual.Groups, authn.GroupUnauthenticated)
	case !slices.Contains(actual.Groups, authn.GroupUnauthenticated):
		actual.Groups = ensureGroup(actual.Groups, authn.GroupAuthenticated)
	}
	return actual, nil
}

// manyChecks is how many groups or extra values make a constrained mode first try one
// wildcard check, as Kubernetes does.
const manyChecks = 4

// allowedWildcard tells whether attrs (naming "*") are allowed.
func allowedWildcard(ctx context.Context, a authz.Authorizer, attrs authz.Attributes) bool {
	return checkImpersonation(ctx, a, attrs) == nil
}

func largeExtra(extra map[string][]string) bool {
	n := 0
	for _, v := range extra {
		n += len(v)
	}
	return len(extra) >= manyChecks || n >= manyChecks
}

// checkImpersonation is one authorization check, refused with Kubernetes' 403.
func checkImpersonation(ctx context.Context, a authz.Authorizer, attrs authz.Attributes) error {
	d, reason, err := a.Authorize(ctx, attrs)
	if d == authz.DecisionAllow {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return err
	}
	msg := reason
	switch {
	case err != nil && reason != "":
		msg = fmt.Sprintf("%v: %s", err, reason)
	case err != nil:
		msg = err.Error()
	}
	return ForbiddenError(attrs, msg)
}

// validateImpersonatedExtra is the constrained modes' check of extra keys and values.
func validateImpersonatedExtra(extra map[string][]string) error {
	fp := field.NewPath("extra", "key")
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		values := extra[key]
		switch {
		case key == "":
			return fmt.Errorf("impersonating the empty string key in extra is not allowed")
		case len(utilvalidation.IsDomainPrefixedPath(fp, key)) > 0:
			return fmt.Errorf("impersonating an invalid key in extra is not allowed: %w", utilvalidation.IsDomainPrefixedPath(fp, key).ToAggregate())
		case key != strings.ToLower(key):
			return fmt.Errorf("impersonating a non-lowercase key in extra is not allowed: %q", key)
		case len(values) == 0:
			return fmt.Errorf("impersonating empty values in extra is not allowed")
		case slices.Contains(values, ""):
			return fmt.Errorf("impersonating the empty string value in extra is not allowed")
		}
	}
	return nil
}

// associatedNodeRequester is the requester as the associated-node mode shows it to the
// authorizer: its extra values are replaced by the list of its extra keys.
func associatedNodeRequester(u *User) *User {
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	cp := *u
	cp.Extra = map[string][]string{"authentication.kubernetes.io/associated-node-keys": keys}
	return &cp
}

func ensureGroup(groups []string, g string) []string {
	if slices.Contains(groups, g) {
		return groups
	}
	return append(groups, g)
}

func onlyUsername(u *User) bool { return u.UID == "" && len(u.Groups) == 0 && len(u.Extra) == 0 }

// nodeUsername splits system:node:NAME when NAME is a valid node name.
func nodeUsername(name string) (string, bool) {
	node, ok := strings.CutPrefix(name, authn.NodeUserPrefix)
	if !ok || len(validation.NameIsDNSSubdomain(node, false)) > 0 {
		return "", false
	}
	return node, true
}

// serviceAccountUsername splits system:serviceaccount:NS:NAME when both are valid names.
func serviceAccountUsername(name string) (namespace, sa string, ok bool) {
	rest, ok := strings.CutPrefix(name, authn.ServiceAccountUserPrefix)
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 2 || len(validation.ValidateNamespaceName(parts[0], false)) > 0 || len(validation.ValidateServiceAccountName(parts[1], false)) > 0 {
		return "", "", false
	}
	return parts[0], parts[1], true
}

func userString(u *User) string {
	name := u.Name
	if name == "" {
		name = "<empty>"
	}
	if len(u.Groups) == 0 {
		return name
	}
	return name + "[" + strings.Join(u.Groups, ",") + "]"
}
