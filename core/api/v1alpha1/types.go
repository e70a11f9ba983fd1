// Package v1alpha1 holds wasmplane's own API types, group wasmplane.io, version v1alpha1:
// WasmPlugin (namespaced, acts only inside its namespace) and ClusterWasmPlugin.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of wasmplane's own types.
const GroupName = "wasmplane.io"

// SchemeGroupVersion is wasmplane.io/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// AddToScheme registers the types of this group version.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&WasmPlugin{}, &WasmPluginList{}, &ClusterWasmPlugin{}, &ClusterWasmPluginList{},
		&WasmModule{}, &WasmModuleList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// Hook names a plugin entry point (the guest exports of sdk/ABI.md).
type Hook string

// The hooks a plugin may implement.
const (
	HookAuthenticate Hook = "authenticate"
	HookMutate       Hook = "mutate"
	HookValidate     Hook = "validate"
	HookInitialize   Hook = "initialize"
	HookFilter       Hook = "filter"
	HookScore        Hook = "score"
)

// FailurePolicy says what callers see when a plugin fails (trap, timeout, bad answer).
type FailurePolicy string

// The failure policies, as in Kubernetes' admission webhooks.
const (
	Fail   FailurePolicy = "Fail"
	Ignore FailurePolicy = "Ignore"
)

// ReinvocationPolicy says whether a mutating plugin runs again when a later plugin
// changed the object, as Kubernetes' reinvocationPolicy of a mutating webhook.
type ReinvocationPolicy string

// The reinvocation policies.
const (
	// IfNeeded (wasmplane's default) runs the plugin once more if a plugin after it
	// changed the object, so that it sees the final object.
	IfNeeded ReinvocationPolicy = "IfNeeded"
	// Never runs the plugin once per request.
	Never ReinvocationPolicy = "Never"
)

// Operation is an admission operation a rule matches.
type Operation string

// The admission operations.
const (
	OperationAll     Operation = "*"
	OperationCreate  Operation = "CREATE"
	OperationUpdate  Operation = "UPDATE"
	OperationDelete  Operation = "DELETE"
	OperationConnect Operation = "CONNECT"
)

// ModuleSource says where a plugin's module comes from.
type ModuleSource struct {
	// Digest references a module stored in the cluster (`wasmplane plugin push`),
	// as "sha256:<hex>".
	Digest string `json:"digest,omitempty"`
	// File is a path on the server's file system ("file:///...").
	File string `json:"file,omitempty"`
	// URL is an OCI or HTTP reference (reserved; not fetched yet).
	URL string `json:"url,omitempty"`
}

// Rule matches requests by group, version, resource, operation and scope, as the
// rules of an admission webhook or the seed's InitializerConfiguration do.
type Rule struct {
	// APIGroups the rule matches; "*" is all.
	APIGroups []string `json:"apiGroups,omitempty"`
	// APIVersions the rule matches; "*" is all.
	APIVersions []string `json:"apiVersions,omitempty"`
	// Resources the rule matches, "pods", "pods/status", "*", "*/*".
	Resources []string `json:"resources,omitempty"`
	// Operations the rule matches; empty = all.
	Operations []Operation `json:"operations,omitempty"`
	// Scope is "Cluster", "Namespaced" or "*" (default).
	Scope string `json:"scope,omitempty"`
}

// SchedulerBinding places Filter/Score hooks in scheduler profiles.
type SchedulerBinding struct {
	// Profiles are the scheduler profile names (schedulerName) the plugin joins;
	// empty = "default-scheduler".
	Profiles []string `json:"profiles,omitempty"`
	// Weight of the Score hook (default 1).
	Weight int32 `json:"weight,omitempty"`
}

// Limits bound one plugin's instances and calls.
type Limits struct {
	// MemoryPages is the maximum linear memory per instance in 64 KiB pages.
	MemoryPages uint32 `json:"memoryPages,omitempty"`
	// Timeout is the deadline of one call (e.g. "100ms").
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// MaxInputBytes and MaxOutputBytes bound the request and the answer.
	MaxInputBytes  int64 `json:"maxInputBytes,omitempty"`
	MaxOutputBytes int64 `json:"maxOutputBytes,omitempty"`
	// MaxInstances bounds the instance pool.
	MaxInstances int32 `json:"maxInstances,omitempty"`
}

