package authn

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// Authenticator decides who a request is from. ok=false with a nil error means "not my
// kind of credential"; an error means "mine, and invalid".
type Authenticator interface {
	AuthenticateRequest(req *http.Request) (u *User, audiences []string, ok bool, err error)
}

// Named is an authenticator with the name the chain order refers to.
type Named struct {
	// Name identifies the authenticator in logs and in --authentication-order.
	Name string
	Authenticator
}

// Chain tries its authenticators in order; the first that accepts the request wins.
type Chain struct {
	// Authenticators are tried in order.
	Authenticators []Named
	// APIAudiences are the audiences this server accepts; a credential valid only for
	// other audiences does not authenticate.
	APIAudiences []string
	// Anonymous lets requests without credentials in as system:anonymous, for the health
	// and version paths only.
	Anonymous bool
	// Log receives authentication failures; nil = discarded.
	Log *slog.Logger
}

// ErrUnauthorized is returned when no authenticator accepts a request.
var ErrUnauthorized = errors.New("unauthorized")

// anonymousPaths are the only paths the anonymous user may reach.
var anonymousPaths = []string{"/healthz", "/livez", "/readyz", "/version"}

// AnonymousAllowed reports whether path is one the anonymous user may reach.
func AnonymousAllowed(path string) bool {
	for _, p := range anonymousPaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// AuthenticateRequest implements Authenticator for the whole chain. Failures are
// logged; the client only ever learns "Unauthorized".
func (c *Chain) AuthenticateRequest(req *http.Request) (*User, []string, bool, error) {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for _, a := range c.Authenticators {
		u, auds, ok, err := a.AuthenticateRequest(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.Name, err))
			continue
		}
		if !ok {
			continue
		}
		if u == nil || u.Name == "" {
			errs = append(errs, fmt.Errorf("%s: accepted the request without a user name", a.Name))
			continue
		}
		granted, ok := intersect(auds, c.APIAudiences)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: credential audiences %q are not among the server's %q", a.Name, auds, c.APIAudiences))
			continue
		}
		if !u.InGroup(GroupAuthenticated) && u.Name != Anonymous {
			u.Groups = append(slices.Clip(u.Groups), GroupAuthenticated)
		}
		if u.Authenticator == "" { // a dynamic member may have named the plugin already
			u.Authenticator = a.Name
		}
		return u, granted, true, nil
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		log.Info("unable to authenticate the request", "path", req.URL.Path, "err", err)
		return nil, nil, false, err
	}
	if c.Anonymous && !hasCredentials(req) && AnonymousAllowed(req.URL.Path) {
		return &User{Name: Anonymous, Groups: []string{GroupUnauthenticated}, Authenticator: "anonymous"}, c.APIAudiences, true, nil
	}
	return nil, nil, false, nil
}

// hasCredentials reports whether the client presented any credential; a request that
// did and was refused must not fall back to anonymous.
func hasCredentials(req *http.Request) bool {
	return req.Header.Get("Authorization") != "" || (req.TLS != nil && len(req.TLS.PeerCertificates) > 0)
}

// intersect returns the audiences a credential is granted: the API audiences when the
// credential names none, else those it shares with the server (none shared = refused).
func intersect(cred, api []string) ([]string, bool) {
	if len(cred) == 0 || len(api) == 0 {
		return api, true
	}
	var out []string
	for _, a := range cred {
		if slices.Contains(api, a) {
			out = append(out, a)
		}
	}
	return out, len(out) > 0
}
