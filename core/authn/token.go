package authn

import (
	"context"
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// TokenAuthenticator checks a bearer token. ok=false with a nil error means "not one of
// mine"; an error means "mine, and invalid" (expired, revoked…).
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, token string) (u *User, audiences []string, ok bool, err error)
}

// Bearer makes a TokenAuthenticator a request authenticator reading
// "Authorization: Bearer <token>".
type Bearer struct{ Token TokenAuthenticator }

// AuthenticateRequest implements Authenticator.
func (b Bearer) AuthenticateRequest(req *http.Request) (*User, []string, bool, error) {
	token, ok := BearerToken(req)
	if !ok {
		return nil, nil, false, nil
	}
	return b.Token.AuthenticateToken(req.Context(), token)
}

// BearerToken extracts the bearer token of a request, if it has one.
func BearerToken(req *http.Request) (string, bool) {
	h := strings.TrimSpace(req.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// TokenFile is Kubernetes' static token file: CSV lines "token,user,uid[,"group1,group2"]".
type TokenFile struct {
	tokens map[string]*User
}

// LoadTokenFile reads a token file.
func LoadTokenFile(path string) (*TokenFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	t, err := ParseTokenFile(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return t, nil
}

// ParseTokenFile parses token-file content.
func ParseTokenFile(r io.Reader) (*TokenFile, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	t := &TokenFile{tokens: map[string]*User{}}
	line := 0
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		line++
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if len(rec) < 3 {
			return nil, fmt.Errorf("line %d: want at least 3 fields (token,user,uid), have %d", line, len(rec))
		}
		if rec[0] == "" || rec[1] == "" {
			return nil, fmt.Errorf("line %d: empty token or user name", line)
		}
		if _, dup := t.tokens[rec[0]]; dup {
			return nil, fmt.Errorf("line %d: duplicate token", line)
		}
		u := &User{Name: rec[1], UID: rec[2]}
		if len(rec) > 3 && rec[3] != "" {
			for _, g := range strings.Split(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		t.tokens[rec[0]] = u
	}
}

// AuthenticateToken implements TokenAuthenticator. Comparison is constant-time per
// candidate so response timing does not reveal a token prefix.
func (t *TokenFile) AuthenticateToken(_ context.Context, token string) (*User, []string, bool, error) {
	for k, u := range t.tokens {
		if subtle.ConstantTimeCompare([]byte(k), []byte(token)) == 1 {
			c := *u
			c.Groups = append([]string(nil), u.Groups...)
			return &c, nil, true, nil
		}
	}
	return nil, nil, false, nil
}

// StaticToken authenticates exactly one token as one user (the server's loopback
// credential for its own controllers and scheduler).
type StaticToken struct {
	Token string
	User  User
}

// AuthenticateToken implements TokenAuthenticator.
func (s StaticToken) AuthenticateToken(_ context.Context, token string) (*User, []string, bool, error) {
	if s.Token == "" || subtle.ConstantTimeCompare([]byte(s.Token), []byte(token)) != 1 {
		return nil, nil, false, nil
	}
	u := s.User
	u.Groups = append([]string(nil), s.User.Groups...)
	return &u, nil, true, nil
}
