package endpoints

import (
	"net/http"
	"slices"

	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
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
	// GetHandler and ListHandler, when set, replace the generic get and list (a resource
	// computed on request rather than stored, such as metrics.k8s.io's).
	GetHandler, ListHandler HandlerFunc
}

// Definition is everything a server needs to serve one resource: its descriptor, and the
// handlers of what is not generic (subresources, a create whose body is not the
// object). It is what Server.AddResource takes, for built-in and custom resources alike.
type Definition struct {
	// Resource is the descriptor: what is stored where and every rule of the generic
	// create, update and delete.
	Resource *registry.Resource
	// Subresources, when set, builds the subresources on the resource's scope.
	Subresources func(s *Scope) []Subresource
	// CreateHandler, when set, replaces the generic create.
	CreateHandler func(s *Scope) HandlerFunc
	// GetHandler and ListHandler, when set, replace the generic get and list.
	GetHandler, ListHandler func(s *Scope) HandlerFunc
	// Storage, when set, is the storage served instead of one the server makes (the
	// versions of a custom resource share one); its owner stops it.
	Storage storage.Interface
	// OpenAPIV3, when set, is the resource's OpenAPI v3 document, served in its group
	// version's document instead of one derived from the scheme (custom resources, whose
	// types the scheme does not know).
	OpenAPIV3 *spec3.OpenAPI
	// OpenAPIV2, likewise, holds the resource's definitions and paths for /openapi/v2.
	OpenAPIV2 *spec.Swagger
}

// StatusSubresource serves get/update/patch of an object's status with strategy.
func StatusSubresource(s *Scope, strategy registry.Strategy) Subresource {
	return UpdateSubresource(s, "status", strategy)
}

// UpdateSubresource serves get/update/patch of the whole object under the subresource
// name, with strategy deciding which part of the object the write may change (status,
// a pod's ephemeral containers).
func UpdateSubresource(s *Scope, name string, strategy registry.Strategy) Subresource {
	return Subresource{Name: name, Handlers: map[string]HandlerFunc{
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
