package openapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// SetExtraV2 adds definitions, parameters and paths after the built-in ones; names the
// built-in document has keep their entries; the document stays valid and its ETag moves.
func TestSetExtraV2(t *testing.T) {
	svc := newTestService(t)
	base := svc.v2JSON
	var before spec.Swagger
	if err := json.Unmarshal(base.data, &before); err != nil {
		t.Fatal(err)
	}
	objectMeta := "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	if _, ok := before.Definitions[objectMeta]; !ok {
		t.Fatalf("test document lacks %s", objectMeta)
	}
	extra := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Definitions: spec.Definitions{
			"com.example.v1.Widget": *spec.StringProperty().WithDescription("a widget"),
			objectMeta:              *spec.StringProperty().WithDescription("not the built-in one"),
		},
		Parameters: map[string]spec.Parameter{"widget-param": {ParamProps: spec.ParamProps{Name: "widget", In: "query"}, SimpleSchema: spec.SimpleSchema{Type: "string"}}},
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{"/apis/example.com/v1/widgets": {PathItemProps: spec.PathItemProps{
			Get: &spec.Operation{OperationProps: spec.OperationProps{ID: "listWidgets", Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{
				StatusCodeResponses: map[int]spec.Response{200: {ResponseProps: spec.ResponseProps{Description: "OK"}}}}}}}}}}},
	}}
	for _, tc := range []struct {
		name      string
		extra     []*spec.Swagger
		wantAdded bool
	}{
		{"added", []*spec.Swagger{extra}, true},
		{"replaced by nothing", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := svc.SetExtraV2(tc.extra); err != nil {
				t.Fatal(err)
			}
			if _, err := openapiv2.ParseDocument(svc.v2JSON.data); err != nil {
				t.Fatalf("gnostic rejects the document: %v", err)
			}
			var got spec.Swagger
			if err := json.Unmarshal(svc.v2JSON.data, &got); err != nil {
				t.Fatal(err)
			}
			_, def := got.Definitions["com.example.v1.Widget"]
			_, param := got.Parameters["widget-param"]
			_, path := got.Paths.Paths["/apis/example.com/v1/widgets"]
			if def != tc.wantAdded || param != tc.wantAdded || path != tc.wantAdded {
				t.Fatalf("definition %v, parameter %v, path %v; want %v", def, param, path, tc.wantAdded)
			}
			if got.Definitions[objectMeta].Description != before.Definitions[objectMeta].Description {
				t.Errorf("built-in %s replaced", objectMeta)
			}
			if len(got.Definitions) != len(before.Definitions)+map[bool]int{true: 1}[tc.wantAdded] {
				t.Errorf("%d definitions, had %d", len(got.Definitions), len(before.Definitions))
			}
			if (svc.v2JSON.etag != base.etag) != tc.wantAdded {
				t.Errorf("ETag moved: %v, want %v", svc.v2JSON.etag != base.etag, tc.wantAdded)
			}
		})
	}
}

// WithExtra serves the built-in documents with the extra ones added (v2 once asked for,
// v3 at once) and leaves the service it came from as it was.
func TestWithExtra(t *testing.T) {
	base := newTestService(t)
	before := base.v2JSON.etag
	beforeV3 := len(base.v3.Load().docs)
	extra := &spec.Swagger{SwaggerProps: spec.SwaggerProps{Definitions: spec.Definitions{
		"com.example.v1.Widget": *spec.StringProperty().WithDescription("a widget")}}}
	for _, tc := range []struct {
		name    string
		v2      []*spec.Swagger
		v3      map[string][]byte
		wantDef bool
	}{
		{name: "nothing added", wantDef: false},
		{name: "custom resources added", v2: []*spec.Swagger{extra}, v3: map[string][]byte{"apis/example.com/v1": []byte(`{"openapi":"3.0.0"}`)}, wantDef: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := base.WithExtra(tc.v2, tc.v3)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			svc.V2().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi/v2", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("GET /openapi/v2: %d %s", rec.Code, rec.Body)
			}
			var got spec.Swagger
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if _, ok := got.Definitions["com.example.v1.Widget"]; ok != tc.wantDef {
				t.Errorf("v2 has the extra definition: %v, want %v", ok, tc.wantDef)
			}
			if got, want := len(svc.v3.Load().docs), beforeV3+len(tc.v3); got != want {
				t.Errorf("%d v3 documents, want %d", got, want)
			}
			if base.v2JSON.etag != before || len(base.v3.Load().docs) != beforeV3 {
				t.Error("the base service changed")
			}
		})
	}
}
