package framework

import (
	"context"
	"encoding/json"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// Plugin is the parent of every extension-point interface.
type Plugin interface {
	// Name is the plugin's unique name within a profile.
	Name() string
}

// QueueSortPlugin orders the active queue.
type QueueSortPlugin interface {
	Plugin
	// Less reports whether a should be scheduled before b.
	Less(a, b *QueuedPodInfo) bool
}

// PreFilterResult narrows the nodes a pod is evaluated on (nil NodeNames = all nodes).
type PreFilterResult struct {
	// NodeNames are the only nodes worth evaluating.
	NodeNames sets.Set[string]
}

// PreFilterPlugin runs once per cycle before Filter (precomputes, or rejects early).
type PreFilterPlugin interface {
	Plugin
	// PreFilter may return Skip to skip this plugin's Filter for the pod.
	PreFilter(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) (*PreFilterResult, *Status)
}

// FilterPlugin decides whether a pod may run on one node. Called in parallel over nodes.
type FilterPlugin interface {
	Plugin
	// Filter returns Success, Unschedulable, UnschedulableAndUnresolvable or Error.
	Filter(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) *Status
}

// BatchFilterPlugin is a FilterPlugin whose call costs far more than judging one more
// node (a WASM guest call): the scheduler's walk hands it, in one call per block, the
// nodes of the block that every earlier Filter passed. Filter is still called for single
// nodes (a nominated node, preemption's dry runs).
type BatchFilterPlugin interface {
	FilterPlugin
	// FilterBatch sets out[i] to the status of nodes[i] (nil = the pod fits there);
	// len(out) == len(nodes).
	FilterBatch(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo, out []*Status)
}

// NodeToStatus maps node name to the status that rejected the pod there.
type NodeToStatus map[string]*Status

// PostFilterResult is what a PostFilter (preemption) achieved.
type PostFilterResult struct {
	// NominatedNodeName is the node the pod should land on once victims are gone.
	NominatedNodeName string
}

// PostFilterPlugin runs when no node fits (e.g. preemption).
type PostFilterPlugin interface {
	Plugin
	// PostFilter returns Success with a nominated node, or a reason it cannot help.
	PostFilter(ctx context.Context, state *CycleState, pod *v1.Pod, filtered NodeToStatus) (*PostFilterResult, *Status)
}

// PreScorePlugin runs once per cycle before Score over the feasible nodes.
type PreScorePlugin interface {
	Plugin
	// PreScore may return Skip to skip this plugin's Score for the pod.
	PreScore(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) *Status
}

// NodeScore is one node's score.
type NodeScore struct {
	// Name is the node name.
	Name string
	// Score is the (raw, then normalized, then weighted) score.
	Score int64
}

// NodeScoreList is a score per node, in the order of the feasible nodes.
type NodeScoreList []NodeScore

// ScoreExtensions normalizes a plugin's raw scores into [MinNodeScore, MaxNodeScore].
type ScoreExtensions interface {
	// NormalizeScore rewrites scores in place.
	NormalizeScore(ctx context.Context, state *CycleState, pod *v1.Pod, scores NodeScoreList) *Status
}

// ScorePlugin ranks feasible nodes. Called in parallel over nodes.
type ScorePlugin interface {
	Plugin
	// Score returns a raw score for the node.
	Score(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) (int64, *Status)
	// ScoreExtensions returns the normalizer, or nil when scores are already 0–100.
	ScoreExtensions() ScoreExtensions
}

// BatchScorePlugin is a ScorePlugin that scores every feasible node in one call, for
// plugins whose per-call cost dwarfs their per-node cost (a WASM guest call); the
// framework then does not call Score per node.
type BatchScorePlugin interface {
	ScorePlugin
	// ScoreBatch sets out[i] to the raw score of nodes[i]; len(out) == len(nodes).
	ScoreBatch(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo, out []int64) *Status
}

// ReservePlugin is told when a node is reserved for a pod, and when that is undone.
type ReservePlugin interface {
	Plugin
	// Reserve is called after the pod was assumed on nodeName.
	Reserve(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
	// Unreserve undoes Reserve (must be idempotent).
	Unreserve(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string)
}

// PermitPlugin may approve, reject or hold (Wait, with a timeout) a pod before binding.
type PermitPlugin interface {
	Plugin
	// Permit returns Success, a rejection, or Wait with the longest time to wait.
	Permit(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) (*Status, time.Duration)
}

// PreBindPlugin runs before binding (e.g. provisioning).
type PreBindPlugin interface {
	Plugin
	// PreBind fails the binding cycle on a non-success status.
	PreBind(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
}

// BindPlugin binds the pod; Skip passes to the next binder.
type BindPlugin interface {
	Plugin
	// Bind performs the binding.
	Bind(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
}

// PostBindPlugin is informed of a successful binding.
type PostBindPlugin interface {
	Plugin
	// PostBind is informational.
	PostBind(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string)
}

// WaitingPod is a pod held by Permit plugins.
type WaitingPod interface {
	// GetPod returns the pod.
	GetPod() *v1.Pod
	// GetPendingPlugins lists the plugins that have not allowed the pod yet.
	GetPendingPlugins() []string
	// Allow marks plugin as having allowed the pod; the pod proceeds when all have.
	Allow(plugin string)
	// Reject rejects the pod with msg.
	Reject(plugin, msg string)
}

// Handle is what plugins get from the framework.
type Handle interface {
	// ClientSet talks to the API server.
	ClientSet() kubernetes.Interface
	// SharedInformerFactory is the scheduler's informer factory (may be nil in unit tests).
	SharedInformerFactory() informers.SharedInformerFactory
	// EventRecorder records events for the profile.
	EventRecorder() events.EventRecorder
	// SnapshotSharedLister is the snapshot of the current scheduling cycle.
	SnapshotSharedLister() NodeInfoLister
	// GetWaitingPod returns a pod held in Permit, or nil.
	GetWaitingPod(uid types.UID) WaitingPod
	// Parallelizer runs work over nodes with the configured parallelism.
	Parallelizer() Parallelizer
	// ProfileName is the schedulerName of the profile.
	ProfileName() string
}

// PluginFactory builds a plugin from its args (JSON from the configuration's pluginConfig;
// nil when none) — the registration hook for in-tree and out-of-tree plugins.
type PluginFactory func(ctx context.Context, args json.RawMessage, h Handle) (Plugin, error)

// Registry maps plugin names to factories.
type Registry map[string]PluginFactory

// Merge adds other's factories, failing on a duplicate name.
func (r Registry) Merge(other Registry) error {
	for name, f := range other {
		if _, ok := r[name]; ok {
			return errDuplicate(name)
		}
		r[name] = f
	}
	return nil
}
