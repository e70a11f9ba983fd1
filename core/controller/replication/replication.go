// Package replication is the ReplicationController controller. As kube-controller-manager's
// replication manager, it is the ReplicaSet controller run over an adapter that shows
// ReplicationControllers as ReplicaSets (same name, namespace, uid and generation; the
// selector map as matchLabels) and writes their status back as v1 status, so the two kinds
// share one implementation of adoption, release, replica management and status.
package replication

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/wasmplane/wasmplane/core/controller/replicaset"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// controllerKind is written into the ownerReferences of the pods a ReplicationController
// creates.
var controllerKind = corev1.SchemeGroupVersion.WithKind("ReplicationController")

// Options tunes the controller; the zero value is Kubernetes' behaviour.
type Options struct {
	// Logger receives logs (nil = discarded).
	Logger *slog.Logger
	// Recorder receives events about ReplicationControllers; nil = none.
	Recorder record.EventRecorder
}

// New returns a ReplicationController controller fed by factory's ReplicationController
// and Pod informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*replicaset.Controller, error) {
	inf := factory.Core().V1().ReplicationControllers()
	rcs := client.CoreV1().ReplicationControllers
	owners := &replicaset.Owners{
		Kind:     controllerKind,
		Lister:   lister{inf.Lister()},
		Informer: informer{inf.Informer()},
		Get: func(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
			rc, err := rcs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return toReplicaSet(rc), nil
		},
		UpdateStatus: func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
			rc, err := rcs(rs.Namespace).UpdateStatus(ctx, fromReplicaSet(rs), metav1.UpdateOptions{})
			if err != nil {
				return nil, err
			}
			return toReplicaSet(rc), nil
		},
		EventObject: func(rs *appsv1.ReplicaSet) runtime.Object { return fromReplicaSet(rs) },
	}
	c, err := replicaset.New(client, factory, replicaset.Options{
		Logger: opts.Logger, Recorder: opts.Recorder, Owners: owners, Name: "replicationmanager",
	})
	if err != nil {
		return nil, fmt.Errorf("ReplicationController controller: %w", err)
	}
	return c, nil
}

// toReplicaSet shows rc as the ReplicaSet the controller works on. The copy shares
// nothing with rc, which belongs to the informer's cache.
func toReplicaSet(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rc = rc.DeepCopy()
	rs := &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "ReplicaSet"},
		ObjectMeta: rc.ObjectMeta,
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds,
			Selector:        &metav1.LabelSelector{MatchLabels: rc.Spec.Selector},
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rs
}

// fromReplicaSet turns a ReplicaSet made by toReplicaSet (and possibly changed by the
// controller) back into the ReplicationController it shows.
func fromReplicaSet(rs *appsv1.ReplicaSet) *corev1.ReplicationController {
	rs = rs.DeepCopy()
	rc := &corev1.ReplicationController{
		TypeMeta:   metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: controllerKind.Kind},
		ObjectMeta: rs.ObjectMeta,
		Spec: corev1.ReplicationControllerSpec{
			Replicas:        rs.Spec.Replicas,
			MinReadySeconds: rs.Spec.MinReadySeconds,
			Template:        &rs.Spec.Template,
		},
		Status: corev1.ReplicationControllerStatus{
			Replicas:             rs.Status.Replicas,
			FullyLabeledReplicas: rs.Status.FullyLabeledReplicas,
			ReadyReplicas:        rs.Status.ReadyReplicas,
			AvailableReplicas:    rs.Status.AvailableReplicas,
			ObservedGeneration:   rs.Status.ObservedGeneration,
		},
	}
	if rs.Spec.Selector != nil {
		rc.Spec.Selector = rs.Spec.Selector.MatchLabels
	}
	for _, c := range rs.Status.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, corev1.ReplicationControllerCondition{
			Type: corev1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rc
}

// lister shows the cached ReplicationControllers as ReplicaSets.
type lister struct {
	rcs corelisters.ReplicationControllerLister
}

// ReplicaSets returns a lister of the namespace's ReplicationControllers as ReplicaSets.
func (l lister) ReplicaSets(namespace string) appslisters.ReplicaSetNamespaceLister {
	return namespaceLister{l.rcs.ReplicationControllers(namespace)}
}

type namespaceLister struct {
	rcs corelisters.ReplicationControllerNamespaceLister
}

// List returns the namespace's ReplicationControllers whose labels match selector.
func (l namespaceLister) List(selector labels.Selector) ([]*appsv1.ReplicaSet, error) {
	all, err := l.rcs.List(selector)
	if err != nil {
		return nil, fmt.Errorf("listing ReplicationControllers: %w", err)
	}
	out := make([]*appsv1.ReplicaSet, len(all))
	for i, rc := range all {
		out[i] = toReplicaSet(rc)
	}
	return out, nil
}

// Get returns the named ReplicationController; a miss is the lister's NotFound error.
func (l namespaceLister) Get(name string) (*appsv1.ReplicaSet, error) {
	rc, err := l.rcs.Get(name)
	if err != nil {
		return nil, err
	}
	return toReplicaSet(rc), nil
}

// informer hands ReplicationController events to handlers as ReplicaSet events.
type informer struct{ inf cache.SharedIndexInformer }

// AddEventHandler registers handler behind a converting handler.
func (i informer) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) { handler.OnAdd(convert(obj), initial) },
		UpdateFunc: func(oldObj, newObj any) {
			handler.OnUpdate(convert(oldObj), convert(newObj))
		},
		DeleteFunc: func(obj any) { handler.OnDelete(convert(obj)) },
	})
}

// HasSynced reports whether the ReplicationController cache has synced.
func (i informer) HasSynced() bool { return i.inf.HasSynced() }

// convert turns a ReplicationController, or the tombstone of one, into its ReplicaSet view;
// anything else passes unchanged (and the handlers ignore it).
func convert(obj any) any {
	switch o := obj.(type) {
	case *corev1.ReplicationController:
		return toReplicaSet(o)
	case cache.DeletedFinalStateUnknown:
		if rc, ok := o.Obj.(*corev1.ReplicationController); ok {
			return cache.DeletedFinalStateUnknown{Key: o.Key, Obj: toReplicaSet(rc)}
		}
	}
	return obj
}
