// Package filters is the handler chain in front of the director: panic recovery,
// request info, the user, in-flight limits and request metrics.
package filters

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/trace"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ErrorWriter writes an error as a Kubernetes Status.
type ErrorWriter func(w http.ResponseWriter, req *http.Request, err error)

// WithPanicRecovery turns a panicking handler into a 500 Status and a log line.
func WithPanicRecovery(h http.Handler, writeErr ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				slog.Error("handler panic", "method", req.Method, "path", req.URL.Path, "panic", r, "stack", string(debug.Stack()))
				writeErr(w, req, apierrors.NewInternalError(fmt.Errorf("%v", r)))
			}
		}()
		h.ServeHTTP(w, req)
	})
}

// User is who made a request (see authn.User).
type User = authn.User

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u *User) context.Context { return authn.WithUser(ctx, u) }

// UserFrom returns the user of a request, if any.
func UserFrom(ctx context.Context) (*User, bool) { return authn.UserFrom(ctx) }

// AdminAuthenticator treats every request as system:admin in system:masters: the
// insecure loopback port's authenticator, and in-process tests'.
type AdminAuthenticator struct{}

// AuthenticateRequest implements authn.Authenticator.
func (AdminAuthenticator) AuthenticateRequest(*http.Request) (*User, []string, bool, error) {
	return &User{Name: "system:admin", Groups: []string{"system:masters", "system:authenticated"}}, nil, true, nil
}

// WithAuthentication is the seed's withAuthentication: the first authenticator that
// succeeds wins, the Authorization header is dropped, and the user goes in the context.
func WithAuthentication(h http.Handler, auth authn.Authenticator, writeErr ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		u, _, ok, err := auth.AuthenticateRequest(req)
		if err != nil || !ok {
			if err != nil {
				slog.Debug("unable to authenticate the request", "err", err)
			}
			writeErr(w, req, apierrors.NewUnauthorized("Unauthorized"))
			return
		}
		req.Header.Del("Authorization")
		ctx := WithUser(req.Context(), u)
		if req.Method == http.MethodPost {
			// Creates are traced (see core/trace); the trace starts with who sent them.
			t := &trace.Trace{}
			t.Add(start, "authentication", u.Authenticator, "authenticated", fmt.Sprintf("user %q groups %v", u.Name, u.Groups))
			ctx = trace.With(ctx, t)
		}
		h.ServeHTTP(w, req.WithContext(ctx))
	})
}

// longRunning reports requests that do not count against the in-flight limit.
func longRunning(req *http.Request) bool {
	q := req.URL.Query()
	if w := q.Get("watch"); w == "true" || w == "1" {
		return true
	}
	return strings.HasSuffix(req.URL.Path, "/log") || strings.HasSuffix(req.URL.Path, "/exec") ||
		strings.HasSuffix(req.URL.Path, "/attach") || strings.HasSuffix(req.URL.Path, "/portforward")
}

var mutatingMethods = sets.New(http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete)

// WithMaxInFlight answers 429 when more than readLimit reads or writeLimit writes are
// being served; long-running requests (watches, logs) are not counted.
func WithMaxInFlight(h http.Handler, readLimit, writeLimit int, writeErr ErrorWriter) http.Handler {
	reads := make(chan struct{}, max(readLimit, 1))
	writes := make(chan struct{}, max(writeLimit, 1))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if longRunning(req) {
			h.ServeHTTP(w, req)
			return
		}
		sem := reads
		if mutatingMethods.Has(req.Method) {
			sem = writes
		}
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			h.ServeHTTP(w, req)
		default:
			w.Header().Set("Retry-After", "1")
			writeErr(w, req, apierrors.NewTooManyRequests("too many requests, please try again later", 1))
		}
	})
}
