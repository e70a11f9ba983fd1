// Package abi holds the wasmplane plugin ABI v1 wire types (see sdk/ABI.md) shared by the
// guest SDK and the host. It imports only the standard library so that it compiles for
// GOOS=wasip1 without pulling Kubernetes packages into plugin modules.
package abi

import "encoding/json"

// Version is the ABI version described in sdk/ABI.md.
const Version = 1

// Export names every ABI v1 module uses.
const (
	ExportVersion    = "wasmplane_abi_version"
	ExportAlloc      = "wasmplane_alloc"
	ExportFree       = "wasmplane_free"
	ExportMemory     = "memory"
	ExportInitialize = "_initialize"
	ExportStart      = "_start"
	HostModule       = "wasmplane"
	HostLog          = "log"
)

// RegoInputSection names the custom section in which `wasmplane plugin build --lang rego`
// records what a Rego policy (an OPA module, which speaks OPA's ABI rather than this one)
// reads of its input: the JSON {"paths": [ [key, …], … ]} of the subtrees below input it may
// reach; with "whole": "<why>" (or "paths": null), the whole input (sdk/ABI.md §8,
// docs/plugins/rego.md).
const RegoInputSection = "wasmplane.rego.input"

// Hook names: a module implements a hook by exporting a function of this name.
const (
	HookConfigure    = "configure"
	HookAuthenticate = "authenticate"
	HookMutate       = "mutate"
	HookValidate     = "validate"
	HookInitialize   = "initialize"
	HookFilter       = "filter"
	HookScore        = "score"
)

// Hooks lists every hook name of ABI v1.
var Hooks = []string{HookConfigure, HookAuthenticate, HookMutate, HookValidate, HookInitialize, HookFilter, HookScore}

// Log levels of the wasmplane.log host function.
const (
	LevelDebug = 0
	LevelInfo  = 1
	LevelWarn  = 2
	LevelError = 3
)

// GroupVersionKind names a kind.
type GroupVersionKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// GroupVersionResource names a resource.
type GroupVersionResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

// UserInfo describes an authenticated user, as authentication.k8s.io/v1 UserInfo.
type UserInfo struct {
	Username string              `json:"username"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// PluginRef names the plugin object a module runs for.
type PluginRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// ConfigureRequest is the input of the configure hook.
type ConfigureRequest struct {
	Plugin PluginRef       `json:"plugin"`
	Config json.RawMessage `json:"config"`
}

// ConfigureResponse is the output of the configure hook.
type ConfigureResponse struct {
	Error     string `json:"error,omitempty"`
	FullNodes bool   `json:"fullNodes,omitempty"`
	// FullPods asks for the whole Pod in filter/score requests instead of the compact
	// pod document of ABI §7.5.
	FullPods bool `json:"fullPods,omitempty"`
	// CompactPods asks for the compact pod document of ABI §7.5 as the object and
	// oldObject of validate requests about Pods, instead of the whole Pod.
	CompactPods bool `json:"compactPods,omitempty"`
	// ObjectMetadata asks for the object metadata document of ABI §7.3 as the object and
	// oldObject of validate requests about every kind, instead of the whole objects; it
	// wins over CompactPods.
	ObjectMetadata bool `json:"objectMetadata,omitempty"`
	NodeTable      bool `json:"nodeTable,omitempty"`
	Requested      bool `json:"requested,omitempty"`
	// Packed asks for the packed filter/score framing of ABI §7.7 (with NodeTable only).
	Packed bool `json:"packed,omitempty"`
	// Reads lists the members of validate requests the plugin reads, as dot-separated
	// paths from the request's root ("operation", "object.metadata.labels"): the host may
	// then leave the others out (ABI §7.1). Empty means the whole request.
	Reads []string `json:"reads,omitempty"`
}

// PackedMagic starts every packed filter/score request and answer (ABI §7.7). Its first
// byte is NUL, so it never begins a JSON text: a reader tells the two forms apart by it.
const PackedMagic = "\x00wp1"

// PackedHeader is the size of the packed header: PackedMagic, then the node count as a
// little-endian uint32.
const PackedHeader = 8

// ClientCertificate describes a verified client certificate.
type ClientCertificate struct {
	Subject       string   `json:"subject"`
	CommonName    string   `json:"commonName,omitempty"`
	Organizations []string `json:"organizations,omitempty"`
}

// AuthenticateRequest is the input of the authenticate hook.
type AuthenticateRequest struct {
	Method            string              `json:"method"`
	Path              string              `json:"path"`
	Headers           map[string][]string `json:"headers"`
	ClientCertificate *ClientCertificate  `json:"clientCertificate,omitempty"`
	Audiences         []string            `json:"audiences,omitempty"`
	RemoteAddr        string              `json:"remoteAddr,omitempty"`
}

// AuthenticateResponse is the output of the authenticate hook.
type AuthenticateResponse struct {
	Error         string    `json:"error,omitempty"`
	Authenticated bool      `json:"authenticated"`
	User          *UserInfo `json:"user,omitempty"`
	Audiences     []string  `json:"audiences,omitempty"`
	Message       string    `json:"message,omitempty"`
}

// AdmissionRequest is the input of the mutate and validate hooks.
type AdmissionRequest struct {
	UID         string               `json:"uid"`
	Kind        GroupVersionKind     `json:"kind"`
	Resource    GroupVersionResource `json:"resource"`
	SubResource string               `json:"subResource,omitempty"`
	Name        string               `json:"name,omitempty"`
	Namespace   string               `json:"namespace,omitempty"`
	Operation   string               `json:"operation"`
	UserInfo    UserInfo             `json:"userInfo"`
	Object      json.RawMessage      `json:"object,omitempty"`
	OldObject   json.RawMessage      `json:"oldObject,omitempty"`
	DryRun      bool                 `json:"dryRun,omitempty"`
	Options     json.RawMessage      `json:"options,omitempty"`
}

// PatchOperation is one RFC 6902 JSON Patch operation.
type PatchOperation struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// MutateResponse is the output of the mutate hook.
type MutateResponse struct {
	Error    string           `json:"error,omitempty"`
	Allowed  bool             `json:"allowed"`
	Patch    []PatchOperation `json:"patch,omitempty"`
	Code     int32            `json:"code,omitempty"`
	Reason   string           `json:"reason,omitempty"`
	Message  string           `json:"message,omitempty"`
	Warnings []string         `json:"warnings,omitempty"`
	// AuditAnnotations are recorded, keyed "<plugin>/<key>", in the request's trace and
	// log, as Kubernetes records a webhook's in its audit event.
	AuditAnnotations map[string]string `json:"auditAnnotations,omitempty"`
}

// ValidateResponse is the output of the validate hook.
type ValidateResponse struct {
	Error    string   `json:"error,omitempty"`
	Allowed  bool     `json:"allowed"`
	Code     int32    `json:"code,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Message  string   `json:"message,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// AuditAnnotations are recorded as MutateResponse's are.
	AuditAnnotations map[string]string `json:"auditAnnotations,omitempty"`
}

