package resources

import (
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/authz"
	"github.com/wasmplane/wasmplane/core/storage/blobs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// BuiltinConfig is what the built-in resources need from the server that serves them.
type BuiltinConfig struct {
	// Kubelet is how pods/log reaches kubelets.
	Kubelet KubeletConnection
	// TokenRequest, when set, serves serviceaccounts/token.
	TokenRequest *TokenRequestConfig
	// TokenReviewer, when set, serves TokenReview.
	TokenReviewer TokenReviewer
	// Blobs keeps uploaded WASM modules; nil = no module store.
	Blobs *blobs.Store
	// Authorizer and RuleResolver back the access reviews and RBAC's escalation check.
	Authorizer   authz.Authorizer
	RuleResolver authz.RuleResolver
	// ServiceAllocator, when set, allocates Services' cluster IPs and node ports.
	ServiceAllocator registry.Allocator
	// NamespaceMarked, when set, hears the name of each namespace a delete has just put
	// in Terminating (NamespaceLifecycle reads such a namespace from etcd for a while).
	NamespaceMarked func(name string)
	// Stores, when set, reaches any served resource's storage; pods/eviction reads and
	// spends PodDisruptionBudgets through it.
	Stores func(schema.GroupResource) *registry.Store
}

// ungroupedKeys are the built-in groups whose storage keys drop the group
// ("/registry/RESOURCE", Kubernetes' layout for its own groups); every other built-in
// group keeps it ("/registry/GROUP/RESOURCE"), as wasmplane has always stored them.
// Changing either would hide the objects of an existing data directory.
var ungroupedKeys = map[string]bool{"": true, "apps": true, "coordination.k8s.io": true, "wasmplane.io": true, "admissionregistration.k8s.io": true, "batch": true}

// Builtins returns every built-in resource, each with its storage prefix.
func Builtins(cfg BuiltinConfig) []Definition {
	kc := cfg.Kubelet
	if kc.Authorizer == nil {
		kc.Authorizer = cfg.Authorizer
	}
	core := WithKubeletConnection(Core(), kc)
	if cfg.TokenRequest != nil {
		AddTokenRequest(core, *cfg.TokenRequest)
	}
	if cfg.Stores != nil {
		AddEviction(core, cfg.Stores)
	}
	if cfg.NamespaceMarked != nil {
		for i, d := range core {
			if d.Resource.GroupVersionKind() != corev1.SchemeGroupVersion.WithKind("Namespace") {
				continue
			}
			res, mark := *d.Resource, d.Resource.OnDeleteMarked
			res.OnDeleteMarked = func(obj runtime.Object) {
				mark(obj)
				cfg.NamespaceMarked(obj.(*corev1.Namespace).Name)
			}
			core[i].Resource = &res
		}
	}
	inputs := SchedulingInputs()
	if cfg.ServiceAllocator != nil {
		for i, d := range inputs {
			if d.Resource.GroupVersionKind() == corev1.SchemeGroupVersion.WithKind("Service") {
				res := *d.Resource
				res.Allocator = cfg.ServiceAllocator
				inputs[i].Resource = &res
			}
		}
	}
	var all []Definition
	for _, group := range [][]Definition{
		core, Endpoints(), Discovery(), Networking(), Apps(), Batch(), Coordination(), Events(), Wasmplane(cfg.Blobs), Initializers(), Policy(),
		RBAC(cfg.Authorizer, cfg.RuleResolver), Certificates(cfg.Authorizer), inputs, NodeAPI(), FlowControl(),
		Authorization(cfg.Authorizer, cfg.RuleResolver), Authentication(cfg.TokenReviewer), VolumeAttributes(), StorageMigration(),
		APIRegistration(), AutoscalingV2(),
	} {
		for _, d := range group {
			if d.Resource.StoragePrefix == "" {
				d.Resource.StoragePrefix = builtinPrefix(d.Resource.GroupVersion.Group, d.Resource.Name)
			}
			all = append(all, d)
		}
	}
	return all
}

// builtinPrefix is the storage prefix of a built-in resource.
func builtinPrefix(group, resource string) string {
	if ungroupedKeys[group] {
		return "/registry/" + resource
	}
	return "/registry/" + group + "/" + resource
}