// WasmPluginSpec is what a plugin runs and where.
type WasmPluginSpec struct {
	// Module is where the module comes from.
	Module ModuleSource `json:"module"`
	// SHA256 pins the module's digest (lowercase hex); the server refuses other bytes.
	SHA256 string `json:"sha256"`
	// Hooks the plugin is used for.
	Hooks []Hook `json:"hooks"`
	// Rules select the admission requests (mutate, validate) and objects (initialize)
	// the plugin sees.
	Rules []Rule `json:"rules,omitempty"`
	// NamespaceSelector narrows by namespace labels (ClusterWasmPlugin only).
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// ObjectSelector narrows by object labels.
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
	// Initializer is the initializer name the initialize hook serves (e.g.
	// "podimage.example.com").
	Initializer string `json:"initializer,omitempty"`
	// Scheduler places filter/score hooks in profiles.
	Scheduler *SchedulerBinding `json:"scheduler,omitempty"`
	// Config is free JSON passed to the module's configure hook.
	Config *runtime.RawExtension `json:"config,omitempty"`
	// Limits bound the plugin; zero values take the server's defaults.
	Limits *Limits `json:"limits,omitempty"`
	// FailurePolicy is Fail (default) or Ignore.
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`
	// ReinvocationPolicy is IfNeeded (default) or Never; it applies to the mutate hook.
	ReinvocationPolicy ReinvocationPolicy `json:"reinvocationPolicy,omitempty"`
	// Order places the plugin among others of the same hook (lower first).
	Order int32 `json:"order,omitempty"`
	// FullObjects asks for whole objects in scheduling hooks instead of compact
	// node and pod documents.
	FullObjects bool `json:"fullObjects,omitempty"`
}

// ServerLoadState is one API server's or scheduler's view of a plugin.
type ServerLoadState struct {
	// Server is the reporting component's identity.
	Server string `json:"server"`
	// Phase is Loaded or Failed.
	Phase string `json:"phase"`
	// Digest is the module the server runs.
	Digest string `json:"digest,omitempty"`
	// Message explains a failure.
	Message string `json:"message,omitempty"`
	// LastTransitionTime is when Phase last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// WasmPluginStatus reports how the plugin is loaded.
type WasmPluginStatus struct {
	// Phase is Pending, Loaded or Failed.
	Phase string `json:"phase,omitempty"`
	// Digest is the module in use.
	Digest string `json:"digest,omitempty"`
	// Message explains the phase.
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Servers is the per-server load state.
	Servers []ServerLoadState `json:"servers,omitempty"`
}

// WasmPlugin is a plugin acting only inside its own namespace (the tenant case).
type WasmPlugin struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired plugin.
	Spec WasmPluginSpec `json:"spec"`
	// Status is how it is loaded.
	Status WasmPluginStatus `json:"status,omitempty"`
}

// WasmPluginList is a list of WasmPlugins.
type WasmPluginList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the plugins.
	Items []WasmPlugin `json:"items"`
}

// ClusterWasmPlugin is a cluster-wide plugin, for cluster administrators.
type ClusterWasmPlugin struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired plugin.
	Spec WasmPluginSpec `json:"spec"`
	// Status is how it is loaded.
	Status WasmPluginStatus `json:"status,omitempty"`
}

// ClusterWasmPluginList is a list of ClusterWasmPlugins.
type ClusterWasmPluginList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the plugins.
	Items []ClusterWasmPlugin `json:"items"`
}

// WasmModule describes a module stored in the cluster, named "sha256-<hex>"; its bytes
// are kept beside it in chunks (see core/apiserver/modules).
type WasmModule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec describes the stored bytes.
	Spec WasmModuleSpec `json:"spec"`
}

// WasmModuleSpec describes a stored module.
type WasmModuleSpec struct {
	// Digest is "sha256:<hex>" of the bytes.
	Digest string `json:"digest"`
	// Size is the module's length in bytes.
	Size int64 `json:"size"`
	// Chunks is how many chunks hold the bytes.
	Chunks int32 `json:"chunks"`
}

// WasmModuleList is a list of WasmModules.
type WasmModuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the modules.
	Items []WasmModule `json:"items"`
}
