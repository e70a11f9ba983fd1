package authz_test

import (
	"context"
	"testing"

	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
)

// BenchmarkAuthorize measures one decision of the full union (privileged groups, node,
// RBAC) over the bootstrap policy plus the test fixtures.
func BenchmarkAuthorize(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	cases := []struct {
		name  string
		attrs authz.Attributes
	}{
		{"rbac-rolebinding-allow", res(user("alice"), "get", "", "pods", "", "a", "p")},
		{"rbac-deny", res(user("nobody"), "delete", "", "pods", "", "a", "p")},
		{"masters", res(user("root", authn.GroupMasters), "delete", "", "nodes", "", "", "n")},
		{"node-secret-graph", res(user(authn.NodeUserPrefix+"n1", authn.GroupNodes), "get", "", "secrets", "", "a", "s1")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				_, _, _ = f.union.Authorize(ctx, c.attrs)
			}
		})
	}
}
