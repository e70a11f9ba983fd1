// Package mux holds the seed's path recorder: the non-REST paths (health, version,
// metrics, OpenAPI…), matched by exact path, then by prefix.
package mux

import (
	"net/http"
	"sort"
	"strings"
	"sync"
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
