package policy

import (
	"context"
	"errors"
	"testing"

	"github.com/wasmplane/wasmplane/core/authz"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The CEL authorizer library's questions reach wasmplane's authorizer with the user and
// resource they name, and its decisions come back as k8s.io/apiserver's.
func TestAuthorizer(t *testing.T) {
	tests := []struct {
		name     string
		decision authz.Decision
		err      error
		want     authorizer.Decision
	}{
		{"allow", authz.DecisionAllow, nil, authorizer.DecisionAllow},
		{"deny", authz.DecisionDeny, nil, authorizer.DecisionDeny},
		{"no opinion", authz.DecisionNoOpinion, nil, authorizer.DecisionNoOpinion},
		{"error", authz.DecisionNoOpinion, errors.New("boom"), authorizer.DecisionNoOpinion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen authz.Attributes
			a := Authorizer(authz.AuthorizerFunc(func(_ context.Context, attrs authz.Attributes) (authz.Decision, string, error) {
				seen = attrs
				return tt.decision, "because", tt.err
			}))
			d, reason, err := a.Authorize(context.Background(), authorizer.AttributesRecord{
				User: &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}}, Verb: "create", ResourceRequest: true,
				APIGroup: "apps", APIVersion: "v1", Resource: "deployments", Subresource: "scale", Namespace: "ns", Name: "web"})
			if d != tt.want || reason != "because" || !errors.Is(err, tt.err) {
				t.Fatalf("got %v %q %v, want %v", d, reason, err, tt.want)
			}
			if seen.User == nil || seen.User.Name != "alice" || seen.User.Groups[0] != "devs" || seen.Verb != "create" || !seen.ResourceRequest ||
				seen.APIGroup != "apps" || seen.Resource != "deployments" || seen.Subresource != "scale" || seen.Namespace != "ns" || seen.Name != "web" {
				t.Fatalf("attributes passed on: %+v", seen)
			}
		})
	}
}
