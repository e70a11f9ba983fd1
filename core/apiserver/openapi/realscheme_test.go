package openapi

import (
	"encoding/json"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"github.com/wasmplane/wasmplane/core/api"
	wasmv1alpha1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/kube-openapi/pkg/spec3"
)

// TestRealScheme builds the documents over wasmplane's own scheme, including its
// wasmplane.io types, which carry no generated SwaggerDoc.
func TestRealScheme(t *testing.T) {
	s, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	gv := wasmv1alpha1.SchemeGroupVersion
	res := []Resource{
		{GVK: core("Pod"), Plural: "pods", Namespaced: true, Subresources: []Subresource{{Name: "status"}, {Name: "binding", Kind: core("Binding")}, {Name: "log"}}},
		{GVK: apps("Deployment"), Plural: "deployments", Namespaced: true, Subresources: []Subresource{{Name: "status"}, {Name: "scale", Kind: autoscalingv1.SchemeGroupVersion.WithKind("Scale")}}},
		{GVK: gv.WithKind("WasmPlugin"), Plural: "wasmplugins", Namespaced: true, Subresources: []Subresource{{Name: "status"}}},
		{GVK: gv.WithKind("ClusterWasmPlugin"), Plural: "clusterwasmplugins"},
	}
	svc, err := New(s, res, "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openapiv2.ParseDocument(svc.v2JSON.data); err != nil {
		t.Fatal(err)
	}
	doc := svc.base["apis/wasmplane.io/v1alpha1"]
	if doc == nil {
		t.Fatal("no wasmplane.io/v1alpha1 document")
	}
	var v3 spec3.OpenAPI
	if err := json.Unmarshal(doc.json.data, &v3); err != nil {
		t.Fatal(err)
	}
	plugin := v3.Components.Schemas["com.github.wasmplane.wasmplane.core.api.v1alpha1.WasmPlugin"]
	if plugin == nil || plugin.Properties["spec"].AllOf == nil {
		t.Fatalf("WasmPlugin schema = %+v", plugin)
	}
}
