package filters

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
)

// RequestInfo is what a request is about, parsed from its path and query as Kubernetes'
// RequestInfoFactory parses it; authorization, audit and metrics read it.
type RequestInfo struct {
	// IsResourceRequest is true for /api/VERSION/… and /apis/GROUP/VERSION/… paths that
	// name a resource; discovery documents and everything else are non-resource requests.
	IsResourceRequest bool
	// Path is the URL path.
	Path string
	// Verb is the Kubernetes verb (get list watch create update patch delete
	// deletecollection proxy) for resource requests, the lower-cased HTTP method otherwise.
	Verb string
	// APIPrefix is "api" or "apis"; APIGroup and APIVersion follow.
	APIPrefix, APIGroup, APIVersion string
	// Namespace, Resource, Subresource and Name locate the object.
	Namespace, Resource, Subresource, Name string
	// Parts are the path segments after the namespace, when present.
	Parts []string
}

// namespaceSubresources are subresources of a namespace object itself
// (/api/v1/namespaces/NAME/status), not resources inside the namespace.
var namespaceSubresources = sets.New("status", "finalize")

// NewRequestInfo parses req as Kubernetes does:
//
//	/api/v1/namespaces/{ns}/{resource}/{name}/{subresource} (resource requests)
//	/apis/{group}/{version}/{resource}/{name}
//	/api/v1/watch/namespaces/{ns}/{resource} (legacy watch) and …/proxy/…
//	/healthz, /api, /apis/{group}/{version} (non-resource requests)
//
// A GET without a name is list, or watch with watch=true; a list or watch whose field
// selector pins metadata.name carries that name; a DELETE without a name is
// deletecollection.
func NewRequestInfo(req *http.Request) *RequestInfo {
	info := &RequestInfo{Path: req.URL.Path, Verb: strings.ToLower(req.Method)}
	parts := splitPath(req.URL.Path)
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return info
	}
	info.APIPrefix = parts[0]
	parts = parts[1:]
	if info.APIPrefix == "apis" {
		if len(parts) < 3 {
			// /apis/GROUP/VERSION is the group version's discovery document.
			return info
		}
		info.APIGroup = parts[0]
		parts = parts[1:]
	}
	info.APIVersion = parts[0]
	parts = parts[1:]
	verb := ""
	switch parts[0] {
	case "watch", "proxy":
		if len(parts) < 2 {
			return info
		}
		verb = parts[0]
		parts = parts[1:]
	default:
		switch req.Method {
		case http.MethodPost:
			verb = "create"
		case http.MethodGet, http.MethodHead:
			verb = "get"
		case http.MethodPut:
			verb = "update"
		case http.MethodPatch:
			verb = "patch"
		case http.MethodDelete:
			verb = "delete"
		}
	}
	info.IsResourceRequest = true
	info.Verb = verb
	if parts[0] == "namespaces" {
		if len(parts) > 1 {
			info.Namespace = parts[1]
			// /namespaces/NS/RESOURCE/… is a resource in NS; /namespaces/NS/status is the
			// namespace's own subresource.
			if len(parts) > 2 && !namespaceSubresources.Has(parts[2]) {
				parts = parts[2:]
			}
		}
	}
	info.Parts = parts
	if len(parts) >= 3 && verb != "proxy" {
		info.Subresource = parts[2]
	}
	if len(parts) >= 2 {
		info.Name = parts[1]
	}
	if len(parts) >= 1 {
		info.Resource = parts[0]
	}
	if info.Name == "" && info.Verb == "get" {
		q := req.URL.Query()
		info.Verb = "list"
		if w := q.Get("watch"); q.Has("watch") && w != "false" && w != "0" {
			info.Verb = "watch"
		}
		if fs := q.Get("fieldSelector"); fs != "" {
			if sel, err := fields.ParseSelector(fs); err == nil {
				if name, ok := sel.RequiresExactMatch("metadata.name"); ok && len(path.ValidatePathSegmentName(name, false)) == 0 {
					info.Name = name
				}
			}
		}
	}
	if info.Name == "" && info.Verb == "delete" {
		info.Verb = "deletecollection"
	}
	return info
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

type requestInfoKey struct{}

// WithRequestInfoContext returns ctx carrying info.
func WithRequestInfoContext(ctx context.Context, info *RequestInfo) context.Context {
	return context.WithValue(ctx, requestInfoKey{}, info)
}

// RequestInfoFrom returns the request info the WithRequestInfo filter stored, if any.
func RequestInfoFrom(ctx context.Context) (*RequestInfo, bool) {
	info, ok := ctx.Value(requestInfoKey{}).(*RequestInfo)
	return info, ok
}

// WithRequestInfo parses each request's RequestInfo into its context.
func WithRequestInfo(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.ServeHTTP(w, req.WithContext(WithRequestInfoContext(req.Context(), NewRequestInfo(req))))
	})
}
