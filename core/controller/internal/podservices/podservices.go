// Package podservices finds the Services that select a pod, for the controllers that
// resync a Service when one of its pods changes (endpoints, endpoint slices).
package podservices

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Keys are the namespace/name keys of the Services whose selector matches any of pods.
func Keys(lister corelisters.ServiceLister, pods ...*corev1.Pod) sets.Set[string] {
	out := sets.New[string]()
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		svcs, err := lister.Services(pod.Namespace).List(labels.Everything())
		if err != nil {
			continue
		}
		for _, s := range svcs {
			// A nil selector selects nothing (its endpoints are written by someone else).
			if s.Spec.Selector == nil {
				continue
			}
			if labels.SelectorFromValidatedSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
				out.Insert(s.Namespace + "/" + s.Name)
			}
		}
	}
	return out
}

// Handler enqueues the Services of the pods of each pod event: those selecting the pod
// before and after an update, and none for an update that changes nothing endpoints show.
func Handler(lister corelisters.ServiceLister, enqueue func(key string)) cache.ResourceEventHandlerFuncs {
	emit := func(pods ...*corev1.Pod) {
		for k := range Keys(lister, pods...) {
			enqueue(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				emit(p)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Pod)
			n, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 || o.ResourceVersion == n.ResourceVersion || !relevantChange(o, n) {
				return
			}
			emit(o, n)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				emit(p)
			}
		},
	}
}

// relevantChange tells whether an update changes what endpoints are made of: labels,
// addresses, readiness, phase, node, hostname, ports or deletion.
func relevantChange(o, n *corev1.Pod) bool {
	return !equality.Semantic.DeepEqual(o.Labels, n.Labels) || o.Status.PodIP != n.Status.PodIP ||
		!equality.Semantic.DeepEqual(o.Status.PodIPs, n.Status.PodIPs) || o.Status.Phase != n.Status.Phase ||
		!equality.Semantic.DeepEqual(o.Status.Conditions, n.Status.Conditions) || o.Spec.NodeName != n.Spec.NodeName ||
		o.Spec.Hostname != n.Spec.Hostname || o.Spec.Subdomain != n.Spec.Subdomain ||
		(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) || !equality.Semantic.DeepEqual(o.Spec.Containers, n.Spec.Containers)
}

// Watch enqueues the key of every Service added, updated or deleted, and of the Services
// of each pod event (see Handler): what a controller that writes something per Service
// from its pods listens to.
func Watch(svcs coreinformers.ServiceInformer, pods coreinformers.PodInformer, enqueue func(key string)) error {
	add := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			enqueue(key)
		}
	}
	if _, err := svcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }, DeleteFunc: add,
	}); err != nil {
		return fmt.Errorf("adding service handler: %w", err)
	}
	if _, err := pods.Informer().AddEventHandler(Handler(svcs.Lister(), enqueue)); err != nil {
		return fmt.Errorf("adding pod handler: %w", err)
	}
	return nil
}
