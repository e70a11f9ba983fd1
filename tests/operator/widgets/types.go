// Package widgets is a small operator written with controller-runtime, the way operators
// are usually written: a Widget custom resource with a status subresource, and a
// reconciler that keeps one ConfigMap per Widget, reports status, records events and
// holds a finalizer. The operator tests run it against wasmplane.
package widgets

import (
	"context"
	"fmt"
	"time"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GroupVersion is the API group and version Widgets are served at.
var GroupVersion = schema.GroupVersion{Group: "operator.wasmplane.io", Version: "v1"}

// Widget asks for a ConfigMap describing Spec.Replicas replicas.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec   `json:"spec,omitempty"`
	Status            WidgetStatus `json:"status,omitempty"`
}

// WidgetSpec is what the user asks for.
type WidgetSpec struct {
	Replicas int32  `json:"replicas"`
	Message  string `json:"message,omitempty"`
}

// WidgetStatus is what the operator last did for a Widget.
type WidgetStatus struct {
	// ObservedGeneration is the generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ConfigMap names the ConfigMap the operator keeps for the Widget.
	ConfigMap string `json:"configMap,omitempty"`
	// Replicas is the replica count the ConfigMap holds.
	Replicas int32 `json:"replicas,omitempty"`
}

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// DeepCopyInto copies w into out; Widget holds no pointers outside its metadata.
func (w *Widget) DeepCopyInto(out *Widget) {
	*out = *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object {
	out := new(Widget)
	w.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *WidgetList) DeepCopyObject() runtime.Object {
	out := &WidgetList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Widget, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// AddToScheme registers Widget and WidgetList in s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// CRD is the CustomResourceDefinition of Widget.
func CRD() *apiextensionsv1.CustomResourceDefinition {
	minReplicas := 0.0
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + GroupVersion.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: GroupVersion.Group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: GroupVersion.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Required: []string{"replicas"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"replicas": {Type: "integer", Format: "int32", Minimum: &minReplicas},
							"message":  {Type: "string"},
						}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"observedGeneration": {Type: "integer", Format: "int64"},
							"configMap":          {Type: "string"},
							"replicas":           {Type: "integer", Format: "int32"},
						}},
					},
				}},
			}},
		},
	}
}

// InstallCRD creates the Widget CRD (or keeps the one there) and waits until the server
// reports it Established, as an operator does before it starts its manager.
func InstallCRD(ctx context.Context, c client.Client) error {
	crd := CRD()
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the Widget CRD: %w", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), &got); err != nil {
			return false, fmt.Errorf("reading the Widget CRD: %w", err)
		}
		return apiextensionshelpers.IsCRDConditionTrue(&got, apiextensionsv1.Established), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Widget CRD to be established: %w", err)
	}
	return nil
}
