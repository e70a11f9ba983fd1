package mux

import (
	"net/http"
	"net/http/httptest"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
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

func TestDirector(t *testing.T) {
	c := restful.NewContainer()
	c.Router(restful.CurlyRouter{})
	for _, root := range []string{"/api/v1", "/apis", "/apis/apps/v1"} {
		ws := new(restful.WebService)
		ws.Path(root)
		r := root
		ws.Route(ws.GET("/").To(func(_ *restful.Request, resp *restful.Response) { _, _ = resp.Write([]byte("rest:" + r)) }))
		ws.Route(ws.GET("/{x}").To(func(_ *restful.Request, resp *restful.Response) { _, _ = resp.Write([]byte("rest:" + r + "/x")) }))
		c.Add(ws)
	}
	d := Director{Container: c, NonGoRestful: named("other")}
	tests := []struct{ path, want string }{
		{"/api/v1", "rest:/api/v1"},
		{"/api/v1/pods", "rest:/api/v1/x"},
		{"/apis", "rest:/apis"},
		{"/apis/apps/v1/deployments", "rest:/apis/apps/v1/x"},
		// Only the exact /apis belongs to the /apis service; other groups fall through.
		{"/apis/batch/v1", "other"},
		{"/api/v1beta", "other"},
		{"/healthz", "other"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			d.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("%s served by %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}
