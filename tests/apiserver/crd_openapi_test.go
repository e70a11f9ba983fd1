package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// /openapi/v2 publishes each served version of a CRD under kube-apiserver's definition
// name with the CRD's schema (plus apiVersion, kind, metadata and the
// group-version-kind extension), and follows the CRD as versions are renamed, stop
// being served and the CRD goes; the ETag changes with the document.
func TestOpenAPIV2Publishing(t *testing.T) {
	e := newCRDEnv(t, testserver.StartAPI(t))
	ctx := context.Background()
	props := apiextensionsv1.JSONSchemaProps{Type: "object", Description: "Waldo is hidden.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Description: "Where it hides.", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"place": {Type: "string", Description: "The place."},
				"tries": {Type: "integer", Format: "int32"},
			}},
		}}
	crd := simpleCRD("waldos", "Waldo", "publish.example.com", apiextensionsv1.JSONSchemaProps{})
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: props.DeepCopy()}}
	}
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{version("v2", true), version("v3", false)}
	crd = e.establish(t, crd)

	internal := apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&props, &internal, nil); err != nil {
		t.Fatal(err)
	}
	want := spec.Schema{}
	if err := validation.ConvertJSONSchemaProps(&internal, &want); err != nil {
		t.Fatal(err)
	}
	// Through JSON, as a client reads it.
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	want = spec.Schema{}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}

	var etags []string
	// waitDefs waits until each definition named in present is published (a kind with the
	// CRD's schema) and each in absent is not.
	waitDefs := func(present, absent []string) {
		t.Helper()
		var last string
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			doc, etag := e.openAPIV2(t)
			for _, name := range present {
				d, ok := doc.Definitions[name]
				if !ok {
					last = name + " missing"
					return false, nil
				}
				if strings.HasSuffix(name, "List") {
					continue
				}
				gvk, _ := json.Marshal(d.Extensions["x-kubernetes-group-version-kind"])
				version := strings.Split(name, ".")[3]
				if !strings.Contains(string(gvk), `"version":"`+version+`"`) || !hasRef(d.Properties["metadata"]) ||
					d.Properties["apiVersion"].Type[0] != "string" || d.Properties["kind"].Type[0] != "string" {
					last = name + " lacks the group-version-kind or apiVersion/kind/metadata: " + string(gvk)
					return false, nil
				}
				for _, p := range []string{"metadata", "apiVersion", "kind"} {
					delete(d.Properties, p)
				}
				delete(d.Extensions, "x-kubernetes-group-version-kind")
				delete(d.Extensions, "x-kubernetes-selectable-fields")
				if !equality.Semantic.DeepEqual(want, d) {
					last = name + " has another schema"
					return false, nil
				}
			}
			for _, name := range absent {
				if _, ok := doc.Definitions[name]; ok {
					last = name + " still published"
					return false, nil
				}
			}
			etags = append(etags, etag)
			return true, nil
		})
		if err != nil {
			t.Fatalf("%v: %s", err, last)
		}
	}
	const v2, v3, v4 = "com.example.publish.v2.Waldo", "com.example.publish.v3.Waldo", "com.example.publish.v4.Waldo"
	waitDefs([]string{v2, v3, v2 + "List"}, nil)

	// Renamed: v3 becomes v4.
	crd.Spec.Versions[1].Name = "v4"
	if crd, err = e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDefs([]string{v2, v4}, []string{v3})

	// No longer served: v2 goes.
	crd.Spec.Versions[0].Served = false
	if _, err = e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDefs([]string{v4}, []string{v2, v2 + "List"})

	if err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDefs(nil, []string{v2, v4, v4 + "List"})
	for i := 1; i < len(etags); i++ {
		if etags[i] == etags[i-1] {
			t.Errorf("ETag %d unchanged after a change of the CRD: %s", i, etags[i])
		}
	}
	// A conditional request for the current document is answered 304.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL()+"/openapi/v2", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("If-None-Match", `"`+etags[len(etags)-1]+`"`)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match with the current ETag: %d", resp.StatusCode)
	}
}

// openAPIV2 fetches /openapi/v2 and its ETag.
func (e *crdEnv) openAPIV2(t *testing.T) (*spec.Swagger, string) {
	t.Helper()
	code, h, body := e.do(t, http.MethodGet, "/openapi/v2", "", "application/json", "")
	if code != http.StatusOK {
		t.Fatalf("/openapi/v2: %d %s", code, body)
	}
	doc := &spec.Swagger{}
	if err := json.Unmarshal(body, doc); err != nil {
		t.Fatalf("/openapi/v2: %v", err)
	}
	return doc, strings.Trim(h.Get("Etag"), `"`)
}

func hasRef(s spec.Schema) bool {
	return s.Ref.String() != "" || (len(s.AllOf) == 1 && s.AllOf[0].Ref.String() != "")
}
