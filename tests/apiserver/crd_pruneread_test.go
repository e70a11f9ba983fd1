package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// pruneCRD is a cluster-scoped CRD with two versions (v1 stored, v2 served, conversion
// None) whose schemas the test then narrows: the printer columns show a field that is
// dropped and one that gains a default.
func pruneCRD() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"a": str, "b": str, "c": str, "d": str, "e": str,
		"n": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"x": str, "y": str}},
	}}
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": *spec.DeepCopy()}}},
			AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
				{Name: "B", Type: "string", JSONPath: ".spec.b"},
				{Name: "D", Type: "string", JSONPath: ".spec.d"},
				{Name: "E", Type: "string", JSONPath: ".spec.e"},
			},
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "trims.prune.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "prune.example.com", Scope: apiextensionsv1.ClusterScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "trims", Singular: "trim", Kind: "Trim", ListKind: "TrimList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true), version("v2", false)},
		},
	}
}

// narrowSchemas is the CRD change: v1 forgets spec.b and spec.n.y and gains a default
// for spec.d; v2 forgets spec.c and gains a default for spec.e.
func narrowSchemas(crd *apiextensionsv1.CustomResourceDefinition) {
	for i := range crd.Spec.Versions {
		spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		n := spec.Properties["n"]
		switch crd.Spec.Versions[i].Name {
		case "v1":
			delete(spec.Properties, "b")
			delete(n.Properties, "y")
			d := spec.Properties["d"]
			d.Default = &apiextensionsv1.JSON{Raw: []byte(`"D"`)}
			spec.Properties["d"] = d
		case "v2":
			delete(spec.Properties, "c")
			e := spec.Properties["e"]
			e.Default = &apiextensionsv1.JSON{Raw: []byte(`"E"`)}
			spec.Properties["e"] = e
		}
		spec.Properties["n"] = n
		crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
}

// rawClient reads a server's API over HTTP, as any client does.
type rawClient struct {
	host string
	c    *http.Client
}

func newRawClient(t *testing.T, cfg *rest.Config) *rawClient {
	t.Helper()
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rawClient{host: strings.TrimSuffix(cfg.Host, "/"), c: c}
}

func (r *rawClient) request(ctx context.Context, method, path, contentType, accept, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.host+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return r.c.Do(req)
}

// call sends a request and decodes the JSON answer, failing on any status but 200/201.
func (r *rawClient) call(t *testing.T, method, path, contentType, accept, body string) map[string]any {
	t.Helper()
	resp, err := r.request(context.Background(), method, path, contentType, accept, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, data)
	}
	return out
}

// canonical is an object as the comparison sees it: what differs between two servers by
// nature (uid, resourceVersion, timestamps, managedFields) is dropped.
func canonical(obj any) string {
	if m, ok := obj.(map[string]any); ok {
		if md, ok := m["metadata"].(map[string]any); ok {
			keep := map[string]any{}
			for _, k := range []string{"name", "labels", "generation"} {
				if v, ok := md[k]; ok {
					keep[k] = v
				}
			}
			m["metadata"] = keep
		}
	}
	data, _ := json.Marshal(obj)
	return string(data)
}

