// Package api joins wasmplane's own API types to the k8s.io/api types in one scheme, and
// provides the codecs every server component encodes and decodes with.
package api

import (
	"fmt"

	"github.com/wasmplane/wasmplane/core/api/hpaconv"
	"github.com/wasmplane/wasmplane/core/api/initializers"
	wasmv1alpha1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// NewScheme returns a scheme holding every type wasmplane serves. Each caller gets its
// own scheme so that no component shares mutable registration state with another.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	adders := []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		discoveryv1.AddToScheme,
		networkingv1.AddToScheme,
		nodev1.AddToScheme,
		appsv1.AddToScheme,
		autoscalingv1.AddToScheme,
		autoscalingv2.AddToScheme,
		batchv1.AddToScheme,
		coordinationv1.AddToScheme,
		eventsv1.AddToScheme,
		rbacv1.AddToScheme,
		certificatesv1.AddToScheme,
		authenticationv1.AddToScheme,
		authorizationv1.AddToScheme,
		schedulingv1.AddToScheme,
		policyv1.AddToScheme,
		storagev1.AddToScheme,
		storagemigrationv1.AddToScheme,
		resourcev1.AddToScheme,
		metav1.AddMetaToScheme,
		wasmv1alpha1.AddToScheme,
		metricsv1beta1.AddToScheme,
		initializers.AddToScheme,
		apiextensionsv1.AddToScheme,
		admissionregistrationv1.AddToScheme,
		apiregistrationv1.AddToScheme,
		flowcontrolv1.AddToScheme,
	}
	adders = append(adders, hpaconv.AddConversions)
	for _, add := range adders {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building scheme: %w", err)
		}
	}
	// The unversioned meta types (Status, APIVersions, …) and the per-version option types
	// (ListOptions, DeleteOptions, WatchEvent) must be decodable under every group version.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	return s, nil
}

// MustScheme is NewScheme for callers that cannot proceed without it.
func MustScheme() *runtime.Scheme {
	s, err := NewScheme()
	if err != nil {
		panic(err)
	}
	return s
}

// NewCodecs returns the codec factory (JSON, YAML, protobuf) for a scheme.
func NewCodecs(s *runtime.Scheme) serializer.CodecFactory {
	return serializer.NewCodecFactory(s)
}
