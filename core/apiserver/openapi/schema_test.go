package openapi

import (
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func TestDefinitionName(t *testing.T) {
	for _, tc := range []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[corev1.Pod](), "io.k8s.api.core.v1.Pod"},
		{reflect.TypeFor[appsv1.Deployment](), "io.k8s.api.apps.v1.Deployment"},
		{reflect.TypeFor[metav1.ObjectMeta](), "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
		{reflect.TypeFor[resource.Quantity](), "io.k8s.apimachinery.pkg.api.resource.Quantity"},
		{reflect.TypeFor[intstr.IntOrString](), "io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
		{reflect.TypeFor[runtime.RawExtension](), "io.k8s.apimachinery.pkg.runtime.RawExtension"},
		{reflect.TypeFor[Resource](), "com.github.wasmplane.wasmplane.core.apiserver.openapi.Resource"},
	} {
		if got := definitionName(tc.typ); got != tc.want {
			t.Errorf("definitionName(%v) = %q, want %q", tc.typ, got, tc.want)
		}
	}
}

// buildDef builds the definition of T with a builder of the given flavour.
func buildDef[T any](t *testing.T, v3 bool) (*spec.Schema, *schemaBuilder) {
	t.Helper()
	b := newSchemaBuilder(v3, gvksByType(testScheme(t)))
	typ := reflect.TypeFor[T]()
	b.ref(typ)
	def := b.defs[definitionName(typ)]
	if def == nil {
		t.Fatalf("no definition for %v", typ)
	}
	return def, b
}

func TestStructDefinitions(t *testing.T) {
	podDoc := corev1.Pod{}.SwaggerDoc()
	for _, v3 := range []bool{false, true} {
		prefix := map[bool]string{false: "#/definitions/", true: "#/components/schemas/"}[v3]
		// refOf finds the $ref of a property in either flavour (v3 wraps described refs in allOf).
		refOf := func(s spec.Schema) string {
			if len(s.AllOf) == 1 {
				return s.AllOf[0].Ref.String()
			}
			return s.Ref.String()
		}

		pod, _ := buildDef[corev1.Pod](t, v3)
		if pod.Description != podDoc[""] || pod.Description == "" {
			t.Errorf("v3=%v Pod description = %q", v3, pod.Description)
		}
		if got := refOf(pod.Properties["spec"]); got != prefix+"io.k8s.api.core.v1.PodSpec" {
			t.Errorf("v3=%v Pod.spec ref = %q", v3, got)
		}
		if got := pod.Properties["spec"].Description; got != podDoc["spec"] {
			t.Errorf("v3=%v Pod.spec description = %q", v3, got)
		}
		if got := refOf(pod.Properties["metadata"]); got != prefix+"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" {
			t.Errorf("v3=%v Pod.metadata ref = %q", v3, got)
		}
		// TypeMeta is inlined, with its own documentation.
		if got := pod.Properties["apiVersion"]; !got.Type.Contains("string") || got.Description != (metav1.TypeMeta{}).SwaggerDoc()["apiVersion"] {
			t.Errorf("v3=%v Pod.apiVersion = %+v", v3, got)
		}
		if len(pod.Required) != 0 {
			t.Errorf("v3=%v Pod.required = %v, want none", v3, pod.Required)
		}
		var gvk []any
		if err := pod.Extensions.GetObject(extGVK, &gvk); err != nil || len(gvk) != 1 {
			t.Errorf("v3=%v Pod %s = %v (%v)", v3, extGVK, pod.Extensions[extGVK], err)
		}

		_, b := buildDef[corev1.Pod](t, v3)
		spec := b.defs["io.k8s.api.core.v1.PodSpec"]
		containers := spec.Properties["containers"]
		if !containers.Type.Contains("array") || refOf(*containers.Items.Schema) != prefix+"io.k8s.api.core.v1.Container" {
			t.Errorf("v3=%v PodSpec.containers = %+v", v3, containers)
		}
		if s, _ := containers.Extensions.GetString(extPatchStrategy); s != "merge" {
			t.Errorf("v3=%v containers patch strategy = %q", v3, s)
		}
		if s, _ := containers.Extensions.GetString(extPatchMergeKey); s != "name" {
			t.Errorf("v3=%v containers merge key = %q", v3, s)
		}
		if !slices.Contains(spec.Required, "containers") {
			t.Errorf("v3=%v PodSpec.required = %v, want containers", v3, spec.Required)
		}
		if got := spec.Properties["nodeSelector"]; !got.Type.Contains("object") || got.AdditionalProperties == nil || !got.AdditionalProperties.Schema.Type.Contains("string") {
			t.Errorf("v3=%v PodSpec.nodeSelector = %+v", v3, got)
		}
		if got := spec.Properties["terminationGracePeriodSeconds"]; !got.Type.Contains("integer") || got.Format != "int64" {
			t.Errorf("v3=%v terminationGracePeriodSeconds = %+v", v3, got)
		}
		container := b.defs["io.k8s.api.core.v1.Container"]
		if !slices.Contains(container.Required, "name") || slices.Contains(container.Required, "image") {
			t.Errorf("v3=%v Container.required = %v", v3, container.Required)
		}
		port := b.defs["io.k8s.api.core.v1.ContainerPort"].Properties["containerPort"]
		if !port.Type.Contains("integer") || port.Format != "int32" {
			t.Errorf("v3=%v containerPort = %+v", v3, port)
		}
		limits := b.defs["io.k8s.api.core.v1.ResourceRequirements"].Properties["limits"]
		if limits.AdditionalProperties == nil || limits.AdditionalProperties.Schema.Ref.String() != prefix+"io.k8s.apimachinery.pkg.api.resource.Quantity" {
			t.Errorf("v3=%v ResourceRequirements.limits = %+v", v3, limits)
		}

		dep, b := buildDef[appsv1.Deployment](t, v3)
		if dep.Description != (appsv1.Deployment{}).SwaggerDoc()[""] {
			t.Errorf("v3=%v Deployment description = %q", v3, dep.Description)
		}
		if err := dep.Extensions.GetObject(extGVK, &gvk); err != nil || !reflect.DeepEqual(gvk, []any{map[string]any{"group": "apps", "version": "v1", "kind": "Deployment"}}) {
			t.Errorf("v3=%v Deployment %s = %v", v3, extGVK, gvk)
		}
		strategy := b.defs["io.k8s.api.apps.v1.RollingUpdateDeployment"].Properties["maxSurge"]
		if refOf(strategy) != prefix+"io.k8s.apimachinery.pkg.util.intstr.IntOrString" {
			t.Errorf("v3=%v maxSurge = %+v", v3, strategy)
		}

		meta, _ := buildDef[metav1.ObjectMeta](t, v3)
		if meta.Description == "" || !meta.Type.Contains("object") {
			t.Errorf("v3=%v ObjectMeta = %q %v", v3, meta.Description, meta.Type)
		}
		if got := meta.Properties["labels"]; got.AdditionalProperties == nil || !got.AdditionalProperties.Schema.Type.Contains("string") {
			t.Errorf("v3=%v ObjectMeta.labels = %+v", v3, got)
		}
		if got := refOf(meta.Properties["creationTimestamp"]); got != prefix+"io.k8s.apimachinery.pkg.apis.meta.v1.Time" {
			t.Errorf("v3=%v ObjectMeta.creationTimestamp ref = %q", v3, got)
		}
		if got := meta.Properties["finalizers"]; !got.Type.Contains("array") || got.Extensions[extPatchStrategy] != "merge" {
			t.Errorf("v3=%v ObjectMeta.finalizers = %+v", v3, got)
		}
		if _, ok := meta.Extensions[extGVK]; ok {
			t.Errorf("v3=%v ObjectMeta must not carry a GVK", v3)
		}
	}
}

func TestScalarDefinitions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		def       func(t *testing.T, v3 bool) *spec.Schema
		v2Type    string
		v3OneOf   []string
		format    string
		intOrStr  bool
		wantEmpty bool
	}{
		{name: "Quantity", def: func(t *testing.T, v3 bool) *spec.Schema { s, _ := buildDef[resource.Quantity](t, v3); return s },
			v2Type: "string", v3OneOf: []string{"string", "number"}},
		{name: "IntOrString", def: func(t *testing.T, v3 bool) *spec.Schema { s, _ := buildDef[intstr.IntOrString](t, v3); return s },
			v2Type: "string", v3OneOf: []string{"integer", "string"}, format: "int-or-string", intOrStr: true},
		{name: "Time", def: func(t *testing.T, v3 bool) *spec.Schema { s, _ := buildDef[metav1.Time](t, v3); return s },
			v2Type: "string", format: "date-time"},
		{name: "MicroTime", def: func(t *testing.T, v3 bool) *spec.Schema { s, _ := buildDef[metav1.MicroTime](t, v3); return s },
			v2Type: "string", format: "date-time"},
		{name: "RawExtension", def: func(t *testing.T, v3 bool) *spec.Schema { s, _ := buildDef[runtime.RawExtension](t, v3); return s },
			v2Type: "object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v3 := range []bool{false, true} {
				s := tc.def(t, v3)
				if s.Description == "" {
					t.Errorf("v3=%v: no description", v3)
				}
				if len(s.Properties) != 0 {
					t.Errorf("v3=%v: has properties %v; hand-marshalled types must not expose their Go fields", v3, s.Properties)
				}
				if s.Format != tc.format {
					t.Errorf("v3=%v: format = %q, want %q", v3, s.Format, tc.format)
				}
				if v3 && tc.v3OneOf != nil {
					var got []string
					for _, o := range s.OneOf {
						got = append(got, o.Type...)
					}
					if !slices.Equal(got, tc.v3OneOf) || len(s.Type) != 0 {
						t.Errorf("v3: oneOf = %v type = %v, want oneOf %v", got, s.Type, tc.v3OneOf)
					}
				} else if !slices.Equal(s.Type, spec.StringOrArray{tc.v2Type}) {
					t.Errorf("v3=%v: type = %v, want %s", v3, s.Type, tc.v2Type)
				}
				if got, _ := s.Extensions.GetBool(extIntOrString); got != tc.intOrStr {
					t.Errorf("v3=%v: %s = %v", v3, extIntOrString, got)
				}
			}
		})
	}
}

