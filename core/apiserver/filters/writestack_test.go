package filters

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWithWriteStackServes checks that every method reaches the handler, with its
// request, through WithWriteStack.
func TestWithWriteStackServes(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			var got string
			h := WithWriteStack(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				got = req.Method
				w.WriteHeader(http.StatusTeapot)
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, "/api/v1/namespaces/default/configmaps", nil))
			if got != method || rec.Code != http.StatusTeapot {
				t.Fatalf("handler saw %q and answered %d", got, rec.Code)
			}
		})
	}
}

// deepWrite stands in for a write's call tree: frames of about 1 KiB, depth deep.
//
//go:noinline
func deepWrite(depth int) byte {
	var frame [1024]byte
	frame[depth%len(frame)] = byte(depth)
	if depth == 0 {
		return frame[0]
	}
	return deepWrite(depth-1) + frame[depth%len(frame)]
}

// BenchmarkWriteStack times a request whose handler nests about 20 KiB deep, each on a
// new goroutine as HTTP/2 serves requests, with and without growing the stack first.
func BenchmarkWriteStack(b *testing.B) {
	deep := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { deepWrite(20) })
	req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/configmaps", nil)
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"grown first", WithWriteStack(deep)}, {"grown on demand", deep}} {
		b.Run(c.name, func(b *testing.B) {
			done := make(chan struct{})
			for b.Loop() {
				go func() {
					c.h.ServeHTTP(nil, req)
					done <- struct{}{}
				}()
				<-done
			}
		})
	}
}
