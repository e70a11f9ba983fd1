// Command token-authenticator is a wasmplane authenticate plugin that accepts static
// bearer tokens listed in its configuration.
package main

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/authenticate"
	"github.com/wasmplane/wasmplane/sdk/go/wasmplane"
)

type config struct {
	Tokens map[string]abi.UserInfo `json:"tokens"`
}

var cfg config

func init() {
	wasmplane.RegisterConfigure(func(req *abi.ConfigureRequest) error {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return err
		}
		if len(cfg.Tokens) == 0 {
			return errors.New("config.tokens is empty")
		}
		for tok, u := range cfg.Tokens {
			if tok == "" || u.Username == "" {
				return errors.New("every token needs a non-empty token and username")
			}
		}
		return nil
	})
	authenticate.Register(func(req *abi.AuthenticateRequest) (abi.AuthenticateResponse, error) {
		for _, h := range req.Headers["Authorization"] {
			scheme, tok, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				continue
			}
			u, ok := cfg.Tokens[strings.TrimSpace(tok)]
			if !ok {
				return abi.AuthenticateResponse{Message: "unknown bearer token"}, nil
			}
			return abi.AuthenticateResponse{Authenticated: true, User: &u}, nil
		}
		// No bearer token: not ours, let the next authenticator look.
		return abi.AuthenticateResponse{}, nil
	})
}

func main() {}
