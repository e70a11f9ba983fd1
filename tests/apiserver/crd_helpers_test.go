package apiserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
)

// env is one server with the clients the tests use.
type crdEnv struct {
	srv  *testserver.Server
	ext  apiextensionsclient.Interface
	dyn  dynamic.Interface
	http *http.Client
}

func newCRDEnv(t testing.TB, srv *testserver.Server) *crdEnv {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(srv.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(srv.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	return &crdEnv{srv: srv, ext: ext, dyn: dyn, http: srv.HTTPClient(t)}
}

// widgetsCRD is the CRD most tests use: namespaced, v1 (storage) and v1beta1 (served,
// deprecated), v0 (not served), status and scale subresources, printer columns, a
// selectable field, a short name and the "all" category, defaults, CEL rules with a
// transition rule, int-or-string, preserve-unknown-fields, an embedded resource and a
// map list.
func widgetsCRD() *apiextensionsv1.CustomResourceDefinition {
	spec := apiextensionsv1.JSONSchemaProps{
		Type: "object",
		XValidations: apiextensionsv1.ValidationRules{
			{Rule: "self.replicas <= self.maxReplicas", MessageExpression: "self.immutableID + ': replicas must not exceed maxReplicas'"},
			{Rule: "self.immutableID == oldSelf.immutableID", Message: "immutableID is immutable"},
		},
		Required: []string{"immutableID"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"replicas":    {Type: "integer", Format: "int32", Minimum: ptr.To(0.0), Default: &apiextensionsv1.JSON{Raw: []byte("1")}},
			"maxReplicas": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("10")}},
			"color":       {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"blue"`)}, Enum: []apiextensionsv1.JSON{{Raw: []byte(`"blue"`)}, {Raw: []byte(`"red"`)}}},
			"immutableID": {Type: "string", MaxLength: ptr.To[int64](32)},
			"port":        {XIntOrString: true, AnyOf: []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}},
			"free":        {Type: "object", XPreserveUnknownFields: ptr.To(true)},
			"template":    {Type: "object", XEmbeddedResource: true, XPreserveUnknownFields: ptr.To(true)},
			"ports": {Type: "array", XListType: ptr.To("map"), XListMapKeys: []string{"name"},
				Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"name"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string"}, "port": {Type: "integer"}}}}},
		},
	}
	schemaProps := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec":   spec,
		"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}, "selector": {Type: "string"}, "phase": {Type: "string"}}},
	}}
	version := func(name string, served, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{
			Name: name, Served: served, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schemaProps.DeepCopy()},
			Subresources: &apiextensionsv1.CustomResourceSubresources{
				Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
				Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptr.To(".status.selector")},
			},
			AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
				{Name: "Color", Type: "string", JSONPath: ".spec.color"},
				{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"},
			},
			SelectableFields: []apiextensionsv1.SelectableField{{JSONPath: ".spec.color"}},
		}
	}
	beta := version("v1beta1", true, false)
	beta.Deprecated = true
	beta.DeprecationWarning = ptr.To("example.com/v1beta1 Widget is deprecated; use example.com/v1 Widget")
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
				ShortNames: []string{"wdg"}, Categories: []string{"all"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true, true), beta, version("v0", false, false)},
		},
	}
}

var widgetsResource = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// establish creates crd and waits until it is Established.
func (e *crdEnv) establish(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	ctx := context.Background()
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CRD %s: %v", crd.Name, err)
	}
	out, err := e.waitCRD(crd.Name, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		return apiextensionshelpers.IsCRDConditionTrue(c, apiextensionsv1.Established)
	})
	if err != nil {
		t.Fatalf("CRD %s not Established: %v (status %+v)", crd.Name, err, out.Status)
	}
	return out
}

// waitCRD polls the CRD name until done holds of it, returning its last state.
func (e *crdEnv) waitCRD(name string, done func(*apiextensionsv1.CustomResourceDefinition) bool) (*apiextensionsv1.CustomResourceDefinition, error) {
	out := &apiextensionsv1.CustomResourceDefinition{}
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		out = got
		return done(got), nil
	})
	return out, err
}

// do sends a raw request and returns the status code, headers and body.
func (e *crdEnv) do(t *testing.T, method, path, contentType, accept, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

// status decodes a Status body.
func status(t *testing.T, body []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("decoding Status %s: %v", body, err)
	}
	return st
}

// causeFields lists the fields of a Status's causes.
func causeFields(st metav1.Status) []string {
	var out []string
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			out = append(out, c.Field)
		}
	}
	return out
}
