package filters

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/core/authn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func writeStatus(w http.ResponseWriter, _ *http.Request, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	s := st.Status()
	w.WriteHeader(int(s.Code))
	_ = json.NewEncoder(w).Encode(s)
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatalf("response is not a Status: %v: %s", err, rec.Body.String())
	}
	return s
}

func TestPanicRecovery(t *testing.T) {
	h := WithPanicRecovery(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), writeStatus)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	if rec.Code != http.StatusInternalServerError || decode(t, rec).Reason != metav1.StatusReasonInternalError {
		t.Fatalf("got %d %s, want 500 InternalError", rec.Code, rec.Body.String())
	}
}

type fixedAuth struct {
	u   *User
	ok  bool
	err error
}

func (f fixedAuth) AuthenticateRequest(*http.Request) (*User, []string, bool, error) {
	return f.u, nil, f.ok, f.err
}

func TestAuthentication(t *testing.T) {
	tests := []struct {
		name     string
		auth     authn.Authenticator
		wantCode int
		wantUser string
	}{
		{"admin", AdminAuthenticator{}, http.StatusOK, "system:admin"},
		{"rejected", fixedAuth{}, http.StatusUnauthorized, ""},
		{"error", fixedAuth{err: errors.New("bad token")}, http.StatusUnauthorized, ""},
		{"user", fixedAuth{u: &User{Name: "alice"}, ok: true}, http.StatusOK, "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sawUser, sawAuthz string
			h := WithAuthentication(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				if u, ok := UserFrom(r.Context()); ok {
					sawUser = u.Name
				}
				sawAuthz = r.Header.Get("Authorization")
			}), tt.auth, writeStatus)
			req := httptest.NewRequest(http.MethodGet, "/api", nil)
			req.Header.Set("Authorization", "Bearer secret")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Fatalf("code %d, want %d", rec.Code, tt.wantCode)
			}
			if tt.wantCode == http.StatusUnauthorized && decode(t, rec).Reason != metav1.StatusReasonUnauthorized {
				t.Errorf("reason is not Unauthorized: %s", rec.Body.String())
			}
			if sawUser != tt.wantUser {
				t.Errorf("user %q, want %q", sawUser, tt.wantUser)
			}
			if sawAuthz != "" {
				t.Errorf("Authorization header reached the handler")
			}
		})
	}
}

func TestMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	h := WithMaxInFlight(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-release
	}), 1, 1, writeStatus)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil))
	}()
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("second read: %d (Retry-After %q), want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	// Writes have their own budget, and watches are not counted at all.
	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/a/pods", nil),
		httptest.NewRequest(http.MethodGet, "/api/v1/pods?watch=true", nil),
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.ServeHTTP(httptest.NewRecorder(), req)
		}()
		<-entered
	}
	close(release)
	wg.Wait()
}
