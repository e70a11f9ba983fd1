// Package authz is the seed's withAuthorization: may this user do this verb on this
// resource? It defines the Authorizer interface, the union that chains authorizers, the
// privileged-groups authorizer, RBAC, the node authorizer, the bootstrap policy and the
// escalation checks that keep RBAC from being used to grant more than one holds.
package authz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmplane/wasmplane/core/authn"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Attributes describe one request for authorization, as Kubernetes' authorizer.Attributes.
type Attributes struct {
	// User made the request.
	User *authn.User
	// Verb is get list watch create update patch delete deletecollection (or a special verb
	// such as bind, escalate, impersonate); for non-resource requests the HTTP verb
	// lower-cased.
	Verb string
	// ResourceRequest is true for requests under /api and /apis naming a resource.
	ResourceRequest bool
	// APIGroup, APIVersion, Resource, Subresource, Namespace and Name locate the object.
	APIGroup, APIVersion, Resource, Subresource, Namespace, Name string
	// Path is the request path, for non-resource requests.
	Path string
}

// Decision is an authorizer's answer.
type Decision int

const (
	// DecisionDeny refuses the request; later authorizers are not asked.
	DecisionDeny Decision = iota
	// DecisionAllow permits the request; later authorizers are not asked.
	DecisionAllow
	// DecisionNoOpinion lets the next authorizer decide; the last one's NoOpinion denies.
	DecisionNoOpinion
)

// String names a decision for logs and tests.
func (d Decision) String() string {
	switch d {
	case DecisionDeny:
		return "Deny"
	case DecisionAllow:
		return "Allow"
	case DecisionNoOpinion:
		return "NoOpinion"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Authorizer decides one request; the string is the reason shown to the user.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (Decision, string, error)
}

// RuleResolver lists the rules that apply to a user in a namespace (for escalation checks,
// SelfSubjectRulesReview).
type RuleResolver interface {
	RulesFor(ctx context.Context, u *authn.User, namespace string) ([]rbacv1.PolicyRule, error)
}

// RoleRefResolver returns the rules a binding's roleRef grants in a namespace ("" for a
// ClusterRoleBinding); the binding escalation check needs it. *RBAC implements it.
type RoleRefResolver interface {
	RulesForRoleRef(ctx context.Context, namespace string, ref rbacv1.RoleRef) ([]rbacv1.PolicyRule, error)
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, a Attributes) (Decision, string, error)

// Authorize implements Authorizer.
func (f AuthorizerFunc) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	return f(ctx, a)
}

// Union asks each authorizer in turn: the first Allow or Deny wins, NoOpinion falls
// through. Errors are collected and returned only when nobody decided, as Kubernetes'
// union authorizer does.
func Union(authorizers ...Authorizer) Authorizer {
	return AuthorizerFunc(func(ctx context.Context, a Attributes) (Decision, string, error) {
		var reasons []string
		var errs []error
		for _, z := range authorizers {
			d, reason, err := z.Authorize(ctx, a)
			if err != nil {
				errs = append(errs, err)
			}
			if reason != "" {
				reasons = append(reasons, reason)
			}
			switch d {
			case DecisionAllow, DecisionDeny:
				return d, reason, err
			}
		}
		return DecisionNoOpinion, strings.Join(reasons, "\n"), errors.Join(errs...)
	})
}

// PrivilegedGroups allows everything to members of groups (Kubernetes: system:masters),
// and has no opinion about anyone else. It goes first in the union so that a broken RBAC
// policy never locks the cluster admins out.
func PrivilegedGroups(groups ...string) Authorizer {
	return AuthorizerFunc(func(_ context.Context, a Attributes) (Decision, string, error) {
		if a.User != nil {
			for _, g := range a.User.Groups {
				if slices.Contains(groups, g) {
					return DecisionAllow, "", nil
				}
			}
		}
		return DecisionNoOpinion, "", nil
	})
}

// AlwaysDeny refuses everything; it is the end of a union that must not fall open.
func AlwaysDeny() Authorizer {
	return AuthorizerFunc(func(context.Context, Attributes) (Decision, string, error) {
		return DecisionDeny, "", nil
	})
}

// AlwaysAllow allows everything (for servers run without authorization).
func AlwaysAllow() Authorizer {
	return AuthorizerFunc(func(context.Context, Attributes) (Decision, string, error) {
		return DecisionAllow, "", nil
	})
}

// IsPrivileged reports whether u is in system:masters, which bypasses RBAC and the
// escalation checks.
func IsPrivileged(u *authn.User) bool { return u != nil && u.InGroup(authn.GroupMasters) }
