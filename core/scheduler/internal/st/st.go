// Package st has small builders of pods and nodes for the scheduler's unit tests.
package st

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
)

// Res builds a ResourceList from name/quantity pairs.
func Res(kv ...string) v1.ResourceList {
	rl := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		rl[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return rl
}

// Node builds a node with the given allocatable (pods default 110).
func Node(name string, alloc v1.ResourceList) *v1.Node {
	if _, ok := alloc[v1.ResourcePods]; !ok {
		alloc = alloc.DeepCopy()
		alloc[v1.ResourcePods] = resource.MustParse("110")
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status:     v1.NodeStatus{Capacity: alloc, Allocatable: alloc},
	}
}

// Pod builds a pod with one container per requests list.
func Pod(name string, reqs ...v1.ResourceList) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	for i, r := range reqs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + string(rune('0'+i)), Resources: v1.ResourceRequirements{Requests: r}})
	}
	if len(reqs) == 0 {
		p.Spec.Containers = []v1.Container{{Name: "c"}}
	}
	return p
}

// NodeInfo builds a node info holding pods (their nodeName is set to the node).
func NodeInfo(node *v1.Node, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	for _, p := range pods {
		p = p.DeepCopy()
		p.Spec.NodeName = node.Name
		ni.AddPod(p)
	}
	return ni
}
