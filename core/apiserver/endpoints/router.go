package endpoints

import (
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// Routes dispatches the resource requests of a fixed set of resources: the REST paths
// Kubernetes serves below /api/v1 and /apis/GROUP/VERSION. A Routes never changes once
// built; a server whose resources change at run time builds a new one and swaps it in
// (copy on write), so that a request is routed by a lookup in plain maps.
type Routes struct {
	codecs *Codecs
	groups map[schema.GroupVersion]*VersionRoutes
}

// VersionRoutes are the resources of one group version.
type VersionRoutes struct {
	// GroupVersion is what the resources are served under.
	GroupVersion schema.GroupVersion
	// Resources in the order they were added (discovery's order).
	Resources []*APIResource
	codecs    *Codecs
	byName    map[string]*resourceRoutes
}

// resourceRoutes are a resource's handlers by path shape and method, built once.
type resourceRoutes struct {
	a *APIResource
	// allNamespaces serves the bare collection path of a namespaced resource.
	allNamespaces, collection, item map[string]HandlerFunc
}

// NewRoutes indexes resources by group version and plural name; codecs write the
// errors of paths no resource serves.
func NewRoutes(codecs *Codecs, resources []*APIResource) *Routes {
	r := &Routes{codecs: codecs, groups: map[schema.GroupVersion]*VersionRoutes{}}
	for _, a := range resources {
		res := a.Scope.resource()
		v := r.groups[res.GroupVersion]
		if v == nil {
			v = &VersionRoutes{GroupVersion: res.GroupVersion, codecs: codecs, byName: map[string]*resourceRoutes{}}
			r.groups[res.GroupVersion] = v
		}
		v.Resources = append(v.Resources, a)
		v.byName[res.Name] = &resourceRoutes{a: a, allNamespaces: a.methods("list"),
			collection: a.methods("list", "create", "deletecollection"), item: a.methods("get", "update", "patch", "delete")}
	}
	return r
}

// Version returns the resources of gv, nil when gv is not served.
func (r *Routes) Version(gv schema.GroupVersion) *VersionRoutes { return r.groups[gv] }

// GroupVersions returns every served group version, sorted by group, the highest version of a group first.
func (r *Routes) GroupVersions() []schema.GroupVersion {
	out := make([]schema.GroupVersion, 0, len(r.groups))
	for gv := range r.groups {
		out = append(out, gv)
	}
	// By group; within a group the highest version first (Kubernetes' version priority:
	// v2 > v1 > v1beta1 > v1alpha1), which discovery takes as the preferred one.
	slices.SortFunc(out, func(a, b schema.GroupVersion) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return -version.CompareKubeAwareVersionStrings(a.Version, b.Version)
	})
	return out
}

// SplitPath splits a REST path into its group version and the segments after the
// version's root (/api/v1 or /apis/GROUP/VERSION); ok is false for any other path,
// including the roots /api, /apis and /apis/GROUP.
func SplitPath(path string) (gv schema.GroupVersion, rest []string, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		return schema.GroupVersion{Version: parts[1]}, parts[2:], true
	case len(parts) >= 3 && parts[0] == "apis":
		return schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:], true
	}
	return schema.GroupVersion{}, nil, false
}

// ServeHTTP serves a resource request of any served group version; anything else is
// answered 404.
func (r *Routes) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	gv, rest, ok := SplitPath(req.URL.Path)
	var v *VersionRoutes
	if ok {
		v = r.groups[gv]
	}
	if v == nil || len(rest) == 0 {
		r.codecs.WriteError(w, req, NotFound())
		return
	}
	v.Serve(w, req, rest)
}

// Serve dispatches a request for the path segments rest below the group version's
// root: [RESOURCE], [RESOURCE NAME], [RESOURCE NAME SUBRESOURCE], each optionally after
// [namespaces NAMESPACE] for a namespaced resource. A path no route has is answered 404,
// a known path with a method it does not serve 405, as go-restful answered.
func (v *VersionRoutes) Serve(w http.ResponseWriter, req *http.Request, rest []string) {
	handlers, r, res, ok := v.route(rest)
	if res != nil && res.Warning != "" {
		addWarning(w, res.Warning)
	}
	if !ok || len(handlers) == 0 {
		v.codecs.WriteError(w, req, NotFound())
		return
	}
	h := handlers[req.Method]
	if h == nil {
		v.codecs.WriteError(w, req, apierrors.NewMethodNotSupported(schema.GroupResource{}, req.Method))
		return
	}
	h(w, req, r)
}

// route finds the handlers by method of the path rest, and the request they serve.
func (v *VersionRoutes) route(rest []string) (map[string]HandlerFunc, Request, *registry.Resource, bool) {
	var r Request
	namespaced := false
	// namespaces/NS/RESOURCE… names a namespaced resource; otherwise namespaces/NAME/SUB
	// is a subresource of a namespace object (Kubernetes' namespaceSubresources).
	if len(rest) >= 3 && rest[0] == "namespaces" {
		if rr := v.byName[rest[2]]; rr != nil && rr.a.Scope.resource().Namespaced {
			namespaced = true
			r.Namespace = rest[1]
			rest = rest[2:]
		}
	}
	rr := v.byName[rest[0]]
	if rr == nil || len(rest) > 3 || slices.Contains(rest, "") {
		return nil, r, nil, false
	}
	res := rr.a.Scope.resource()
	fail := func() (map[string]HandlerFunc, Request, *registry.Resource, bool) { return nil, r, res, false }
	if res.Namespaced && !namespaced && len(rest) > 1 {
		// Objects of a namespaced resource live below their namespace only; the bare
		// collection is the all-namespaces list and watch.
		return fail()
	}
	if !res.Namespaced && namespaced {
		return fail()
	}
	switch len(rest) {
	case 1:
		if res.Namespaced && !namespaced {
			return rr.allNamespaces, r, res, true
		}
		return rr.collection, r, res, true
	case 2:
		r.Name = rest[1]
		return rr.item, r, res, true
	}
	r.Name, r.Subresource = rest[1], rest[2]
	for _, sub := range rr.a.Subresources {
		if sub.Name == rest[2] {
			return sub.Handlers, r, res, true
		}
	}
	return fail()
}

// methods returns the handlers of the verbs the resource serves among verbs, by method.
func (a *APIResource) methods(verbs ...string) map[string]HandlerFunc {
	res := a.Scope.resource()
	out := map[string]HandlerFunc{}
	for _, verb := range verbs {
		if res.Verbs != nil && !slices.Contains(res.Verbs, verb) {
			continue
		}
		switch verb {
		case "list":
			out[http.MethodGet] = a.Scope.ListOrWatch
			if a.ListHandler != nil {
				out[http.MethodGet] = a.ListHandler
			}
		case "create":
			out[http.MethodPost] = a.Scope.Create
			if a.CreateHandler != nil {
				out[http.MethodPost] = a.CreateHandler
			}
		case "deletecollection":
			out[http.MethodDelete] = a.Scope.DeleteCollection
		case "get":
			out[http.MethodGet] = a.Scope.Get
			if a.GetHandler != nil {
				out[http.MethodGet] = a.GetHandler
			}
		case "update":
			out[http.MethodPut] = func(w http.ResponseWriter, req *http.Request, r Request) { a.Scope.Update(w, req, r, nil) }
		case "patch":
			out[http.MethodPatch] = func(w http.ResponseWriter, req *http.Request, r Request) { a.Scope.Patch(w, req, r, nil) }
		case "delete":
			out[http.MethodDelete] = a.Scope.Delete
		}
	}
	return out
}
