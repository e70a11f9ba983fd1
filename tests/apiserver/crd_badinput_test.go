package apiserver

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// simpleCRD is a cluster-scoped CRD of group g with one version whose spec is schema.
func simpleCRD(plural, kind, g string, spec apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + g},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: g, Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}}}}},
		},
	}
}

func TestInvalidCRDs(t *testing.T) {
	e := newCRDEnv(t, testserver.StartAPI(t))
	ctx := context.Background()
	obj := apiextensionsv1.JSONSchemaProps{Type: "object"}
	cases := []struct {
		name  string
		crd   *apiextensionsv1.CustomResourceDefinition
		field string
		msg   string
	}{
		{"name is not plural.group", func() *apiextensionsv1.CustomResourceDefinition {
			c := simpleCRD("things", "Thing", "bad.example.com", obj)
			c.Name = "other.bad.example.com"
			return c
		}(), "metadata.name", `must be spec.names.plural+"."+spec.group`},
		{"bad plural", simpleCRD("thi.ngs", "Thing", "bad.example.com", obj), "spec.names.plural", "a DNS-1035 label"},
		{"non-structural schema", simpleCRD("nostructs", "NoStruct", "bad.example.com", apiextensionsv1.JSONSchemaProps{
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"x": {Type: "string"}}}), "spec.validation.openAPIV3Schema.properties[spec].type", "Required value"},
		{"CEL does not compile", simpleCRD("celbads", "CelBad", "bad.example.com", apiextensionsv1.JSONSchemaProps{Type: "object",
			XValidations: apiextensionsv1.ValidationRules{{Rule: "self.nope +"}}}), "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule", "compilation failed"},
		{"CEL too costly", simpleCRD("celcosts", "CelCost", "bad.example.com", apiextensionsv1.JSONSchemaProps{Type: "object",
			Properties:   map[string]apiextensionsv1.JSONSchemaProps{"list": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}}},
			XValidations: apiextensionsv1.ValidationRules{{Rule: "self.list.all(a, self.list.all(b, self.list.all(c, a + b + c != '')))"}}}), "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule", "estimated rule cost exceeds budget"},
		{"no storage version", func() *apiextensionsv1.CustomResourceDefinition {
			c := simpleCRD("nostores", "NoStore", "bad.example.com", obj)
			c.Spec.Versions[0].Storage = false
			return c
		}(), "spec.versions", "must have exactly one version marked as storage version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, c.crd, metav1.CreateOptions{})
			var se *apierrors.StatusError
			if !apierrors.IsInvalid(err) || !asStatus(err, &se) {
				t.Fatalf("want 422 Invalid, got %v", err)
			}
			if se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) == 0 {
				t.Fatalf("no causes: %v", se.ErrStatus)
			}
			if c.field != "" && !slices.Contains(causeFields(se.ErrStatus), c.field) {
				t.Errorf("cause fields %v lack %s", causeFields(se.ErrStatus), c.field)
			}
			if !strings.Contains(se.ErrStatus.Message, c.msg) {
				t.Errorf("message %q lacks %q", se.ErrStatus.Message, c.msg)
			}
			if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.crd.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("refused CRD stored: %v", err)
			}
		})
	}
}

func TestNameConflict(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	e := newCRDEnv(t, testserver.StartAPI(t))
	ctx := context.Background()
	obj := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	e.establish(t, simpleCRD("gadgets", "Gadget", "conflict.example.com", obj))
	// Same kind in the same group under another plural: refused in the conditions (the
	// last conflict found is reported, as Kubernetes does: ListKind after Kind).
	second := simpleCRD("gizmos", "Gadget", "conflict.example.com", obj)
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := e.waitCRD(second.Name, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		return apiextensionshelpers.IsCRDConditionFalse(c, apiextensionsv1.NamesAccepted)
	})
	if err != nil {
		t.Fatalf("conflict not reported: %v", err)
	}
	na := apiextensionshelpers.FindCRDCondition(got, apiextensionsv1.NamesAccepted)
	if na.Reason != "ListKindConflict" || !strings.Contains(na.Message, `"GadgetList" is already in use`) {
		t.Fatalf("NamesAccepted %+v", na)
	}
	if apiextensionshelpers.IsCRDConditionTrue(got, apiextensionsv1.Established) {
		t.Fatal("a conflicting CRD is Established")
	}
	code, _, _ := e.do(t, "GET", "/apis/conflict.example.com/v1/gizmos", "", "", "")
	if code != 404 {
		t.Fatalf("conflicting CRD served: %d", code)
	}
	// Once the first CRD is gone, the second takes the name and is served.
	if err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, "gadgets.conflict.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = e.waitCRD(second.Name, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		return apiextensionshelpers.IsCRDConditionTrue(c, apiextensionsv1.Established)
	})
	if err != nil {
		t.Fatalf("second CRD not Established after the first is gone: %v", err)
	}
	code, _, body := e.do(t, "GET", "/apis/conflict.example.com/v1/gizmos", "", "", "")
	if code != 200 {
		t.Fatalf("second CRD not served: %d %s", code, body)
	}
}
