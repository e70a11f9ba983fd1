package customresource

import (
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// path splits a scale JSON path such as ".spec.replicas".
func path(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

// ToScale reads the Scale of a custom object through the CRD's scale paths, as
// Kubernetes' scaleFromCustomResource: a missing replicas field counts as 0.
func ToScale(spec *apiextensionsv1.CustomResourceSubresourceScale, obj runtime.Object) (*autoscalingv1.Scale, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("a custom object is %T", obj))
	}
	specReplicas, _, err := unstructured.NestedInt64(u.Object, path(spec.SpecReplicasPath)...)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("reading %s: %w", spec.SpecReplicasPath, err))
	}
	var statusReplicas int64
	if spec.StatusReplicasPath != "" {
		if statusReplicas, _, err = unstructured.NestedInt64(u.Object, path(spec.StatusReplicasPath)...); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("reading %s: %w", spec.StatusReplicasPath, err))
		}
	}
	var selector string
	if spec.LabelSelectorPath != nil && *spec.LabelSelectorPath != "" {
		if selector, _, err = unstructured.NestedString(u.Object, path(*spec.LabelSelectorPath)...); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("reading %s: %w", *spec.LabelSelectorPath, err))
		}
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(), CreationTimestamp: u.GetCreationTimestamp()},
		Spec:       autoscalingv1.ScaleSpec{Replicas: int32(specReplicas)},
		Status:     autoscalingv1.ScaleStatus{Replicas: int32(statusReplicas), Selector: selector},
	}, nil
}

// SetReplicas writes n at the CRD's spec replicas path.
func SetReplicas(spec *apiextensionsv1.CustomResourceSubresourceScale, obj runtime.Object, n int32) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		_ = unstructured.SetNestedField(u.Object, int64(n), path(spec.SpecReplicasPath)...)
	}
}
