// Package names holds the names of the built-in plugins (as Kubernetes spells them).
package names

// Built-in plugin names.
const (
	// PrioritySort is the PrioritySort plugin.
	PrioritySort = "PrioritySort"
	// NodeName is the NodeName plugin.
	NodeName = "NodeName"
	// NodeUnschedulable is the NodeUnschedulable plugin.
	NodeUnschedulable = "NodeUnschedulable"
	// TaintToleration is the TaintToleration plugin.
	TaintToleration = "TaintToleration"
	// NodeAffinity is the NodeAffinity plugin.
	NodeAffinity = "NodeAffinity"
	// NodePorts is the NodePorts plugin.
	NodePorts = "NodePorts"
	// NodeResourcesFit is the NodeResourcesFit plugin.
	NodeResourcesFit = "NodeResourcesFit"
	// NodeResourcesBalancedAllocation is the NodeResourcesBalancedAllocation plugin.
	NodeResourcesBalancedAllocation = "NodeResourcesBalancedAllocation"
	// ImageLocality is the ImageLocality plugin.
	ImageLocality = "ImageLocality"
	// DefaultPreemption is the DefaultPreemption plugin.
	DefaultPreemption = "DefaultPreemption"
	// DefaultBinder is the DefaultBinder plugin.
	DefaultBinder = "DefaultBinder"
)
