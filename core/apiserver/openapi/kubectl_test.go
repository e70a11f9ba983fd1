package openapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi/cached"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/kubectl/pkg/explain"
	explainv2 "k8s.io/kubectl/pkg/explain/v2"
	kubectlopenapi "k8s.io/kubectl/pkg/util/openapi"
)

// kubectlServer serves the OpenAPI handlers plus the legacy discovery documents kubectl
// needs to map "pods" and "deployments" to resources.
func kubectlServer(t *testing.T) *rest.Config {
	t.Helper()
	svc := newTestService(t)
	mux := http.NewServeMux()
	mux.Handle("/openapi/v2", svc.V2())
	mux.Handle("/openapi/v3", svc.V3())
	mux.Handle("/openapi/v3/", svc.V3())
	serveJSON := func(path string, v any) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		})
	}
	verbs := metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	serveJSON("/api", metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
	serveJSON("/api/v1", metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: verbs, ShortNames: []string{"po"}},
			{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get", "patch", "update"}},
		}})
	appsGV := metav1.GroupVersionForDiscovery{GroupVersion: "apps/v1", Version: "v1"}
	serveJSON("/apis", metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups: []metav1.APIGroup{{Name: "apps", Versions: []metav1.GroupVersionForDiscovery{appsGV}, PreferredVersion: appsGV}}})
	serveJSON("/apis/apps/v1", metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "apps/v1",
		APIResources: []metav1.APIResource{{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment", Verbs: verbs, ShortNames: []string{"deploy"}}}})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// explainLike runs what `kubectl explain <arg> [--api-version=...]` runs
// (k8s.io/kubectl/pkg/cmd/explain ExplainOptions.Run with the default plaintext output).
func explainLike(t *testing.T, cfg *rest.Config, arg, apiVersion string) (string, error) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	var gvr schema.GroupVersionResource
	var fields []string
	if apiVersion == "" {
		gvr, fields, err = explain.SplitAndParseResourceRequestWithMatchingPrefix(arg, mapper)
	} else {
		gvr, fields, err = explain.SplitAndParseResourceRequest(arg, mapper)
	}
	if err != nil {
		return "", err
	}
	client := cached.NewClient(dc.OpenAPIV3())
	if _, err := client.Paths(); err != nil {
		t.Fatalf("kubectl would fall back to OpenAPI v2: %v", err)
	}
	if apiVersion != "" {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			t.Fatal(err)
		}
		gvr.Group, gvr.Version = gv.Group, gv.Version
	}
	var out bytes.Buffer
	err = explainv2.PrintModelDescription(fields, &out, client, gvr, false, 0, "plaintext")
	return out.String(), err
}

func TestKubectlExplain(t *testing.T) {
	cfg := kubectlServer(t)
	for _, tc := range []struct {
		arg, apiVersion string
		want            []string
	}{
		{arg: "pods", want: []string{
			"KIND:       Pod\nVERSION:    v1\n",
			"DESCRIPTION:\n    Pod is a collection of containers that can run on a host.",
			"FIELDS:\n  apiVersion\t<string>\n",
			"  metadata\t<ObjectMeta>\n    Standard object's metadata.",
			"  spec\t<PodSpec>\n",
			"  status\t<PodStatus>\n",
		}},
		{arg: "pods.spec.containers", want: []string{
			"KIND:       Pod\nVERSION:    v1\n",
			"FIELD: containers <[]Container>\n",
			"DESCRIPTION:\n    List of containers belonging to the pod.",
			// Container's own description follows the field's.
			"A single application container that you want to run within a pod.",
			"  image\t<string>\n",
			"  name\t<string> -required-\n",
			"  ports\t<[]ContainerPort>\n",
			"  resources\t<ResourceRequirements>\n",
		}},
		{arg: "pods.spec.containers.resources.limits", want: []string{
			"FIELD: limits <map[string]Quantity>\n",
			"Limits describes the maximum amount of compute resources allowed.",
		}},
		{arg: "pods.metadata.creationTimestamp", want: []string{"FIELD: creationTimestamp <string>\n"}},
		{arg: "deployments", apiVersion: "apps/v1", want: []string{
			"GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n",
			"DESCRIPTION:\n    Deployment enables declarative updates for Pods and ReplicaSets.",
			"  spec\t<DeploymentSpec>\n",
		}},
		{arg: "deployments.spec.strategy.rollingUpdate.maxSurge", want: []string{
			"FIELD: maxSurge <IntOrString>\n",
			"The maximum number of pods that can be scheduled above the desired number",
		}},
		{arg: "deployments.spec.template.spec.containers.livenessProbe", want: []string{
			"FIELD: livenessProbe <Probe>\n",
			"  httpGet\t<HTTPGetAction>\n",
		}},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			out, err := explainLike(t, cfg, tc.arg, tc.apiVersion)
			if err != nil {
				t.Fatalf("explain: %v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "<no description>") && tc.arg == "pods" {
				t.Errorf("undocumented field:\n%s", out)
			}
		})
	}
	if _, err := explainLike(t, cfg, "pods.spec.bogus", ""); err == nil || !strings.Contains(err.Error(), `field "bogus" does not exist`) {
		t.Errorf("unknown field: %v", err)
	}
}

