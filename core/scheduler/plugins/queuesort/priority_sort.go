// Package queuesort is the PrioritySort plugin: higher priority first, then older first.
package queuesort

import (
	"context"
	"encoding/json"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
)

// PrioritySort orders the active queue by priority, then by queue timestamp.
type PrioritySort struct{}

// New is the plugin factory.
func New(context.Context, json.RawMessage, framework.Handle) (framework.Plugin, error) {
	return &PrioritySort{}, nil
}

// Name implements Plugin.
func (*PrioritySort) Name() string { return names.PrioritySort }

// Less implements QueueSortPlugin.
func (*PrioritySort) Less(a, b *framework.QueuedPodInfo) bool {
	pa, pb := framework.PodPriority(a.Pod), framework.PodPriority(b.Pod)
	return pa > pb || (pa == pb && a.Timestamp.Before(b.Timestamp))
}
