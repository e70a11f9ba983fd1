package authn

import (
	"errors"
	"net/http"
)

// Source supplies authenticators that come and go while the server runs (WASM
// plugins). release is called when the request no longer needs them, so an unloaded
// plugin is closed only after the calls that hold it finish.
type Source interface {
	Authenticators() (list []Named, release func())
}

// Dynamic is a chain member trying a Source's current authenticators in order.
type Dynamic struct{ Source Source }

// AuthenticateRequest implements Authenticator: the first that accepts wins; refusals
// ("mine, and invalid") fail the request only if nobody accepts.
func (d Dynamic) AuthenticateRequest(req *http.Request) (*User, []string, bool, error) {
	list, release := d.Source.Authenticators()
	defer release()
	var errs []error
	for _, a := range list {
		u, auds, ok, err := a.AuthenticateRequest(req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			if u != nil {
				u.Authenticator = a.Name
			}
			return u, auds, true, nil
		}
	}
	return nil, nil, false, errors.Join(errs...)
}
