// The CRD tests check CustomResourceDefinitions against the real embedded server: the
// CRD's conditions, serving and discovery coming and going, schema validation, pruning,
// defaulting, CEL rules, subresources, printer columns, selectable fields and cleanup.

package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
)

func widget(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     spec,
	}}
}

func TestCustomResources(t *testing.T) {
	e := newCRDEnv(t, testserver.StartAPI(t))
	ctx := context.Background()
	crd := e.establish(t, widgetsCRD())

	t.Run("conditions", func(t *testing.T) {
		c := apiextensionshelpers.FindCRDCondition(crd, apiextensionsv1.NamesAccepted)
		if c == nil || c.Status != apiextensionsv1.ConditionTrue || c.Reason != "NoConflicts" {
			t.Fatalf("NamesAccepted = %+v", c)
		}
		if crd.Status.AcceptedNames.Plural != "widgets" || !slices.Equal(crd.Status.AcceptedNames.ShortNames, []string{"wdg"}) {
			t.Fatalf("accepted names %+v", crd.Status.AcceptedNames)
		}
		if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
			t.Fatalf("storedVersions %v", crd.Status.StoredVersions)
		}
	})

	t.Run("discovery", func(t *testing.T) {
		dc, err := discovery.NewDiscoveryClientForConfig(e.srv.Config(true))
		if err != nil {
			t.Fatal(err)
		}
		list, err := dc.ServerResourcesForGroupVersion("example.com/v1")
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]metav1.APIResource{}
		for _, r := range list.APIResources {
			names[r.Name] = r
		}
		w, ok := names["widgets"]
		if !ok || !w.Namespaced || w.Kind != "Widget" || !slices.Equal(w.ShortNames, []string{"wdg"}) || !slices.Equal(w.Categories, []string{"all"}) {
			t.Fatalf("widgets in discovery: %+v (all: %v)", w, names)
		}
		for _, sub := range []string{"widgets/status", "widgets/scale"} {
			if _, ok := names[sub]; !ok {
				t.Errorf("%s missing from discovery", sub)
			}
		}
		// Aggregated discovery (what kubectl and client-go use first).
		_, all, err := dc.ServerGroupsAndResources()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, l := range all {
			if l.GroupVersion == "example.com/v1" {
				for _, r := range l.APIResources {
					found = found || r.Name == "widgets"
				}
			}
		}
		if !found {
			t.Fatal("aggregated discovery does not list example.com/v1 widgets")
		}
		groups, err := dc.ServerGroups()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups.Groups {
			if g.Name == "example.com" {
				if g.PreferredVersion.Version != "v1" || len(g.Versions) != 2 {
					t.Fatalf("example.com group %+v", g)
				}
			}
		}
	})

	t.Run("create prunes and defaults", func(t *testing.T) {
		obj := widget("w1", map[string]any{"replicas": int64(2), "immutableID": "a", "bogus": "x", "free": map[string]any{"any": "thing"}, "port": "http"})
		obj.Object["unknownTop"] = "y"
		got, err := e.dyn.Resource(widgetsResource).Namespace("default").Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec := got.Object["spec"].(map[string]any)
		if _, ok := spec["bogus"]; ok {
			t.Error("spec.bogus was not pruned")
		}
		if _, ok := got.Object["unknownTop"]; ok {
			t.Error("unknownTop was not pruned")
		}
		if spec["color"] != "blue" || spec["maxReplicas"] != int64(10) {
			t.Errorf("defaults not applied: %v", spec)
		}
		if spec["free"].(map[string]any)["any"] != "thing" || spec["port"] != "http" {
			t.Errorf("preserved / int-or-string fields changed: %v", spec)
		}
		if got.GetGeneration() != 1 {
			t.Errorf("generation = %d", got.GetGeneration())
		}
	})

	t.Run("unknown fields: Warn and Strict", func(t *testing.T) {
		body := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w-warn"},"spec":{"immutableID":"a","bogus":1}}`
		code, h, data := e.do(t, http.MethodPost, "/apis/example.com/v1/namespaces/default/widgets", "application/json", "", body)
		if code != http.StatusCreated || !strings.Contains(strings.Join(h.Values("Warning"), ";"), `unknown field \"spec.bogus\"`) {
			t.Fatalf("Warn: %d %v %s", code, h.Values("Warning"), data)
		}
		body = strings.Replace(body, "w-warn", "w-strict", 1)
		code, _, data = e.do(t, http.MethodPost, "/apis/example.com/v1/namespaces/default/widgets?fieldValidation=Strict", "application/json", "", body)
		if st := status(t, data); code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest || !strings.Contains(st.Message, `strict decoding error: unknown field "spec.bogus"`) {
			t.Fatalf("Strict: %d %s", code, data)
		}
		if _, err := e.dyn.Resource(widgetsResource).Namespace("default").Get(ctx, "w-strict", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("refused object stored: %v", err)
		}
	})

	t.Run("schema and CEL validation", func(t *testing.T) {
		cases := []struct {
			name   string
			spec   map[string]any
			fields []string
			msg    string
		}{
			{"wrong type", map[string]any{"immutableID": "a", "replicas": "three"}, []string{"spec.replicas"}, "must be of type integer"},
			{"minimum", map[string]any{"immutableID": "a", "replicas": int64(-1)}, []string{"spec.replicas"}, "should be greater than or equal to 0"},
			{"enum", map[string]any{"immutableID": "a", "color": "green"}, []string{"spec.color"}, "Unsupported value"},
			{"required", map[string]any{"replicas": int64(1)}, []string{"spec.immutableID"}, "Required value"},
			{"CEL messageExpression", map[string]any{"immutableID": "a", "replicas": int64(11)}, []string{"spec"}, "a: replicas must not exceed maxReplicas"},
			{"list-type map duplicate", map[string]any{"immutableID": "a", "ports": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}}}, []string{"spec.ports[1]"}, "Duplicate value"},
			{"embedded resource", map[string]any{"immutableID": "a", "template": map[string]any{"metadata": map[string]any{"name": "x"}}}, []string{"spec.template.apiVersion", "spec.template.kind"}, "Required value"},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				name := "bad-" + string(rune('a'+i))
				_, err := e.dyn.Resource(widgetsResource).Namespace("default").Create(ctx, widget(name, c.spec), metav1.CreateOptions{})
				var se *apierrors.StatusError
				if !apierrors.IsInvalid(err) || !asStatus(err, &se) {
					t.Fatalf("want 422 Invalid, got %v", err)
				}
				got := causeFields(se.ErrStatus)
				for _, f := range c.fields {
					if !slices.Contains(got, f) {
						t.Errorf("cause fields %v lack %s (%s)", got, f, se.ErrStatus.Message)
					}
				}
				if !strings.Contains(se.ErrStatus.Message, c.msg) {
					t.Errorf("message %q lacks %q", se.ErrStatus.Message, c.msg)
				}
				if _, err := e.dyn.Resource(widgetsResource).Namespace("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Fatalf("refused object stored: %v", err)
				}
			})
		}
	})

	t.Run("CEL transition rule and generation", func(t *testing.T) {
		w := widget("w-trans", map[string]any{"immutableID": "a", "replicas": int64(1)})
		got, err := e.dyn.Resource(widgetsResource).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		changed := got.DeepCopy()
		_ = unstructured.SetNestedField(changed.Object, "b", "spec", "immutableID")
		if _, err := e.dyn.Resource(widgetsResource).Namespace("default").Update(ctx, changed, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutableID is immutable") {
			t.Fatalf("transition rule: %v", err)
		}
		_ = unstructured.SetNestedField(got.Object, int64(3), "spec", "replicas")
		up, err := e.dyn.Resource(widgetsResource).Namespace("default").Update(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if up.GetGeneration() != 2 {
			t.Fatalf("generation after a spec change = %d", up.GetGeneration())
		}
		up.SetLabels(map[string]string{"a": "b"})
		up2, err := e.dyn.Resource(widgetsResource).Namespace("default").Update(ctx, up, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if up2.GetGeneration() != 2 {
			t.Fatalf("generation after a metadata change = %d", up2.GetGeneration())
		}
	})

	t.Run("status and scale subresources", func(t *testing.T) {
		w := widget("w-sub", map[string]any{"immutableID": "a", "replicas": int64(1)})
		w.Object["status"] = map[string]any{"phase": "ignored"}
		got, err := e.dyn.Resource(widgetsResource).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Object["status"]; ok {
			t.Fatal("create set status")
		}
		got.Object["status"] = map[string]any{"phase": "Ready", "replicas": int64(1), "selector": "app=w"}
		_ = unstructured.SetNestedField(got.Object, int64(5), "spec", "replicas")
		st, err := e.dyn.Resource(widgetsResource).Namespace("default").UpdateStatus(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p, _, _ := unstructured.NestedString(st.Object, "status", "phase"); p != "Ready" {
			t.Fatalf("status not written: %v", st.Object["status"])
		}
		if r, _, _ := unstructured.NestedInt64(st.Object, "spec", "replicas"); r != 1 {
			t.Fatalf("a status update changed spec.replicas to %d", r)
		}
		scale, err := e.dyn.Resource(widgetsResource).Namespace("default").Get(ctx, "w-sub", metav1.GetOptions{}, "scale")
		if err != nil {
			t.Fatal(err)
		}
		if scale.GetKind() != "Scale" || scale.Object["status"].(map[string]any)["selector"] != "app=w" {
			t.Fatalf("scale %v", scale.Object)
		}
		_ = unstructured.SetNestedField(scale.Object, int64(4), "spec", "replicas")
		if _, err := e.dyn.Resource(widgetsResource).Namespace("default").Update(ctx, scale, metav1.UpdateOptions{}, "scale"); err != nil {
			t.Fatal(err)
		}
		after, err := e.dyn.Resource(widgetsResource).Namespace("default").Get(ctx, "w-sub", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(after.Object, "spec", "replicas"); r != 4 {
			t.Fatalf("scale did not set spec.replicas: %d", r)
		}
	})

	t.Run("printer columns", func(t *testing.T) {
		code, _, data := e.do(t, http.MethodGet, "/apis/example.com/v1/namespaces/default/widgets", "", "application/json;as=Table;v=v1;g=meta.k8s.io", "")
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, data)
		}
		var table metav1.Table
		if err := json.Unmarshal(data, &table); err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		if !slices.Equal(cols, []string{"Name", "Color", "Replicas"}) {
			t.Fatalf("columns %v", cols)
		}
		if len(table.Rows) == 0 || table.Rows[0].Cells[1] != "blue" {
			t.Fatalf("rows %v", table.Rows)
		}
	})

	t.Run("selectable fields", func(t *testing.T) {
		if _, err := e.dyn.Resource(widgetsResource).Namespace("default").Create(ctx, widget("w-red", map[string]any{"immutableID": "a", "color": "red"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		list, err := e.dyn.Resource(widgetsResource).Namespace("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.color=red"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].GetName() != "w-red" {
			t.Fatalf("spec.color=red selected %d items", len(list.Items))
		}
		if _, err := e.dyn.Resource(widgetsResource).Namespace("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.replicas=1"}); !apierrors.IsBadRequest(err) {
			t.Fatalf("unsupported field selector: %v", err)
		}
	})

	t.Run("versions", func(t *testing.T) {
		code, h, data := e.do(t, http.MethodGet, "/apis/example.com/v1beta1/namespaces/default/widgets/w1", "", "application/json", "")
		if code != http.StatusOK || !strings.Contains(strings.Join(h.Values("Warning"), ";"), "example.com/v1beta1 Widget is deprecated") {
			t.Fatalf("v1beta1: %d %v %s", code, h.Values("Warning"), data)
		}
		var u unstructured.Unstructured
		if err := json.Unmarshal(data, &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetAPIVersion() != "example.com/v1beta1" {
			t.Fatalf("read through v1beta1 as %s", u.GetAPIVersion())
		}
		code, _, data = e.do(t, http.MethodGet, "/apis/example.com/v0/namespaces/default/widgets", "", "", "")
		if code != http.StatusNotFound {
			t.Fatalf("unserved version: %d %s", code, data)
		}
	})

	t.Run("protobuf refused", func(t *testing.T) {
		code, _, data := e.do(t, http.MethodGet, "/apis/example.com/v1/namespaces/default/widgets/w1", "", "application/vnd.kubernetes.protobuf", "")
		if code != http.StatusNotAcceptable {
			t.Fatalf("Accept protobuf: %d %s", code, data)
		}
		code, _, data = e.do(t, http.MethodPost, "/apis/example.com/v1/namespaces/default/widgets", "application/vnd.kubernetes.protobuf", "", "k8s\x00")
		if code != http.StatusUnsupportedMediaType {
			t.Fatalf("protobuf body: %d %s", code, data)
		}
		code, _, data = e.do(t, http.MethodPatch, "/apis/example.com/v1/namespaces/default/widgets/w1", "application/strategic-merge-patch+json", "", "{}")
		if code != http.StatusUnsupportedMediaType {
			t.Fatalf("strategic merge patch: %d %s", code, data)
		}
	})

	t.Run("delete CRD removes objects and routes", func(t *testing.T) {
		obj, err := e.dyn.Resource(widgetsResource).Namespace("default").Create(ctx, widget("w-fin", map[string]any{"immutableID": "a"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj.SetFinalizers([]string{"example.com/hold"})
		if _, err := e.dyn.Resource(widgetsResource).Namespace("default").Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The object with a finalizer holds the CRD in Terminating; creates are refused.
		err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			c, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			t := apiextensionshelpers.FindCRDCondition(c, apiextensionsv1.Terminating)
			return t != nil && t.Reason == "InstanceDeletionInProgress", nil
		})
		if err != nil {
			t.Fatalf("CRD never reported InstanceDeletionInProgress: %v", err)
		}
		if _, err := e.dyn.Resource(widgetsResource).Namespace("default").Create(ctx, widget("w-late", map[string]any{"immutableID": "a"}), metav1.CreateOptions{}); !apierrors.IsMethodNotSupported(err) {
			t.Fatalf("create while terminating: %v", err)
		}
		held, err := e.dyn.Resource(widgetsResource).Namespace("default").Get(ctx, "w-fin", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		held.SetFinalizers(nil)
		if _, err := e.dyn.Resource(widgetsResource).Namespace("default").Update(ctx, held, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("CRD not deleted: %v", err)
		}
		err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			code, _, _ := e.do(t, http.MethodGet, "/apis/example.com/v1/namespaces/default/widgets", "", "", "")
			return code == http.StatusNotFound, nil
		})
		if err != nil {
			t.Fatal("widgets still served after the CRD is gone")
		}
		// Nothing left in etcd under the CRD's prefix.
		resp, err := e.srv.EtcdClient(t).Get(ctx, "/registry/example.com/widgets/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count != 0 {
			t.Fatalf("%d objects left in etcd", resp.Count)
		}
	})
}

func asStatus(err error, out **apierrors.StatusError) bool {
	se, ok := err.(*apierrors.StatusError)
	*out = se
	return ok
}
