package filters

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/authz"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestImpersonationCache runs requests in order through one filter and counts the
// authorization checks each makes: an allowed impersonation is checked once per TTL and
// per requester, wanted user and request; a refusal is checked every time.
func TestImpersonationCache(t *testing.T) {
	// dana may impersonate jane (legacy); nobody may impersonate bob.
	checks := 0
	az := authz.AuthorizerFunc(func(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
		checks++
		if a.User.Name == "dana" && a.Verb == "impersonate" && a.Resource == "users" && a.Name == "jane" {
			return authz.DecisionAllow, "", nil
		}
		return authz.DecisionNoOpinion, "", nil
	})
	clk := clocktesting.NewFakeClock(time.Now())
	var seen string
	inner := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, _ := UserFrom(req.Context())
		seen = u.Name
		w.WriteHeader(http.StatusOK)
	})
	h := withImpersonation(inner, az, func(w http.ResponseWriter, _ *http.Request, err error) {
		if s, ok := err.(apierrors.APIStatus); ok {
			w.WriteHeader(int(s.Status().Code))
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}, clk)

	steps := []struct {
		name, requester, as, path string
		later                     time.Duration
		code                      int
		checked                   bool
	}{
		{"first", "dana", "jane", "/api/v1/namespaces/a/pods", 0, http.StatusOK, true},
		{"again", "dana", "jane", "/api/v1/namespaces/a/pods", 0, http.StatusOK, false},
		{"another request", "dana", "jane", "/api/v1/namespaces/b/pods", 0, http.StatusOK, true},
		{"another requester", "carl", "jane", "/api/v1/namespaces/a/pods", 0, http.StatusForbidden, true},
		{"refused", "dana", "bob", "/api/v1/namespaces/a/pods", 0, http.StatusForbidden, true},
		{"refused again", "dana", "bob", "/api/v1/namespaces/a/pods", 0, http.StatusForbidden, true},
		{"within the TTL", "dana", "jane", "/api/v1/namespaces/a/pods", 9 * time.Second, http.StatusOK, false},
		{"after the TTL", "dana", "jane", "/api/v1/namespaces/a/pods", 2 * time.Second, http.StatusOK, true},
	}
	for _, st := range steps {
		clk.Step(st.later)
		checks, seen = 0, ""
		req := httptest.NewRequest(http.MethodGet, st.path, nil)
		req.Header.Set("Impersonate-User", st.as)
		req = req.WithContext(WithUser(req.Context(), &User{Name: st.requester, Groups: []string{"system:authenticated"}}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != st.code || (checks > 0) != st.checked {
			t.Fatalf("%s: code %d with %d checks, want %d (checked: %v)", st.name, rec.Code, checks, st.code, st.checked)
		}
		if st.code == http.StatusOK && seen != st.as {
			t.Fatalf("%s: ran as %q, want %q", st.name, seen, st.as)
		}
	}
}
