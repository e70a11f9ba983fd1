// Package initializers holds the InitializerConfiguration type of the seed, served as
// admissionregistration.k8s.io/v1alpha1 so that the seed's YAML applies unchanged
// (Kubernetes removed the type; k8s.io/api no longer has it).
package initializers

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is admissionregistration.k8s.io/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: "admissionregistration.k8s.io", Version: "v1alpha1"}

// PendingAnnotation lists an object's pending initializers, comma-separated, in order.
// Kubernetes once kept them in metadata.initializers; that field is gone from k8s.io/api.
const PendingAnnotation = "initializers.wasmplane.io/pending"

// AddToScheme registers the types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &InitializerConfiguration{}, &InitializerConfigurationList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// InitializerConfiguration names the initializers new objects must pass before they
// become visible.
type InitializerConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Initializers run in order on matching new objects.
	Initializers []Initializer `json:"initializers,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
}

// Initializer is one initializer and the objects it initializes.
type Initializer struct {
	// Name is the initializer's name, a fully qualified name such as podimage.example.com.
	Name string `json:"name"`
	// Rules select the resources it initializes.
	Rules []Rule `json:"rules,omitempty"`
}

// Rule selects resources by group, version and resource ("*" matches all).
type Rule struct {
	// APIGroups matched; "" is the core group.
	APIGroups []string `json:"apiGroups,omitempty"`
	// APIVersions matched.
	APIVersions []string `json:"apiVersions,omitempty"`
	// Resources matched, e.g. pods.
	Resources []string `json:"resources,omitempty"`
}

// InitializerConfigurationList is a list of InitializerConfigurations.
type InitializerConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the configurations.
	Items []InitializerConfiguration `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (c *InitializerConfiguration) DeepCopyObject() runtime.Object {
	out := &InitializerConfiguration{TypeMeta: c.TypeMeta}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if c.Initializers != nil {
		out.Initializers = make([]Initializer, len(c.Initializers))
		for i, in := range c.Initializers {
			out.Initializers[i] = Initializer{Name: in.Name}
			for _, r := range in.Rules {
				out.Initializers[i].Rules = append(out.Initializers[i].Rules, Rule{
					APIGroups: append([]string(nil), r.APIGroups...), APIVersions: append([]string(nil), r.APIVersions...),
					Resources: append([]string(nil), r.Resources...)})
			}
		}
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *InitializerConfigurationList) DeepCopyObject() runtime.Object {
	out := &InitializerConfigurationList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*InitializerConfiguration))
	}
	return out
}

// Matches reports whether r selects group/version/resource.
func (r Rule) Matches(gvr schema.GroupVersionResource) bool {
	return anyOf(r.APIGroups, gvr.Group) && anyOf(r.APIVersions, gvr.Version) && anyOf(r.Resources, gvr.Resource)
}

func anyOf(list []string, v string) bool {
	for _, x := range list {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

// SwaggerDoc describes InitializerConfiguration for kubectl explain.
func (InitializerConfiguration) SwaggerDoc() map[string]string {
	return map[string]string{
		"":             "InitializerConfiguration names initializers that new matching objects must pass before they become visible to lists and watches.",
		"initializers": "Initializers run in order; each removes itself from the object when done.",
	}
}

// SwaggerDoc describes Initializer.
func (Initializer) SwaggerDoc() map[string]string {
	return map[string]string{
		"":      "Initializer is one initializer and the resources it initializes.",
		"name":  "Name of the initializer; a WasmPlugin with the initialize hook and spec.initializer set to this name is run by the server itself.",
		"rules": "Rules select the resources this initializer applies to.",
	}
}

// SwaggerDoc describes Rule.
func (Rule) SwaggerDoc() map[string]string {
	return map[string]string{
		"":            "Rule selects resources by group, version and resource; \"*\" matches all.",
		"apiGroups":   "APIGroups matched; \"\" is the core group.",
		"apiVersions": "APIVersions matched.",
		"resources":   "Resources matched, such as pods.",
	}
}
