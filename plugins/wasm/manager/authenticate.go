package manager

import (
	"crypto/x509"
	"net/http"
	"slices"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/authn"
	wasmauthn "github.com/wasmplane/wasmplane/plugins/wasm/authenticator"
)

// AuthnConfig is what the authenticate hooks need from the API server.
type AuthnConfig struct {
	// APIAudiences are passed to the guests.
	APIAudiences []string
	// VerifiedCertificate returns a request's trusted client certificate, if any.
	VerifiedCertificate func(req *http.Request) *x509.Certificate
}

// authenticator builds the authn adapter of e. Only cluster plugins authenticate: who a
// request is from is a cluster-wide decision no tenant may make.
func (m *Manager) authenticator(e *entry) *wasmauthn.Plugin {
	if e.namespace != "" || !slices.Contains(e.spec.Hooks, wasmv1.HookAuthenticate) {
		return nil
	}
	return &wasmauthn.Plugin{PluginName: e.key, Caller: e.plugin, APIAudiences: m.cfg.Authn.APIAudiences,
		VerifiedCertificate: m.cfg.Authn.VerifiedCertificate, Log: m.log}
}

// Authenticators implements authn.Source: the loaded cluster plugins with an
// authenticate hook, in spec.order.
func (m *Manager) Authenticators() ([]authn.Named, func()) {
	s := m.acquire()
	var out []authn.Named
	for _, e := range s.entries {
		if e.authn != nil {
			out = append(out, authn.Named{Name: "wasm:" + e.key, Authenticator: e.authn})
		}
	}
	return out, s.release
}
