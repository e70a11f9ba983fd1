// Package plugins holds wasmplane's built-in admission plugins, each behaving as the
// Kubernetes plugin of the same name: ServiceAccount, DefaultTolerationSeconds, Priority,
// LimitRanger and ResourceQuota. Each plugin reads what it needs through a small
// interface of its own, which the API server implements on top of its registry.
package plugins

import (
	"context"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// podsResource is the group resource the pod plugins act on.
var podsResource = schema.GroupResource{Resource: "pods"}

// isPodCreate reports whether a is a create of a pod proper (not a subresource).
func isPod(a *admission.Attributes) bool {
	return a.Resource.GroupResource() == podsResource && a.Subresource == ""
}

// podOf returns the pod of a request, or a BadRequest when the object is something else.
func podOf(a *admission.Attributes) (*corev1.Pod, error) {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil, apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	return pod, nil
}

// forbidden is Kubernetes' admission.NewForbidden: `pods "name" is forbidden: <err>`.
func forbidden(a *admission.Attributes, err error) error {
	return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, err)
}

// ServiceAccountGetter reads ServiceAccounts (the API server's registry in production).
type ServiceAccountGetter interface {
	// GetServiceAccount returns one ServiceAccount; a NotFound error when it is missing.
	GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
}

// LimitRangeLister lists the LimitRanges of a namespace.
type LimitRangeLister interface {
	// ListLimitRanges returns every LimitRange in namespace.
	ListLimitRanges(ctx context.Context, namespace string) ([]corev1.LimitRange, error)
}
