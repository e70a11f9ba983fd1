package policy

import (
	"context"

	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Authorizer presents wasmplane's authorizer to the CEL authorizer library
// (authorizer.group(...).resource(...).check(...) in policy expressions).
func Authorizer(a authz.Authorizer) authorizer.UnconditionalAuthorizer {
	return authorizerAdapter{a}
}

type authorizerAdapter struct{ a authz.Authorizer }

// Authorize implements authorizer.UnconditionalAuthorizer.
func (z authorizerAdapter) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	var u *authn.User
	if info := attrs.GetUser(); info != nil {
		u = &authn.User{Name: info.GetName(), UID: info.GetUID(), Groups: info.GetGroups(), Extra: info.GetExtra()}
	}
	d, reason, err := z.a.Authorize(ctx, authz.Attributes{
		User: u, Verb: attrs.GetVerb(), ResourceRequest: attrs.IsResourceRequest(),
		APIGroup: attrs.GetAPIGroup(), APIVersion: attrs.GetAPIVersion(), Resource: attrs.GetResource(),
		Subresource: attrs.GetSubresource(), Namespace: attrs.GetNamespace(), Name: attrs.GetName(), Path: attrs.GetPath(),
	})
	switch d {
	case authz.DecisionAllow:
		return authorizer.DecisionAllow, reason, err
	case authz.DecisionDeny:
		return authorizer.DecisionDeny, reason, err
	}
	return authorizer.DecisionNoOpinion, reason, err
}
