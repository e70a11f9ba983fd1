package resources

import (
	"context"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// ComponentProbe reports the health of the control plane's components, one
// ComponentStatus each, named as kube-apiserver names them (scheduler,
// controller-manager, etcd-0).
type ComponentProbe func(ctx context.Context) []corev1.ComponentStatus

// ComponentStatuses returns core/v1 componentstatuses as kube-apiserver still serves them
// (deprecated since v1.19): cluster-scoped, get and list only, computed by probe on each
// request; nothing is stored.
func ComponentStatuses(probe ComponentProbe) []Definition {
	gv := corev1.SchemeGroupVersion
	r := &registry.Resource{StoragePrefix: builtinPrefix(gv.Group, "componentstatuses"), GroupVersion: gv, Name: "componentstatuses",
		SingularName: "componentstatus", Kind: "ComponentStatus", ListKind: "ComponentStatusList", ShortNames: []string{"cs"},
		Verbs: []string{"get", "list"}, NoTable: true, NoInitializers: true,
		NewFunc:     func() runtime.Object { return &corev1.ComponentStatus{} },
		NewListFunc: func() runtime.Object { return &corev1.ComponentStatusList{} }, Strategy: &strategy{}}
	return []Definition{{Resource: r,
		GetHandler: computedGet(func(ctx context.Context, req endpoints.Request) (runtime.Object, error) {
			for _, c := range probe(ctx) {
				if c.Name == req.Name {
					return &c, nil
				}
			}
			return nil, apierrors.NewNotFound(gv.WithResource("componentstatuses").GroupResource(), req.Name)
		}),
		ListHandler: computedList(func(ctx context.Context, _ endpoints.Request, opts *metav1.ListOptions, match func(metav1.Object) bool) (runtime.Object, error) {
			sel, err := labels.Parse(opts.LabelSelector)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			out := &corev1.ComponentStatusList{Items: []corev1.ComponentStatus{}}
			for _, c := range probe(ctx) {
				if match(&c) && sel.Matches(labels.Set(c.Labels)) {
					out.Items = append(out.Items, c)
				}
			}
			return out, nil
		})}}
}

// ComponentStatus is one component's status: Healthy True with message when err is nil,
// else Healthy False with the error, as kube-apiserver's probes report.
func ComponentStatus(name, message string, err error) corev1.ComponentStatus {
	cond := corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: message}
	if err != nil {
		cond = corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: err.Error()}
	}
	return corev1.ComponentStatus{TypeMeta: metav1.TypeMeta{Kind: "ComponentStatus", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Conditions: []corev1.ComponentCondition{cond}}
}
