package endpoints

import (
	"net/http"
	"slices"

	restful "github.com/emicklei/go-restful/v3"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// HandlerFunc serves one route of a resource.
type HandlerFunc func(w http.ResponseWriter, req *http.Request, r Request)

// Subresource is a sub-path of an object such as pods/binding or deployments/scale.
type Subresource struct {
	// Name is the path segment, e.g. "binding".
	Name string
	// Kind is what the subresource accepts and returns; empty = the parent's kind.
	Kind schema.GroupVersionKind
	// Handlers by HTTP method.
	Handlers map[string]HandlerFunc
}

// APIResource is one resource with its scope and its subresources.
type APIResource struct {
	// Scope serves the main verbs.
	Scope *Scope
	// Subresources served below each object.
	Subresources []Subresource
	// CreateHandler, when set, replaces the generic create (a resource whose POST body
	// is not the object itself, such as an uploaded module).
	CreateHandler HandlerFunc
}

// StatusSubresource serves get/update/patch of an object's status with strategy.
func StatusSubresource(s *Scope, strategy registry.Strategy) Subresource {
	return Subresource{Name: "status", Handlers: map[string]HandlerFunc{
		http.MethodGet:   s.Get,
		http.MethodPut:   func(w http.ResponseWriter, req *http.Request, r Request) { s.Update(w, req, r, strategy) },
		http.MethodPatch: func(w http.ResponseWriter, req *http.Request, r Request) { s.Patch(w, req, r, strategy) },
	}}
}

// Verbs lists what the main resource supports, for discovery.
func (a *APIResource) Verbs() []string {
	if v := a.Scope.resource().Verbs; v != nil {
		return v
	}
	return []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
}

// NewWebService builds the go-restful web service of one group version.
func NewWebService(root string, resources []*APIResource) *restful.WebService {
	ws := new(restful.WebService)
	ws.Path(root).Consumes("*/*").Produces("*/*")
	for _, a := range resources {
		install(ws, a)
	}
	return ws
}

func install(ws *restful.WebService, a *APIResource) {
	res := a.Scope.resource()
	// serves reports whether the resource has verb (a create-only review has no others).
	serves := func(verb string) bool { return res.Verbs == nil || slices.Contains(res.Verbs, verb) }
	route := func(verb string, rb *restful.RouteBuilder) {
		if serves(verb) {
			ws.Route(rb)
		}
	}
	prefixes := []string{"/" + res.Name}
	if res.Namespaced {
		prefixes = []string{"/namespaces/{namespace}/" + res.Name}
		// The all-namespaces list and watch.
		route("list", ws.GET("/"+res.Name).To(wrap(a.Scope.ListOrWatch)).Operation("list"+res.Kind+"ForAllNamespaces"))
	}
	for _, p := range prefixes {
		route("list", ws.GET(p).To(wrap(a.Scope.ListOrWatch)).Operation("list"+res.Kind))
		create := a.Scope.Create
		if a.CreateHandler != nil {
			create = a.CreateHandler
		}
		route("create", ws.POST(p).To(wrap(create)).Operation("create"+res.Kind))
		route("deletecollection", ws.DELETE(p).To(wrap(a.Scope.DeleteCollection)).Operation("deletecollection"+res.Kind))
		item := p + "/{name}"
		route("get", ws.GET(item).To(wrap(a.Scope.Get)).Operation("read"+res.Kind))
		route("update", ws.PUT(item).To(wrap(func(w http.ResponseWriter, req *http.Request, r Request) { a.Scope.Update(w, req, r, nil) })).Operation("replace"+res.Kind))
		route("patch", ws.PATCH(item).To(wrap(func(w http.ResponseWriter, req *http.Request, r Request) { a.Scope.Patch(w, req, r, nil) })).Operation("patch"+res.Kind))
		route("delete", ws.DELETE(item).To(wrap(a.Scope.Delete)).Operation("delete"+res.Kind))
		for _, sub := range a.Subresources {
			methods := make([]string, 0, len(sub.Handlers))
			for m := range sub.Handlers {
				methods = append(methods, m)
			}
			slices.Sort(methods)
			for _, m := range methods {
				ws.Route(ws.Method(m).Path(item + "/" + sub.Name).To(wrapSub(sub.Name, sub.Handlers[m])).Operation(m + res.Kind + sub.Name))
			}
		}
	}
}

func wrap(h HandlerFunc) restful.RouteFunction {
	return func(req *restful.Request, resp *restful.Response) {
		r := Request{Namespace: req.PathParameter("namespace"), Name: req.PathParameter("name")}
		h(resp.ResponseWriter, req.Request, r)
	}
}

func wrapSub(name string, h HandlerFunc) restful.RouteFunction {
	return func(req *restful.Request, resp *restful.Response) {
		r := Request{Namespace: req.PathParameter("namespace"), Name: req.PathParameter("name"), Subresource: name}
		h(resp.ResponseWriter, req.Request, r)
	}
}

// Discovery returns the APIResourceList entries of a group version's resources.
func Discovery(gv schema.GroupVersion, resources []*APIResource) *metav1.APIResourceList {
	list := &metav1.APIResourceList{GroupVersion: gv.String()}
	for _, a := range resources {
		res := a.Scope.resource()
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name:         res.Name,
			SingularName: res.SingularName,
			Namespaced:   res.Namespaced,
			Kind:         res.Kind,
			Verbs:        a.Verbs(),
			ShortNames:   res.ShortNames,
			Categories:   res.Categories,
		})
		for _, sub := range a.Subresources {
			r := metav1.APIResource{Name: res.Name + "/" + sub.Name, Namespaced: res.Namespaced, Kind: res.Kind}
			if !sub.Kind.Empty() {
				r.Kind, r.Group, r.Version = sub.Kind.Kind, sub.Kind.Group, sub.Kind.Version
			}
			for m := range sub.Handlers {
				switch m {
				case http.MethodGet:
					r.Verbs = append(r.Verbs, "get")
				case http.MethodPut:
					r.Verbs = append(r.Verbs, "update")
				case http.MethodPatch:
					r.Verbs = append(r.Verbs, "patch")
				case http.MethodPost:
					r.Verbs = append(r.Verbs, "create")
				}
			}
			slices.Sort(r.Verbs)
			list.APIResources = append(list.APIResources, r)
		}
	}
	return list
}

// NotFound is Kubernetes' 404 for a path nothing serves.
func NotFound() error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "the server could not find the requested resource", 0, false)
}
