package apiserver

import (
	"context"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/admission/plugins"
	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	"k8s.io/apimachinery/pkg/api/meta"
)

// CountPlugins implements plugins.PluginCounter with a consistent read, so that a plugin
// created a moment ago counts.
func (r registryReader) CountPlugins(ctx context.Context, namespace string) (int, error) {
	obj, err := r.list(ctx, wasmv1.SchemeGroupVersion.WithResource("wasmplugins").GroupResource(), namespace, "")
	if err != nil {
		return 0, err
	}
	return meta.LenList(obj), nil
}

// GetModule implements plugins.ModuleGetter with a read from etcd: a module shared a
// moment ago (an upload just before the plugin's create) may not be in the cache yet.
func (r registryReader) GetModule(ctx context.Context, name string) (*wasmv1.WasmModule, error) {
	st, err := r.store(wasmv1.SchemeGroupVersion.WithResource("wasmmodules").GroupResource())
	if err != nil {
		return nil, err
	}
	obj, err := st.Get(ctx, "", name, nil)
	if err != nil {
		return nil, err
	}
	return obj.(*wasmv1.WasmModule), nil
}

// userAuthorizer asks a for an admission plugin, as a SubjectAccessReview would.
func userAuthorizer(a authz.Authorizer) plugins.UserAuthorizer {
	return func(ctx context.Context, u admission.UserInfo, verb, group, resource, name string) (bool, error) {
		d, _, err := a.Authorize(ctx, authz.Attributes{
			User: &authn.User{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra},
			Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Name: name,
		})
		if err != nil {
			return false, err
		}
		return d == authz.DecisionAllow, nil
	}
}
