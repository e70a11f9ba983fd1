package apiserver

import (
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EquivalentResources says which served resources are the same objects under another
// group or version (they share a storage prefix: a custom resource's versions), and the
// kind each is served as — what an admission webhook's matchPolicy Equivalent reads.
func (s *Server) EquivalentResources() runtime.EquivalentResourceMapper { return equivalents{s} }

type equivalents struct{ s *Server }

// equivalence indexes a snapshot's served resources by storage prefix, in the order of
// the routes' group versions: asked on every admission request that a webhook or policy
// with matchPolicy Equivalent looks at, which must not rebuild the table of group
// versions (sorted by version priority) each time.
type equivalence struct {
	prefixOf map[schema.GroupVersionResource]string
	byPrefix map[string][]equivalent
}

// equivalent is one served resource of a storage prefix.
type equivalent struct {
	gvr schema.GroupVersionResource
	api *endpoints.APIResource
}

func newEquivalence(routes *endpoints.Routes) equivalence {
	e := equivalence{prefixOf: map[schema.GroupVersionResource]string{}, byPrefix: map[string][]equivalent{}}
	for _, gv := range routes.GroupVersions() {
		for _, r := range routes.Version(gv).Resources {
			res := r.Scope.Store.Resource
			gvr := gv.WithResource(res.Name)
			e.prefixOf[gvr] = res.StoragePrefix
			e.byPrefix[res.StoragePrefix] = append(e.byPrefix[res.StoragePrefix], equivalent{gvr, r})
		}
	}
	return e
}

// EquivalentResourcesFor implements runtime.EquivalentResourceMapper.
func (e equivalents) EquivalentResourcesFor(resource schema.GroupVersionResource, subresource string) []schema.GroupVersionResource {
	idx := &e.s.cur.Load().equiv
	prefix := idx.prefixOf[resource]
	if prefix == "" {
		return nil
	}
	var out []schema.GroupVersionResource
	for _, r := range idx.byPrefix[prefix] {
		if subresource != "" && !hasSubresource(r.api.Subresources, subresource) {
			continue
		}
		out = append(out, r.gvr)
	}
	return out
}

// KindFor implements runtime.EquivalentResourceMapper.
func (e equivalents) KindFor(resource schema.GroupVersionResource, subresource string) schema.GroupVersionKind {
	idx := &e.s.cur.Load().equiv
	for _, r := range idx.byPrefix[idx.prefixOf[resource]] {
		if r.gvr != resource {
			continue
		}
		res := r.api.Scope.Store.Resource
		if subresource == "" {
			return res.GroupVersionKind()
		}
		for _, sub := range r.api.Subresources {
			if sub.Name == subresource {
				if sub.Kind.Empty() {
					return res.GroupVersionKind()
				}
				return sub.Kind
			}
		}
	}
	return schema.GroupVersionKind{}
}

func hasSubresource(subs []endpoints.Subresource, name string) bool {
	for _, s := range subs {
		if s.Name == name {
			return true
		}
	}
	return false
}

// DefaultObject applies the defaults of the resource obj's kind is served as (an
// admission webhook's patched object is defaulted again, as in kube-apiserver); an
// object of a kind not served is left as it is.
func (s *Server) DefaultObject(obj runtime.Object) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	for _, r := range s.Groups()[gvk.GroupVersion()] {
		if res := r.Scope.Store.Resource; res.Kind == gvk.Kind {
			res.Strategy.Default(obj)
			return
		}
	}
}
