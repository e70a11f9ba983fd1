package framework

import (
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
)

// MaxNodeScore and MinNodeScore bound every normalized plugin score.
const (
	// MaxNodeScore is the highest score a Score plugin may give after normalization.
	MaxNodeScore int64 = 100
	// MinNodeScore is the lowest score a Score plugin may give after normalization.
	MinNodeScore int64 = 0
	// DefaultMilliCPURequest is the CPU assumed for containers without a request when
	// scoring, so that best-effort pods are not all piled onto one node (as Kubernetes).
	DefaultMilliCPURequest int64 = 100
	// DefaultMemoryRequest is the memory assumed for containers without a request when scoring.
	DefaultMemoryRequest int64 = 200 * 1024 * 1024
)

// Resource is a compact sum of resource quantities (CPU in millicores).
type Resource struct {
	// MilliCPU is CPU in millicores.
	MilliCPU int64
	// Memory is in bytes.
	Memory int64
	// EphemeralStorage is in bytes.
	EphemeralStorage int64
	// AllowedPodNumber is the node's pod capacity (allocatable "pods").
	AllowedPodNumber int
	// ScalarResources are extended and hugepage resources.
	ScalarResources map[v1.ResourceName]int64
}

// NewResource converts a ResourceList.
func NewResource(rl v1.ResourceList) *Resource {
	r := &Resource{}
	r.Add(rl)
	return r
}

// Add adds every quantity of rl.
func (r *Resource) Add(rl v1.ResourceList) {
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case v1.ResourceMemory:
			r.Memory += q.Value()
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case v1.ResourcePods:
			r.AllowedPodNumber += int(q.Value())
		default:
			if r.ScalarResources == nil {
				r.ScalarResources = map[v1.ResourceName]int64{}
			}
			r.ScalarResources[name] += q.Value()
		}
	}
}

func (r *Resource) addResource(o *Resource, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	r.EphemeralStorage += sign * o.EphemeralStorage
	for k, v := range o.ScalarResources {
		if r.ScalarResources == nil {
			r.ScalarResources = map[v1.ResourceName]int64{}
		}
		r.ScalarResources[k] += sign * v
	}
}

// Clone deep-copies the resource.
func (r *Resource) Clone() *Resource {
	c := *r
	if r.ScalarResources != nil {
		c.ScalarResources = make(map[v1.ResourceName]int64, len(r.ScalarResources))
		for k, v := range r.ScalarResources {
			c.ScalarResources[k] = v
		}
	}
	return &c
}

// PodInfo is a pod with the figures the scheduler computes once per pod object.
type PodInfo struct {
	// Pod is the API object (never mutated by the scheduler).
	Pod *v1.Pod
	// Requests are the effective requests: max(sum(containers), max(init)) + overhead.
	Requests *Resource
	// NonZeroRequests are Requests with defaults for containers that request no CPU or
	// memory; used for scoring only.
	NonZeroRequests *Resource
}

// NewPodInfo computes a pod's requests (init containers, sidecars and overhead included,
// through k8s.io/component-helpers as Kubernetes does).
func NewPodInfo(pod *v1.Pod) *PodInfo {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	nonZero := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		NonMissingContainerRequests: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(DefaultMilliCPURequest, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(DefaultMemoryRequest, resource.DecimalSI),
		},
	})
	nz := &Resource{}
	if q, ok := nonZero[v1.ResourceCPU]; ok {
		nz.MilliCPU = q.MilliValue()
	}
	if q, ok := nonZero[v1.ResourceMemory]; ok {
		nz.Memory = q.Value()
	}
	return &PodInfo{Pod: pod, Requests: NewResource(reqs), NonZeroRequests: nz}
}

// QueuedPodInfo is a pod in the scheduling queue with its queueing history.
type QueuedPodInfo struct {
	*PodInfo
	// Timestamp is when the pod was (re-)added to the queue; orders pods of equal priority.
	Timestamp time.Time
	// Attempts counts scheduling attempts; drives the exponential backoff.
	Attempts int
	// InitialAttemptTimestamp is the first time the pod was popped (nil before).
	InitialAttemptTimestamp *time.Time
	// UnschedulablePlugins are the plugins that rejected the pod in its last attempt.
	UnschedulablePlugins sets.Set[string]
	// BackoffExpiration is when the pod's current backoff ends (set by the queue).
	BackoffExpiration time.Time
	// ErrorBackoff is set when the pod backs off because of an error (not a rejection);
	// such pods always wait out their backoff.
	ErrorBackoff bool
}