func TestRequiredApproximation(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	type sample struct {
		metav1.TypeMeta `json:",inline"`
		Plain           string            `json:"plain"`
		Optional        string            `json:"optional,omitempty"`
		Zero            string            `json:"zero,omitzero"`
		Pointer         *int32            `json:"pointer"`
		Bytes           []byte            `json:"bytes"`
		Map             map[string]string `json:"map,omitempty"`
		Skipped         string            `json:"-"`
		Anonymous       struct {
			B bool `json:"b"`
		} `json:"anonymous"`
		Nested  inner   `json:"nested"`
		Float   float64 `json:"float,omitempty"`
		private string
	}
	s, b := buildDef[sample](t, false)
	if want := []string{"plain", "bytes", "anonymous", "nested"}; !slices.Equal(s.Required, want) {
		t.Errorf("required = %v, want %v", s.Required, want)
	}
	if got := s.Properties["bytes"]; !got.Type.Contains("string") || got.Format != "byte" {
		t.Errorf("bytes = %+v", got)
	}
	if _, ok := s.Properties["Skipped"]; ok {
		t.Error("json:\"-\" field emitted")
	}
	if _, ok := s.Properties["private"]; ok {
		t.Error("unexported field emitted")
	}
	if got := s.Properties["anonymous"]; !got.Type.Contains("object") || !got.Properties["b"].Type.Contains("boolean") {
		t.Errorf("anonymous struct = %+v", got)
	}
	if got := s.Properties["float"]; !got.Type.Contains("number") || got.Format != "double" {
		t.Errorf("float = %+v", got)
	}
	if _, ok := s.Properties["kind"]; !ok {
		t.Error("inline TypeMeta not flattened")
	}
	if _, ok := b.defs[definitionName(reflect.TypeFor[inner]())]; !ok {
		t.Error("named nested struct not emitted as a definition")
	}
}
