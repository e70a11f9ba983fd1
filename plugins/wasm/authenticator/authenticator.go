// Package authenticator makes a loaded WASM plugin a member of the API server's
// authentication chain through its authenticate hook (ABI §7.2).
package authenticator

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// Caller is the part of *wasm.Plugin the adapter needs.
type Caller interface {
	Authenticate(ctx context.Context, req *abi.AuthenticateRequest) (*abi.AuthenticateResponse, error)
}

// Plugin adapts one WASM plugin to authn.Authenticator.
type Plugin struct {
	// PluginName is used in logs.
	PluginName string
	// Caller runs the hook.
	Caller Caller
	// APIAudiences are passed to the guest as the audiences the server accepts.
	APIAudiences []string
	// VerifiedCertificate returns the request's client certificate if the server
	// trusts it (nil otherwise); the guest only ever sees verified subjects.
	VerifiedCertificate func(req *http.Request) *x509.Certificate
	// Log receives plugin failures.
	Log *slog.Logger
}

// AuthenticateRequest implements authn.Authenticator. A guest that traps, times out or
// answers garbage is "not mine": the failure is logged and the chain goes on, so a broken
// plugin cannot lock everybody out.
func (p *Plugin) AuthenticateRequest(req *http.Request) (*authn.User, []string, bool, error) {
	in := &abi.AuthenticateRequest{
		Method:     req.Method,
		Path:       req.URL.Path,
		Headers:    map[string][]string(req.Header.Clone()),
		Audiences:  p.APIAudiences,
		RemoteAddr: req.RemoteAddr,
	}
	if p.VerifiedCertificate != nil {
		if c := p.VerifiedCertificate(req); c != nil {
			in.ClientCertificate = &abi.ClientCertificate{Subject: c.Subject.String(), CommonName: c.Subject.CommonName, Organizations: c.Subject.Organization}
		}
	}
	resp, err := p.Caller.Authenticate(req.Context(), in)
	if err != nil {
		wasm.BudgetOf(p.Caller).Log(req.Context(), p.log(), p.PluginName, slog.LevelWarn, "WASM authenticator failed; treating the request as not its own", "plugin", p.PluginName, "err", err)
		return nil, nil, false, nil
	}
	if !resp.Authenticated {
		if resp.Message != "" {
			return nil, nil, false, errors.New(p.PluginName + ": " + resp.Message)
		}
		return nil, nil, false, nil
	}
	ui := resp.User
	if ui == nil || strings.TrimSpace(ui.Username) == "" {
		wasm.BudgetOf(p.Caller).Log(req.Context(), p.log(), p.PluginName, slog.LevelWarn, "WASM authenticator accepted a request without a user name; ignored", "plugin", p.PluginName)
		return nil, nil, false, nil
	}
	u := &authn.User{Name: ui.Username, UID: ui.UID, Groups: append([]string(nil), ui.Groups...), Extra: ui.Extra}
	return u, resp.Audiences, true, nil
}

func (p *Plugin) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}