// UID is the pod's uid (the queue key).
func (q *QueuedPodInfo) UID() types.UID { return q.Pod.UID }

// ProtocolPort is a host port with its protocol.
type ProtocolPort struct {
	// Protocol is TCP, UDP or SCTP.
	Protocol string
	// Port is the host port.
	Port int32
}

// HostPortInfo maps a host IP to the protocol/ports in use on it.
type HostPortInfo map[string]sets.Set[ProtocolPort]

const defaultHostIP = "0.0.0.0"

func sanitize(ip, protocol string) (string, string) {
	if ip == "" {
		ip = defaultHostIP
	}
	if protocol == "" {
		protocol = string(v1.ProtocolTCP)
	}
	return ip, protocol
}

// Add records a used host port.
func (h HostPortInfo) Add(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = sanitize(ip, protocol)
	if h[ip] == nil {
		h[ip] = sets.New[ProtocolPort]()
	}
	h[ip].Insert(ProtocolPort{Protocol: protocol, Port: port})
}

// Remove forgets a used host port.
func (h HostPortInfo) Remove(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = sanitize(ip, protocol)
	if s := h[ip]; s != nil {
		s.Delete(ProtocolPort{Protocol: protocol, Port: port})
		if s.Len() == 0 {
			delete(h, ip)
		}
	}
}

// CheckConflict reports whether ip/protocol/port clashes with a used port; 0.0.0.0
// clashes with every IP, as in Kubernetes.
func (h HostPortInfo) CheckConflict(ip, protocol string, port int32) bool {
	if port <= 0 {
		return false
	}
	ip, protocol = sanitize(ip, protocol)
	pp := ProtocolPort{Protocol: protocol, Port: port}
	if ip == defaultHostIP {
		for _, s := range h {
			if s.Has(pp) {
				return true
			}
		}
		return false
	}
	for _, key := range []string{ip, defaultHostIP} {
		if s := h[key]; s != nil && s.Has(pp) {
			return true
		}
	}
	return false
}

// NodeInfo is a node with the pods on it and their aggregated requests.
type NodeInfo struct {
	node *v1.Node
	// Pods are the pods assigned (or assumed) to the node.
	Pods []*PodInfo
	// UsedPorts are host ports in use on the node.
	UsedPorts HostPortInfo
	// Requested sums the pods' requests.
	Requested *Resource
	// NonZeroRequested sums the pods' non-zero requests (scoring).
	NonZeroRequested *Resource
	// Allocatable is the node's allocatable resources.
	Allocatable *Resource
	// ImageSizes maps normalized image names present on the node to their size in bytes.
	ImageSizes map[string]int64
	// Generation increases on every change (the cache uses it for incremental snapshots).
	Generation int64
	// derived is what a plugin computed from the node object alone (see Derived).
	derived atomic.Pointer[derived]
}

// derived is a value computed from one node object, kept by owner.
type derived struct {
	node  *v1.Node
	owner any
	v     any
}

// Derived returns the value owner stored (StoreDerived) for this NodeInfo's current node
// object, or nil. It lets a plugin keep what it computes from the node alone (a WASM
// plugin's serialized node document) with the snapshot's NodeInfo, carried across
// clones, instead of looking it up per node and pod; a new node object makes it nil.
// One value is kept: another owner's StoreDerived replaces it (the scheduler's WASM
// plugins share one owner, their node-document cache).
func (n *NodeInfo) Derived(owner any) any {
	if d := n.derived.Load(); d != nil && d.node == n.node && d.owner == owner {
		return d.v
	}
	return nil
}

// StoreDerived keeps v for owner and this NodeInfo's current node object (see Derived).
func (n *NodeInfo) StoreDerived(owner, v any) {
	n.derived.Store(&derived{node: n.node, owner: owner, v: v})
}

