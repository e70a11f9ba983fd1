// Package plugins assembles the in-tree plugin registry.
package plugins

import (
	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/defaultbinder"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/defaultpreemption"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/imagelocality"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/nodeaffinity"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/nodename"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/nodeports"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/noderesources"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/nodeunschedulable"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/queuesort"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/tainttoleration"
)

// NewInTreeRegistry returns the factories of every built-in plugin.
func NewInTreeRegistry() framework.Registry {
	return framework.Registry{
		names.PrioritySort:                    queuesort.New,
		names.NodeName:                        nodename.New,
		names.NodeUnschedulable:               nodeunschedulable.New,
		names.TaintToleration:                 tainttoleration.New,
		names.NodeAffinity:                    nodeaffinity.New,
		names.NodePorts:                       nodeports.New,
		names.NodeResourcesFit:                noderesources.NewFit,
		names.NodeResourcesBalancedAllocation: noderesources.NewBalancedAllocation,
		names.ImageLocality:                   imagelocality.New,
		names.DefaultPreemption:               defaultpreemption.New,
		names.DefaultBinder:                   defaultbinder.New,
	}
}
