// Package mux holds the seed's director and path recorder: /api and /apis go to the
// go-restful container; everything else is matched by exact path, then by prefix.
package mux

import (
	"net/http"
	"sort"
	"strings"
	"sync"

	restful "github.com/emicklei/go-restful/v3"
)

// PathRecorder routes non-REST paths: exact matches first, then the longest prefix.
type PathRecorder struct {
	mu       sync.RWMutex
	exact    map[string]http.Handler
	prefixes []prefixHandler
	notFound http.Handler
}

type prefixHandler struct {
	prefix  string
	handler http.Handler
}

// NewPathRecorder returns an empty recorder answering notFound for unknown paths.
func NewPathRecorder(notFound http.Handler) *PathRecorder {
	return &PathRecorder{exact: map[string]http.Handler{}, notFound: notFound}
}

// Handle serves exactly path.
func (p *PathRecorder) Handle(path string, h http.Handler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exact[path] = h
}

// HandlePrefix serves every path below prefix (which should end in "/").
func (p *PathRecorder) HandlePrefix(prefix string, h http.Handler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prefixes = append(p.prefixes, prefixHandler{prefix, h})
	// Longest prefix first, so that a more specific handler wins.
	sort.SliceStable(p.prefixes, func(i, j int) bool { return len(p.prefixes[i].prefix) > len(p.prefixes[j].prefix) })
}

// ServeHTTP implements the seed's pathHandler.ServeHTTP.
func (p *PathRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.RLock()
	h, ok := p.exact[r.URL.Path]
	if !ok {
		for _, ph := range p.prefixes {
			if strings.HasPrefix(r.URL.Path, ph.prefix) {
				h, ok = ph.handler, true
				break
			}
		}
	}
	p.mu.RUnlock()
	if !ok {
		h = p.notFound
	}
	h.ServeHTTP(w, r)
}

// ListedPaths are the registered paths, for the root document.
func (p *PathRecorder) ListedPaths() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []string
	for path := range p.exact {
		out = append(out, path)
	}
	for _, ph := range p.prefixes {
		out = append(out, ph.prefix)
	}
	sort.Strings(out)
	return out
}

// Director sends requests for registered web services to go-restful and the rest to
// the path recorder: the seed's director.ServeHTTP.
type Director struct {
	// Container holds the REST web services (/api, /apis/...).
	Container *restful.Container
	// NonGoRestful serves everything else.
	NonGoRestful http.Handler
}

// ServeHTTP implements the seed's director.ServeHTTP.
func (d Director) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	path := req.URL.Path
	for _, ws := range d.Container.RegisteredWebServices() {
		root := ws.RootPath()
		switch {
		case root == "/apis":
			// Only the group list itself: /apis/<group>/... belong to their own services.
			if path == "/apis" || path == "/apis/" {
				d.Container.Dispatch(w, req)
				return
			}
		case strings.HasPrefix(path, root):
			if len(path) == len(root) || path[len(root)] == '/' {
				d.Container.Dispatch(w, req)
				return
			}
		}
	}
	d.NonGoRestful.ServeHTTP(w, req)
}