// InitializeRequest is the input of the initialize hook.
type InitializeRequest struct {
	Kind      GroupVersionKind     `json:"kind"`
	Resource  GroupVersionResource `json:"resource"`
	Name      string               `json:"name,omitempty"`
	Namespace string               `json:"namespace,omitempty"`
	Object    json.RawMessage      `json:"object"`
}

// InitializeResponse is the output of the initialize hook.
type InitializeResponse struct {
	Error    string           `json:"error,omitempty"`
	Object   json.RawMessage  `json:"object,omitempty"`
	Patch    []PatchOperation `json:"patch,omitempty"`
	Rejected bool             `json:"rejected,omitempty"`
	Code     int32            `json:"code,omitempty"`
	Reason   string           `json:"reason,omitempty"`
	Message  string           `json:"message,omitempty"`
}

// FilterResponse is the output of the filter hook: one entry per node, in request order.
type FilterResponse struct {
	Error   string   `json:"error,omitempty"`
	Pass    []bool   `json:"pass"`
	Reasons []string `json:"reasons,omitempty"`
}

// ScoreResponse is the output of the score hook: one score per node, in request order.
type ScoreResponse struct {
	Error  string  `json:"error,omitempty"`
	Scores []int64 `json:"scores"`
}

// Resources maps a resource name to an integer amount: cpu in millicores, memory and
// other resources in base units, pods as a count.
type Resources map[string]int64

// SchedulingRequest is the input of the filter and score hooks as a guest sees it once
// the node table (if any) has been resolved.
type SchedulingRequest struct {
	Pod       *Pod        `json:"pod"`
	Nodes     []*Node     `json:"nodes"`
	Requested []Resources `json:"requested,omitempty"`
}

// NodeDefinition is one entry of a node-table request's define list.
type NodeDefinition struct {
	Key  uint64          `json:"key"`
	Node json.RawMessage `json:"node"`
}

// ObjectMeta is the subset of Kubernetes ObjectMeta that plugins commonly read.
type ObjectMeta struct {
	Name            string            `json:"name,omitempty"`
	Namespace       string            `json:"namespace,omitempty"`
	UID             string            `json:"uid,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
}

// Taint is a node taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// NodeCondition is the compact form of a node condition.
type NodeCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// NodeSpec is the compact node spec.
type NodeSpec struct {
	Unschedulable bool    `json:"unschedulable,omitempty"`
	Taints        []Taint `json:"taints,omitempty"`
}

// NodeStatus is the compact node status; quantities keep their Kubernetes string form.
type NodeStatus struct {
	Capacity    map[string]string `json:"capacity,omitempty"`
	Allocatable map[string]string `json:"allocatable,omitempty"`
	Conditions  []NodeCondition   `json:"conditions,omitempty"`
}

// Node is the compact node document of ABI §7.5 (also the shape of a full Node's fields).
type Node struct {
	Metadata ObjectMeta `json:"metadata"`
	Spec     NodeSpec   `json:"spec"`
	Status   NodeStatus `json:"status"`
}

// ResourceRequirements holds container requests and limits.
type ResourceRequirements struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// Container is the subset of a container spec that plugins commonly read.
type Container struct {
	Name      string               `json:"name"`
	Image     string               `json:"image,omitempty"`
	Resources ResourceRequirements `json:"resources,omitempty"`
}

// Toleration is a pod toleration.
type Toleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// PodSpec is the subset of a pod spec that scheduling plugins commonly read.
type PodSpec struct {
	NodeName          string            `json:"nodeName,omitempty"`
	NodeSelector      map[string]string `json:"nodeSelector,omitempty"`
	SchedulerName     string            `json:"schedulerName,omitempty"`
	PriorityClassName string            `json:"priorityClassName,omitempty"`
	Priority          *int32            `json:"priority,omitempty"`
	Containers        []Container       `json:"containers"`
	InitContainers    []Container       `json:"initContainers,omitempty"`
	Tolerations       []Toleration      `json:"tolerations,omitempty"`
	Affinity          json.RawMessage   `json:"affinity,omitempty"`
}

// Pod is the subset of a Pod that scheduling plugins commonly read.
type Pod struct {
	APIVersion string     `json:"apiVersion,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       PodSpec    `json:"spec"`
}
