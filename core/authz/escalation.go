package authz

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/wasmplane/wasmplane/core/authn"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// ConfirmNoEscalation returns an error unless user already holds every one of rules in
// namespace ("" = cluster-wide only), so RBAC can never be used to grant more than one
// has. Members of system:masters hold everything. The error text is Kubernetes'.
func ConfirmNoEscalation(ctx context.Context, resolver RuleResolver, user *authn.User, namespace string, rules []rbacv1.PolicyRule) error {
	if user == nil {
		return fmt.Errorf("no user on the request")
	}
	if IsPrivileged(user) {
		return nil
	}
	owned, resolveErr := resolver.RulesFor(ctx, user, namespace)
	if resolveErr != nil {
		// Partial rules are still rules the user holds: check them, mention the error.
		slog.Debug("rule resolution incomplete", "user", user.Name, "namespace", namespace, "err", resolveErr)
	}
	covered, missing := validation.Covers(owned, rules)
	if covered {
		return nil
	}
	descs := make([]string, 0, len(missing))
	for _, m := range missing {
		d := CompactString(m)
		if !slices.Contains(descs, d) {
			descs = append(descs, d)
		}
	}
	slices.Sort(descs)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", user.Name, user.Groups, strings.Join(descs, "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: %v", resolveErr)
	}
	return fmt.Errorf("%s", msg)
}

// CompactString renders a rule the way Kubernetes lists missing permissions, e.g.
// {APIGroups:[""], Resources:["pods"], Verbs:["create"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) == 0 {
			return
		}
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = fmt.Sprintf("%q", s)
		}
		parts = append(parts, name+":["+strings.Join(q, ", ")+"]")
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("ResourceNames", r.ResourceNames)
	add("NonResourceURLs", r.NonResourceURLs)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}

// EscalateAuthorized reports whether user may write a role (resource "roles" or
// "clusterroles") with rules they do not hold: Kubernetes' verb "escalate".
func EscalateAuthorized(ctx context.Context, a Authorizer, user *authn.User, resource, namespace, name string) bool {
	return allowed(ctx, a, Attributes{User: user, Verb: "escalate", ResourceRequest: true, APIGroup: rbacv1.GroupName,
		APIVersion: "*", Resource: resource, Namespace: namespace, Name: name})
}

// BindAuthorized reports whether user may bind ref in bindingNamespace ("" for a
// ClusterRoleBinding) without holding its rules: Kubernetes' verb "bind" on the role.
func BindAuthorized(ctx context.Context, a Authorizer, user *authn.User, ref rbacv1.RoleRef, bindingNamespace string) bool {
	attrs := Attributes{User: user, Verb: "bind", ResourceRequest: true, APIGroup: ref.APIGroup, APIVersion: "*",
		Namespace: bindingNamespace, Name: ref.Name}
	switch ref.Kind {
	case "Role":
		attrs.Resource = "roles"
	case "ClusterRole":
		attrs.Resource = "clusterroles"
	default:
		return false
	}
	return allowed(ctx, a, attrs)
}

func allowed(ctx context.Context, a Authorizer, attrs Attributes) bool {
	if a == nil || attrs.User == nil {
		return false
	}
	d, _, err := a.Authorize(ctx, attrs)
	if err != nil {
		slog.Warn("authorizing an RBAC escalation check", "verb", attrs.Verb, "resource", attrs.Resource, "name", attrs.Name, "err", err)
	}
	return d == DecisionAllow
}

// CheckRoleWrite is the check on creating or updating a Role (namespace set) or
// ClusterRole: allowed for system:masters, for holders of "escalate" on it, or when the
// user already holds every rule.
func CheckRoleWrite(ctx context.Context, a Authorizer, r RuleResolver, user *authn.User, namespace, name string, rules []rbacv1.PolicyRule) error {
	if IsPrivileged(user) {
		return nil
	}
	resource := "clusterroles"
	if namespace != "" {
		resource = "roles"
	}
	if EscalateAuthorized(ctx, a, user, resource, namespace, name) {
		return nil
	}
	return ConfirmNoEscalation(ctx, r, user, namespace, rules)
}

// CheckBindingWrite is the check on creating or updating a RoleBinding (namespace set) or
// ClusterRoleBinding to ref: allowed for system:masters, for holders of "bind" on the
// role, or when the user already holds every rule the role grants.
func CheckBindingWrite(ctx context.Context, a Authorizer, r RuleResolver, user *authn.User, namespace string, ref rbacv1.RoleRef) error {
	if IsPrivileged(user) {
		return nil
	}
	if BindAuthorized(ctx, a, user, ref, namespace) {
		return nil
	}
	refs, ok := r.(RoleRefResolver)
	if !ok {
		return fmt.Errorf("cannot resolve role %s %q to check its rules", ref.Kind, ref.Name)
	}
	rules, err := refs.RulesForRoleRef(ctx, namespace, ref)
	if err != nil {
		return fmt.Errorf("resolving role %s %q: %w", ref.Kind, ref.Name, err)
	}
	return ConfirmNoEscalation(ctx, r, user, namespace, rules)
}
