package framework

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Diagnosis explains why no node fit.
type Diagnosis struct {
	// NodeToStatus is the rejecting status per evaluated node.
	NodeToStatus NodeToStatus
	// UnschedulablePlugins are the plugins that rejected the pod.
	UnschedulablePlugins sets.Set[string]
	// PreFilterMsg is set when PreFilter rejected the pod for all nodes.
	PreFilterMsg string
	// PostFilterMsg is what PostFilter (preemption) said.
	PostFilterMsg string
}

// FitError is the error of a pod that fits no node; its message has Kubernetes' shape.
type FitError struct {
	// Pod is the pod.
	Pod *v1.Pod
	// NumAllNodes is the number of nodes in the snapshot.
	NumAllNodes int
	// Diagnosis holds the reasons.
	Diagnosis Diagnosis
}

// Error renders "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated
// taint {k: v}. preemption: …" — reasons counted per node and sorted, as Kubernetes.
func (f *FitError) Error() string {
	msg := fmt.Sprintf("0/%v nodes are available:", f.NumAllNodes)
	if f.Diagnosis.PreFilterMsg != "" {
		msg += " " + f.Diagnosis.PreFilterMsg + "."
	} else {
		counts := map[string]int{}
		for _, s := range f.Diagnosis.NodeToStatus {
			for _, r := range s.Reasons() {
				counts[r]++
			}
		}
		parts := make([]string, 0, len(counts))
		for r, c := range counts {
			parts = append(parts, fmt.Sprintf("%v %v", c, r))
		}
		sort.Strings(parts)
		if len(parts) > 0 {
			msg += " " + strings.Join(parts, ", ") + "."
		}
	}
	if f.Diagnosis.PostFilterMsg != "" {
		msg += " " + f.Diagnosis.PostFilterMsg
	}
	return msg
}