// runPruneOnRead creates objects, narrows the CRD's schemas and reads the objects back
// in both versions through get, list (several page sizes), Table and watch, returning one
// line per answer.
func runPruneOnRead(t *testing.T, cfg *rest.Config) []string {
	t.Helper()
	ctx := context.Background()
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := newRawClient(t, cfg)
	crd := pruneCRD()
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	base := func(v string) string { return "/apis/prune.example.com/" + v + "/trims" }
	trim := func(v, name string) string {
		return fmt.Sprintf(`{"apiVersion":"prune.example.com/%s","kind":"Trim","metadata":{"name":%q},
			"spec":{"a":"a-%[2]s","b":"b-%[2]s","c":"c-%[2]s","n":{"x":"x","y":"y"}}}`, v, name)
	}
	// Established and served (a fresh CRD takes a moment on kube-apiserver).
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil || !apiextensionshelpers.IsCRDConditionTrue(c, apiextensionsv1.Established) {
			return false, nil
		}
		resp, err := r.request(ctx, http.MethodPost, base("v1"), "application/json", "", trim("v1", "t1"))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusCreated, nil
	})
	if err != nil {
		t.Fatalf("trims never served: %v", err)
	}
	for _, name := range []string{"t2", "t3", "t4"} {
		r.call(t, http.MethodPost, base("v1"), "application/json", "", trim("v1", name))
	}
	r.call(t, http.MethodPost, base("v2"), "application/json", "", trim("v2", "t5"))

	cur, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	narrowSchemas(cur)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The new schemas are in force once a get no longer shows spec.b.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, v := range []string{"v1", "v2"} {
			obj := r.call(t, http.MethodGet, base(v)+"/t1", "", "application/json", "")
			if _, ok := obj["spec"].(map[string]any)["b"]; ok {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the narrowed schema never took effect: %v", err)
	}

	var out []string
	for _, v := range []string{"v1", "v2"} {
		for _, name := range []string{"t1", "t2", "t3", "t4", "t5"} {
			out = append(out, fmt.Sprintf("GET %s %s: %s", v, name, canonical(r.call(t, http.MethodGet, base(v)+"/"+name, "", "application/json", ""))))
		}
		for _, limit := range []int{0, 1, 2, 3} {
			var items []string
			cont := ""
			for {
				q := url.Values{}
				if limit > 0 {
					q.Set("limit", fmt.Sprint(limit))
				}
				if cont != "" {
					q.Set("continue", cont)
				}
				l := r.call(t, http.MethodGet, base(v)+"?"+q.Encode(), "", "application/json", "")
				for _, it := range l["items"].([]any) {
					items = append(items, canonical(it))
				}
				cont, _ = l["metadata"].(map[string]any)["continue"].(string)
				if cont == "" {
					break
				}
			}
			out = append(out, fmt.Sprintf("LIST %s limit=%d: %s", v, limit, strings.Join(items, " ")))
		}
		table := r.call(t, http.MethodGet, base(v), "", "application/json;as=Table;v=v1;g=meta.k8s.io", "")
		var rows []string
		for _, row := range table["rows"].([]any) {
			cells, _ := json.Marshal(row.(map[string]any)["cells"])
			rows = append(rows, string(cells))
		}
		out = append(out, fmt.Sprintf("TABLE %s: %s", v, strings.Join(rows, " ")))
	}

	// Watches from "0" in both versions: the initial events, then the event of a label
	// written through v2 after the schema change (the object is written back pruned).
	type watched struct {
		lines chan string
		stop  context.CancelFunc
	}
	watches := map[string]watched{}
	for _, v := range []string{"v1", "v2"} {
		wctx, cancel := context.WithCancel(ctx)
		resp, err := r.request(wctx, http.MethodGet, base(v)+"?watch=1&resourceVersion=0", "", "application/json", "")
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			cancel()
			t.Fatalf("watch %s: %d", v, resp.StatusCode)
		}
		lines := make(chan string, 100)
		go func() {
			defer resp.Body.Close()
			defer close(lines)
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var ev struct {
					Type   string         `json:"type"`
					Object map[string]any `json:"object"`
				}
				if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type != "BOOKMARK" {
					lines <- ev.Type + " " + canonical(ev.Object)
				}
			}
		}()
		watches[v] = watched{lines: lines, stop: cancel}
	}
	patched := r.call(t, http.MethodPatch, base("v2")+"/t1", "application/merge-patch+json", "application/json", `{"metadata":{"labels":{"touched":"yes"}}}`)
	out = append(out, "PATCH v2 t1: "+canonical(patched))
	for _, v := range []string{"v1", "v2"} {
		w := watches[v]
		var events []string
		timeout := time.After(30 * time.Second)
		for len(events) < 6 {
			select {
			case l, ok := <-w.lines:
				if !ok {
					t.Fatalf("watch %s ended after %d events: %q", v, len(events), events)
				}
				events = append(events, l)
			case <-timeout:
				t.Fatalf("watch %s: %d events in 30s: %q", v, len(events), events)
			}
		}
		w.stop()
		// The initial events come in no promised order.
		slices.Sort(events[:5])
		for _, e := range events {
			out = append(out, fmt.Sprintf("WATCH %s %s", v, e))
		}
	}
	out = append(out, "GET v1 t1 after the patch: "+canonical(r.call(t, http.MethodGet, base("v1")+"/t1", "", "application/json", "")))
	return out
}

