package scheduler

import (
	"fmt"

	"github.com/wasmplane/wasmplane/core/scheduler/queue"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	toolscache "k8s.io/client-go/tools/cache"
)

func podOf(obj any) *v1.Pod {
	switch t := obj.(type) {
	case *v1.Pod:
		return t
	case toolscache.DeletedFinalStateUnknown:
		p, _ := t.Obj.(*v1.Pod)
		return p
	}
	return nil
}

func nodeOf(obj any) *v1.Node {
	switch t := obj.(type) {
	case *v1.Node:
		return t
	case toolscache.DeletedFinalStateUnknown:
		n, _ := t.Obj.(*v1.Node)
		return n
	}
	return nil
}

func terminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

// addEventHandlers wires the informers: bound, non-terminal pods feed the cache; pending
// pods of our profiles feed the queue; node and pod events re-queue unschedulable pods.
func (s *Scheduler) addEventHandlers() error {
	pods := s.factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(toolscache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			p := podOf(obj)
			return p != nil && p.Spec.NodeName != "" && !terminal(p)
		},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if err := s.cache.AddPod(podOf(obj)); err != nil {
					s.log.Error("scheduler cache AddPod", "err", err)
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, n := podOf(oldObj), podOf(newObj)
				if err := s.cache.UpdatePod(o, n); err != nil {
					s.log.Error("scheduler cache UpdatePod", "err", err)
				}
				if !equality.Semantic.DeepEqual(o.Labels, n.Labels) {
					s.queue.MoveAllToActiveOrBackoffQueue(queue.EventAssignedPodUpdate)
				}
			},
			DeleteFunc: func(obj any) {
				p := podOf(obj)
				if p == nil {
					return
				}
				if err := s.cache.RemovePod(p); err != nil {
					s.log.Error("scheduler cache RemovePod", "err", err)
				}
				s.queue.MoveAllToActiveOrBackoffQueue(queue.EventAssignedPodDelete)
			},
		},
	}); err != nil {
		return fmt.Errorf("pod informer (assigned): %w", err)
	}
	if _, err := pods.AddEventHandler(toolscache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			p := podOf(obj)
			return p != nil && p.Spec.NodeName == "" && !terminal(p) && s.responsibleFor(p)
		},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.queue.Add(podOf(obj)) },
			UpdateFunc: func(oldObj, newObj any) { s.queue.Update(podOf(oldObj), podOf(newObj)) },
			DeleteFunc: func(obj any) {
				p := podOf(obj)
				if p == nil {
					return
				}
				s.queue.Delete(p)
				// A pod held in Permit that is deleted must not be bound.
				if fw := s.profiles[p.Spec.SchedulerName]; fw != nil {
					if wp := fw.GetWaitingPod(p.UID); wp != nil {
						wp.Reject("", "removed")
					}
				}
			},
		},
	}); err != nil {
		return fmt.Errorf("pod informer (pending): %w", err)
	}
	nodes := s.factory.Core().V1().Nodes().Informer()
	if _, err := nodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			s.cache.AddNode(nodeOf(obj))
			s.queue.MoveAllToActiveOrBackoffQueue(queue.EventNodeAdd)
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := nodeOf(oldObj), nodeOf(newObj)
			s.cache.UpdateNode(o, n)
			if nodeSchedulingPropertiesChanged(o, n) {
				s.queue.MoveAllToActiveOrBackoffQueue(queue.EventNodeUpdate)
			}
		},
		DeleteFunc: func(obj any) {
			if n := nodeOf(obj); n != nil {
				s.cache.RemoveNode(n)
			}
		},
	}); err != nil {
		return fmt.Errorf("node informer: %w", err)
	}
	return nil
}

// nodeSchedulingPropertiesChanged ignores heartbeats: only what a plugin looks at counts.
func nodeSchedulingPropertiesChanged(o, n *v1.Node) bool {
	return o.Spec.Unschedulable != n.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
		!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(o.Status.Images, n.Status.Images)
}