func TestKubectlServerSideFieldValidation(t *testing.T) {
	cfg := kubectlServer(t)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v3 := resource.NewQueryParamVerifierV3(dyn, cached.NewClient(dc.OpenAPIV3()), resource.QueryParamFieldValidation)
	v2 := resource.NewQueryParamVerifier(dyn, kubectlopenapi.NewOpenAPIGetter(dc), resource.QueryParamFieldValidation)
	for _, gvk := range []schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("Pod"),
		appsv1.SchemeGroupVersion.WithKind("Deployment"),
		corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	} {
		if err := v3.HasSupport(gvk); err != nil {
			t.Errorf("v3 verifier: %v: %v", gvk, err)
		}
		if err := v2.HasSupport(gvk); err != nil {
			t.Errorf("v2 verifier: %v: %v", gvk, err)
		}
	}
	// A kind the server does not serve (a version Kubernetes removed) must not be reported
	// as supported.
	if err := v3.HasSupport(schema.GroupVersionKind{Group: "apps", Version: "v1beta1", Kind: "Deployment"}); err == nil {
		t.Error("v3 verifier claims support for an unserved kind")
	}
	// kubectl apply/diff look up specs through openapi3.Root as well.
	root := openapi3.NewRoot(cached.NewClient(dc.OpenAPIV3()))
	gvs, err := root.GroupVersions()
	if err != nil || len(gvs) != 4 {
		t.Errorf("GroupVersions = %v, %v", gvs, err)
	}
	doc, err := root.GVSpec(appsv1.SchemeGroupVersion)
	if err != nil || doc.Components.Schemas["io.k8s.api.apps.v1.Deployment"] == nil {
		t.Errorf("GVSpec(apps/v1): %v", err)
	}
}

// TestKubectlApplyPatchMetadata checks that client-side `kubectl apply` finds the
// strategic-merge metadata (patch strategy and merge keys) through both documents.
func TestKubectlApplyPatchMetadata(t *testing.T) {
	cfg := kubectlServer(t)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	original := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[{"name":"a","image":"a:1"},{"name":"b","image":"b:1"}]}}}}`)
	modified := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[{"name":"a","image":"a:2"},{"name":"b","image":"b:1"}]}}}}`)
	current := original
	// With merge keys the patch addresses container "a" by name; without them it would
	// replace the whole list.
	check := func(what string, meta strategicpatch.LookupPatchMeta) {
		patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, meta, false)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !strings.Contains(string(patch), `"$setElementOrder/containers":[{"name":"a"},{"name":"b"}]`) || !strings.Contains(string(patch), `{"image":"a:2","name":"a"}`) {
			t.Errorf("%s: patch does not use the containers merge key: %s", what, patch)
		}
	}

	root := openapi3.NewRoot(cached.NewClient(dc.OpenAPIV3()))
	gvSpec, err := root.GVSpec(appsv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	check("v3", strategicpatch.PatchMetaFromOpenAPIV3{Schema: gvSpec.Components.Schemas["io.k8s.api.apps.v1.Deployment"], SchemaList: gvSpec.Components.Schemas})

	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	resources, err := kubectlopenapi.NewOpenAPIData(doc)
	if err != nil {
		t.Fatal(err)
	}
	check("v2", strategicpatch.NewPatchMetaFromOpenAPI(resources.LookupResource(appsv1.SchemeGroupVersion.WithKind("Deployment"))))
}