// NewNodeInfo builds a node info holding pods (the node is set with SetNode).
func NewNodeInfo(pods ...*v1.Pod) *NodeInfo {
	ni := &NodeInfo{UsedPorts: HostPortInfo{}, Requested: &Resource{}, NonZeroRequested: &Resource{}, Allocatable: &Resource{}}
	for _, p := range pods {
		ni.AddPodInfo(NewPodInfo(p))
	}
	return ni
}

// Node returns the node object (nil for a node known only through its pods).
func (n *NodeInfo) Node() *v1.Node {
	if n == nil {
		return nil
	}
	return n.node
}

// SetNode sets the node object and recomputes allocatable and images.
func (n *NodeInfo) SetNode(node *v1.Node) {
	n.node = node
	n.Allocatable = NewResource(node.Status.Allocatable)
	n.ImageSizes = nil
	for _, img := range node.Status.Images {
		if n.ImageSizes == nil {
			n.ImageSizes = map[string]int64{}
		}
		for _, name := range img.Names {
			n.ImageSizes[name] = img.SizeBytes
		}
	}
}

// RemoveNode clears the node object (pods may still reference the node).
func (n *NodeInfo) RemoveNode() { n.node = nil }

// AddPodInfo accounts a pod on the node.
func (n *NodeInfo) AddPodInfo(pi *PodInfo) {
	n.Pods = append(n.Pods, pi)
	n.Requested.addResource(pi.Requests, 1)
	n.NonZeroRequested.addResource(pi.NonZeroRequests, 1)
	forEachHostPort(pi.Pod, n.UsedPorts.Add)
}

// AddPod accounts a pod on the node.
func (n *NodeInfo) AddPod(pod *v1.Pod) { n.AddPodInfo(NewPodInfo(pod)) }

// RemovePod removes a pod (matched by uid) from the node.
func (n *NodeInfo) RemovePod(pod *v1.Pod) error {
	for i, pi := range n.Pods {
		if pi.Pod.UID != pod.UID {
			continue
		}
		n.Pods[i] = n.Pods[len(n.Pods)-1]
		n.Pods[len(n.Pods)-1] = nil
		n.Pods = n.Pods[:len(n.Pods)-1]
		n.Requested.addResource(pi.Requests, -1)
		n.NonZeroRequested.addResource(pi.NonZeroRequests, -1)
		forEachHostPort(pi.Pod, n.UsedPorts.Remove)
		return nil
	}
	name := ""
	if n.node != nil {
		name = n.node.Name
	}
	return fmt.Errorf("no pod %s/%s on node %q", pod.Namespace, pod.Name, name)
}

// Clone copies the node info; the pod and node objects are shared (they are immutable).
func (n *NodeInfo) Clone() *NodeInfo {
	c := &NodeInfo{
		node:             n.node,
		Pods:             append([]*PodInfo(nil), n.Pods...),
		UsedPorts:        make(HostPortInfo, len(n.UsedPorts)),
		Requested:        n.Requested.Clone(),
		NonZeroRequested: n.NonZeroRequested.Clone(),
		Allocatable:      n.Allocatable.Clone(),
		ImageSizes:       n.ImageSizes,
		Generation:       n.Generation,
	}
	c.derived.Store(n.derived.Load())
	for ip, s := range n.UsedPorts {
		c.UsedPorts[ip] = s.Clone()
	}
	return c
}

func forEachHostPort(pod *v1.Pod, fn func(ip, protocol string, port int32)) {
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			fn(p.HostIP, string(p.Protocol), p.HostPort)
		}
	}
	for i := range pod.Spec.InitContainers {
		// Only restartable (sidecar) init containers keep their ports while the pod runs.
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			continue
		}
		for _, p := range c.Ports {
			fn(p.HostIP, string(p.Protocol), p.HostPort)
		}
	}
}

// PodHostPorts lists the host ports a pod asks for (containers and sidecars).
func PodHostPorts(pod *v1.Pod) []v1.ContainerPort {
	var out []v1.ContainerPort
	forEachHostPort(pod, func(ip, protocol string, port int32) {
		if port > 0 {
			out = append(out, v1.ContainerPort{HostIP: ip, Protocol: v1.Protocol(protocol), HostPort: port})
		}
	})
	return out
}
