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

// EquivalentResourcesFor implements runtime.EquivalentResourceMapper.
func (e equivalents) EquivalentResourcesFor(resource schema.GroupVersionResource, subresource string) []schema.GroupVersionResource {
	groups := e.s.Groups()
	prefix := ""
	for _, r := range groups[resource.GroupVersion()] {
		if r.Scope.Store.Resource.Name == resource.Resource {
			prefix = r.Scope.Store.Resource.StoragePrefix
		}
	}
	if prefix == "" {
		return nil
	}
	var out []schema.GroupVersionResource
	for gv, rs := range groups {
		for _, r := range rs {
			if r.Scope.Store.Resource.StoragePrefix != prefix || (subresource != "" && !hasSubresource(r.Subresources, subresource)) {
				continue
			}
			out = append(out, gv.WithResource(r.Scope.Store.Resource.Name))
		}
	}
	return out
}

// KindFor implements runtime.EquivalentResourceMapper.
func (e equivalents) KindFor(resource schema.GroupVersionResource, subresource string) schema.GroupVersionKind {
	for _, r := range e.s.Groups()[resource.GroupVersion()] {
		res := r.Scope.Store.Resource
		if res.Name != resource.Resource {
			continue
		}
		if subresource == "" {
			return res.GroupVersionKind()
		}
		for _, sub := range r.Subresources {
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
