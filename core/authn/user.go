// Package authn is the seed's withAuthentication: who a request is from. It defines the
// user a request carries, the Authenticator interface every credential kind implements
// (x509, tokens, ServiceAccount JWTs, WASM), and the chain that tries them in order.
package authn

import "context"

// Well-known users and groups, spelled as Kubernetes spells them.
const (
	// GroupMasters may do anything; RBAC is not consulted.
	GroupMasters = "system:masters"
	// GroupAuthenticated is added to every authenticated user.
	GroupAuthenticated = "system:authenticated"
	// GroupUnauthenticated is the anonymous user's group.
	GroupUnauthenticated = "system:unauthenticated"
	// Anonymous is the anonymous user's name.
	Anonymous = "system:anonymous"
	// GroupServiceAccounts holds every ServiceAccount.
	GroupServiceAccounts = "system:serviceaccounts"
	// GroupNodes holds every kubelet.
	GroupNodes = "system:nodes"
	// NodeUserPrefix starts a kubelet's user name (system:node:NAME).
	NodeUserPrefix = "system:node:"
	// ServiceAccountUserPrefix starts a ServiceAccount's user name
	// (system:serviceaccount:NAMESPACE:NAME).
	ServiceAccountUserPrefix = "system:serviceaccount:"
	// GroupBootstrappers holds bootstrap-token users.
	GroupBootstrappers = "system:bootstrappers"
)

// User is who made a request, as Kubernetes' user.Info.
type User struct {
	// Name, UID and Groups as Kubernetes' user.Info.
	Name, UID string
	Groups    []string
	// Extra carries authenticator-specific attributes.
	Extra map[string][]string
	// Authenticator is the chain member that accepted the request (for traces and logs;
	// not part of Kubernetes' user.Info).
	Authenticator string
}

// InGroup reports whether u belongs to group g.
func (u *User) InGroup(g string) bool {
	for _, x := range u.Groups {
		if x == g {
			return true
		}
	}
	return false
}

type userKey struct{}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user of a request, if any.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok
}
