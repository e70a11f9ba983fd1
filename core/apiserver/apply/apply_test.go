package apply

import (
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

func TestManagerName(t *testing.T) {
	for _, tc := range []struct{ fieldManager, userAgent, want string }{
		{"mine", "kubectl/v1.37.2 (linux/amd64)", "mine"},
		{"", "kubectl/v1.37.2 (linux/amd64) kubernetes/abc", "kubectl"},
		{"", "helm", "helm"},
		{"", "ab\x01c/1", "abc"},
		{"", strings.Repeat("x", 200), strings.Repeat("x", 128)},
		{"", "", ""},
	} {
		if got := ManagerName(tc.fieldManager, tc.userAgent); got != tc.want {
			t.Errorf("ManagerName(%q, %q) = %q, want %q", tc.fieldManager, tc.userAgent, got, tc.want)
		}
	}
}

func TestDecodePatch(t *testing.T) {
	for _, tc := range []struct {
		name, body     string
		strict         bool
		wantErr        bool
		wantStrict     bool
		replicas       any
		wantObjectKind string
	}{
		{name: "json keeps integers", body: `{"kind":"Deployment","spec":{"replicas":3}}`, replicas: int64(3), wantObjectKind: "Deployment"},
		{name: "yaml", body: "kind: Deployment\nspec:\n  replicas: 3\n", replicas: float64(3), wantObjectKind: "Deployment"},
		{name: "yaml flow mapping that is not JSON", body: "{kind: Deployment, spec: {replicas: 3}}", replicas: float64(3), wantObjectKind: "Deployment"},
		{name: "json duplicate field, strict", body: `{"kind":"Deployment","kind":"Deployment"}`, strict: true, wantStrict: true, wantObjectKind: "Deployment"},
		{name: "json duplicate field, not strict", body: `{"kind":"Deployment","kind":"Deployment"}`, wantObjectKind: "Deployment"},
		{name: "yaml duplicate field, strict", body: "kind: Deployment\nkind: Deployment\n", strict: true, wantStrict: true, wantObjectKind: "Deployment"},
		{name: "not yaml", body: "data: [unclosed\n  a: {", wantErr: true},
		{name: "a scalar", body: "just words", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, strictErr, err := DecodePatch([]byte(tc.body), tc.strict)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if (strictErr != nil) != tc.wantStrict {
				t.Errorf("strict error = %v, want %v", strictErr, tc.wantStrict)
			}
			if obj.GetKind() != tc.wantObjectKind {
				t.Errorf("kind %q", obj.GetKind())
			}
			if tc.replicas != nil {
				spec, _ := obj.Object["spec"].(map[string]any)
				if spec["replicas"] != tc.replicas {
					t.Errorf("replicas %#v (%T), want %#v", spec["replicas"], spec["replicas"], tc.replicas)
				}
			}
		})
	}
}

func TestKeepTimestamps(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	cm := func(data string, at metav1.Time, fields string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)},
		}}}, Data: map[string]string{"k": data}}
	}
	for _, tc := range []struct {
		name     string
		obj, old *corev1.ConfigMap
		kind     bool // the new object carries TypeMeta, as a field manager's output does
		wantTime metav1.Time
	}{
		{name: "only the time changed", obj: cm("v", t1, `{"f:data":{}}`), old: cm("v", t0, `{"f:data":{}}`), kind: true, wantTime: t0},
		{name: "the data changed", obj: cm("w", t1, `{"f:data":{}}`), old: cm("v", t0, `{"f:data":{}}`), wantTime: t1},
		{name: "the fields changed", obj: cm("v", t1, `{"f:data":{"f:k":{}}}`), old: cm("v", t0, `{"f:data":{}}`), wantTime: t1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.kind {
				tc.obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			}
			KeepTimestamps(tc.obj, tc.old)
			if got := *tc.obj.ManagedFields[0].Time; !got.Equal(&tc.wantTime) {
				t.Errorf("time %v, want %v", got, tc.wantTime)
			}
			if tc.kind && tc.obj.Kind != "ConfigMap" {
				t.Errorf("TypeMeta lost: %+v", tc.obj.TypeMeta)
			}
		})
	}
}

// TestTypeConverter checks that built-in kinds get Kubernetes' schema (containers are a
// map keyed by name) and other kinds a deduced one (lists atomic).
func TestTypeConverter(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	tc := NewTypeConverter(scheme)
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "i"}}}}}}
	d.SetGroupVersionKind(gvk)
	typed, err := tc.ObjectToTyped(d)
	if err != nil {
		t.Fatal(err)
	}
	set, err := typed.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	if s := set.String(); !strings.Contains(s, `[name="a"]`) {
		t.Errorf("built-in Deployment's containers are not keyed by name: %s", s)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	other := &unstructured.Unstructured{Object: u}
	other.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.io", Version: "v1", Kind: "Other"})
	deduced, err := tc.ObjectToTyped(other)
	if err != nil {
		t.Fatal(err)
	}
	set, err = deduced.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	if s := set.String(); strings.Contains(s, `[name="a"]`) {
		t.Errorf("an unknown kind's list was merged by key: %s", s)
	}
}

// TestKeepTimestampsReordered: a write that only moved one manager's time to a later
// second (which re-sorts the entries) keeps the old entries, order and times included.
func TestKeepTimestampsReordered(t *testing.T) {
	at := func(sec int64) *metav1.Time { t := metav1.NewTime(time.Unix(sec, 0)); return &t }
	entry := func(manager string, sec int64) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Time: at(sec),
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:` + manager + `":{}}}`)}}
	}
	cm := func(data string, entries ...metav1.ManagedFieldsEntry) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: entries}, Data: map[string]string{"a": data}}
	}
	old := cm("v", entry("a", 100), entry("b", 101))
	for _, tc := range []struct {
		name string
		obj  *corev1.ConfigMap
		keep bool
	}{
		{"a's time moved past b's", cm("v", entry("b", 101), entry("a", 102)), true},
		{"and the data changed", cm("w", entry("b", 101), entry("a", 102)), false},
		{"another manager", cm("v", entry("b", 101), entry("c", 102)), false},
		{"an entry fewer", cm("v", entry("b", 101)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.obj.ManagedFields)
			KeepTimestamps(tc.obj, old)
			kept := apiequality.Semantic.DeepEqual(tc.obj.ManagedFields, old.ManagedFields)
			if kept != tc.keep {
				t.Errorf("kept the old entries: %v, want %v (now %+v)", kept, tc.keep, tc.obj.ManagedFields)
			}
			if !tc.keep && !apiequality.Semantic.DeepEqual(tc.obj.ManagedFields, before) {
				t.Errorf("entries changed: %+v", tc.obj.ManagedFields)
			}
		})
	}
}