// TestPruneOnRead: objects stored before their CRD's schema narrowed are served pruned by
// the schema in force and defaulted, by get, list (every page size), Table and watch, in
// both versions of the CRD — and, when the real control plane is at hand, exactly as
// kube-apiserver serves them.
func TestPruneOnRead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and narrows a CRD's schema (several seconds)")
	}
	got := runPruneOnRead(t, testserver.StartAPI(t).Config(true))
	// What kube-apiserver's storage decoder does: prune and default by the stored
	// version's schema (v1: spec.b and spec.n.y gone, spec.d defaulted), convert, prune by
	// the version read (v2 also loses spec.c and d, and gets no default of its own).
	// What kube-apiserver v1.37.2 answers: its storage decoder prunes and defaults by the
	// stored version's schema (v1: spec.b and spec.n.y gone, spec.d defaulted), converts,
	// and prunes by the version read (v2 also loses spec.c and gets no default of its own;
	// t1, written through v2 after the change, has v2's default stored).
	for _, want := range []string{
		`GET v1 t2: {"apiVersion":"prune.example.com/v1","kind":"Trim","metadata":{"generation":1,"name":"t2"},"spec":{"a":"a-t2","c":"c-t2","d":"D","n":{"x":"x"}}}`,
		`GET v2 t2: {"apiVersion":"prune.example.com/v2","kind":"Trim","metadata":{"generation":1,"name":"t2"},"spec":{"a":"a-t2","d":"D","n":{"x":"x"}}}`,
		`TABLE v1: ["t1",null,"D",null] ["t2",null,"D",null] ["t3",null,"D",null] ["t4",null,"D",null] ["t5",null,"D",null]`,
		`WATCH v2 ADDED {"apiVersion":"prune.example.com/v2","kind":"Trim","metadata":{"generation":1,"name":"t5"},"spec":{"a":"a-t5","d":"D","n":{"x":"x"}}}`,
		`WATCH v1 MODIFIED {"apiVersion":"prune.example.com/v1","kind":"Trim","metadata":{"generation":2,"labels":{"touched":"yes"},"name":"t1"},"spec":{"a":"a-t1","d":"D","e":"E","n":{"x":"x"}}}`,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no answer %s", want)
		}
	}
	for _, l := range got {
		if strings.Contains(l, `"b":"b-`) || strings.Contains(l, `"y":"y"`) {
			t.Errorf("a field the stored version's schema no longer has is served: %s", l)
		}
	}
	kcfg, ok := startKubeAPIServer(t)
	if !ok {
		return
	}
	want := runPruneOnRead(t, kcfg)
	if len(got) != len(want) {
		t.Fatalf("wasmplane answered %d times, kube-apiserver %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("\n wasmplane      %s\n kube-apiserver %s", got[i], want[i])
		}
	}
}

// TestWatchEndsWhenSchemaChanges: a watch opened before the CRD's schema changed ends,
// as kube-apiserver ends it when it replaces the CRD's storage, and the watch the client
// opens again reads by the new schema.
func TestWatchEndsWhenSchemaChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and changes a CRD's schema (several seconds)")
	}
	e := newCRDEnv(t, testserver.StartAPI(t))
	ctx := context.Background()
	crd := simpleCRD("knobs", "Knob", "watchprune.example.com", apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"keep": {Type: "string"}, "drop": {Type: "string"}}})
	e.establish(t, crd)
	client := e.dyn.Resource(schema.GroupVersionResource{Group: "watchprune.example.com", Version: "v1", Resource: "knobs"})
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "watchprune.example.com/v1", "kind": "Knob",
		"metadata": map[string]any{"name": "k"}, "spec": map[string]any{"keep": "1", "drop": "2"}}}
	created, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: created.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/drop"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-w.ResultChan():
		case <-timeout:
			t.Fatal("the watch opened before the schema changed did not end")
		}
	}
	// The watch may end before the new schema serves; a watch opened in between would end
	// too. Reads prune by the new schema once it serves.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.Get(ctx, "k", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, found, _ := unstructured.NestedString(got.Object, "spec", "drop")
		return !found, nil
	})
	if err != nil {
		t.Fatalf("reads still carry the dropped field: %v", err)
	}
	again, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: created.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	if _, err := client.Patch(ctx, "k", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-again.ResultChan():
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type != watch.Modified {
			t.Fatalf("event %s %T", ev.Type, ev.Object)
		}
		if spec, _, _ := unstructured.NestedMap(u.Object, "spec"); !reflect.DeepEqual(spec, map[string]any{"keep": "1"}) {
			t.Errorf("spec after the schema change: %v, want only keep", spec)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event on the new watch")
	}
}
