package mux

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(name)) })
}

func TestPathRecorder(t *testing.T) {
	p := NewPathRecorder(named("404"))
	p.Handle("/healthz", named("healthz"))
	p.HandlePrefix("/healthz/", named("healthz-sub"))
	p.HandlePrefix("/debug/", named("debug"))
	p.HandlePrefix("/debug/pprof/", named("pprof"))
	tests := []struct{ path, want string }{
		{"/healthz", "healthz"},
		{"/healthz/etcd", "healthz-sub"},
		{"/debug/pprof/heap", "pprof"},
		{"/debug/vars", "debug"},
		{"/nothing", "404"},
		{"/healthzz", "404"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("%s served by %q, want %q", tt.path, got, tt.want)
			}
		})
	}
	if got := len(p.ListedPaths()); got != 4 {
		t.Errorf("ListedPaths has %d entries, want 4", got)
	}
}
