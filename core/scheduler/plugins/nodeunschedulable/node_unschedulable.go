// Package nodeunschedulable is the NodeUnschedulable plugin: cordoned nodes
// (spec.unschedulable) take only pods tolerating node.kubernetes.io/unschedulable.
package nodeunschedulable

import (
	"context"
	"encoding/json"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// ErrReasonUnschedulable is Kubernetes' reason.
const ErrReasonUnschedulable = "node(s) were unschedulable"

// NodeUnschedulable is the plugin.
type NodeUnschedulable struct{}

// New is the plugin factory.
func New(context.Context, json.RawMessage, framework.Handle) (framework.Plugin, error) {
	return &NodeUnschedulable{}, nil
}

// Name implements Plugin.
func (*NodeUnschedulable) Name() string { return names.NodeUnschedulable }

// Filter implements FilterPlugin.
func (*NodeUnschedulable) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if !ni.Node().Spec.Unschedulable {
		return nil
	}
	taint := &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
	if corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, taint, false) {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnschedulable)
}
