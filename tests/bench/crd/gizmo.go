package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// gizmoVersion is the bench CRD's group and version.
var gizmoVersion = schema.GroupVersion{Group: "bench.example.com", Version: "v1"}

// gizmo is the bench's custom object as an operator's Go types hold it: a struct that
// client-go's REST client encodes and decodes with encoding/json, as code-generator's
// clientsets and controller-runtime's client do for custom types — the counterpart of the
// typed ConfigMap client, where the dynamic client's nested maps are not.
type gizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              gizmoSpec `json:"spec"`
}

// gizmoSpec holds the schema's 20 fields (benchCRD): ten strings and ten integers.
type gizmoSpec struct {
	S01 string `json:"s01,omitempty"`
	S02 string `json:"s02,omitempty"`
	S03 string `json:"s03,omitempty"`
	S04 string `json:"s04,omitempty"`
	S05 string `json:"s05,omitempty"`
	S06 string `json:"s06,omitempty"`
	S07 string `json:"s07,omitempty"`
	S08 string `json:"s08,omitempty"`
	S09 string `json:"s09,omitempty"`
	S10 string `json:"s10,omitempty"`
	N01 int64  `json:"n01"`
	N02 int64  `json:"n02"`
	N03 int64  `json:"n03"`
	N04 int64  `json:"n04"`
	N05 int64  `json:"n05"`
	N06 int64  `json:"n06"`
	N07 int64  `json:"n07"`
	N08 int64  `json:"n08"`
	N09 int64  `json:"n09"`
	N10 int64  `json:"n10"`
}

// DeepCopyObject implements runtime.Object; the spec holds only values.
func (g *gizmo) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// newGizmo is the object every custom create sends, whichever client: the same values the
// ConfigMap's data holds as strings.
func newGizmo(name string) *gizmo {
	s := "gadget-value"
	return &gizmo{TypeMeta: metav1.TypeMeta{APIVersion: gizmoVersion.String(), Kind: "Gizmo"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gizmoSpec{S01: s, S02: s, S03: s, S04: s, S05: s, S06: s, S07: s, S08: s, S09: s, S10: s,
			N01: 1, N02: 2, N03: 3, N04: 4, N05: 5, N06: 6, N07: 7, N08: 8, N09: 9, N10: 10}}
}

// gizmoClient creates gizmos the way a generated typed client does: a REST client for the
// group version with a scheme that knows the type, JSON on the wire.
type gizmoClient struct {
	rest *rest.RESTClient
}

func newGizmoClient(cfg *rest.Config) (*gizmoClient, error) {
	scheme := runtime.NewScheme()
	scheme.AddKnownTypeWithName(gizmoVersion.WithKind("Gizmo"), &gizmo{})
	metav1.AddToGroupVersion(scheme, gizmoVersion)
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gizmoVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("typed client for %s: %w", gizmoVersion, err)
	}
	return &gizmoClient{rest: rc}, nil
}

// create posts g into namespace ns and decodes the server's answer, as a typed client's
// Create does.
func (c *gizmoClient) create(ctx context.Context, ns string, g *gizmo) (*gizmo, error) {
	out := &gizmo{}
	err := c.rest.Post().Namespace(ns).Resource("gizmos").
		VersionedParams(&metav1.CreateOptions{}, metav1.ParameterCodec).Body(g).Do(ctx).Into(out)
	return out, err
}
