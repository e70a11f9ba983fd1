package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
)

// plainStrategy is a strategy with no defaults and no validation of its own.
type plainStrategy struct{}

func (plainStrategy) Default(runtime.Object)                                           {}
func (plainStrategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (plainStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (plainStrategy) Validate(context.Context, runtime.Object) field.ErrorList         { return nil }
func (plainStrategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}

// hpaDefinition is autoscaling/v1 HorizontalPodAutoscalers stored on their own: a
// resource a server gains at run time (the test first takes away the built-in ones).
func hpaDefinition() endpoints.Definition {
	return endpoints.Definition{Resource: &registry.Resource{
		GroupVersion: autoscalingv1.SchemeGroupVersion, Name: "horizontalpodautoscalers", SingularName: "horizontalpodautoscaler",
		Kind: "HorizontalPodAutoscaler", ListKind: "HorizontalPodAutoscalerList", ShortNames: []string{"hpa"}, Categories: []string{"all"},
		Namespaced: true, NewFunc: func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscaler{} },
		NewListFunc:   func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscalerList{} },
		Strategy:      plainStrategy{},
		StoragePrefix: "/registry/dynamic-test/horizontalpodautoscalers", AllowUnconditionalUpdate: true,
	}}
}

// get fetches path with accept, returning status, ETag and body.
func get(t *testing.T, c *http.Client, base, path, accept string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("ETag"), string(body)
}

const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

// servedState is what clients see of autoscaling/v1 at one moment.
type servedState struct {
	legacy, aggregated, openAPIv2, openAPIv3 bool
	etag                                     string
}

func observe(t *testing.T, srv *testserver.Server, cs kubernetes.Interface) servedState {
	t.Helper()
	var s servedState
	list, err := cs.Discovery().ServerResourcesForGroupVersion("autoscaling/v1")
	switch {
	case err == nil:
		for _, r := range list.APIResources {
			s.legacy = s.legacy || r.Name == "horizontalpodautoscalers"
		}
	case !apierrors.IsNotFound(err):
		t.Fatalf("legacy discovery: %v", err)
	}
	c := srv.HTTPClient(t)
	code, etag, body := get(t, c, srv.URL(), "/apis", aggregatedAccept)
	if code != http.StatusOK || etag == "" {
		t.Fatalf("aggregated /apis: %d etag %q", code, etag)
	}
	s.etag = etag
	s.aggregated = strings.Contains(body, `"horizontalpodautoscalers"`)
	_, _, body = get(t, c, srv.URL(), "/openapi/v2", "application/json")
	s.openAPIv2 = strings.Contains(body, "/apis/autoscaling/v1/namespaces/{namespace}/horizontalpodautoscalers")
	_, _, body = get(t, c, srv.URL(), "/openapi/v3", "application/json")
	s.openAPIv3 = strings.Contains(body, `"apis/autoscaling/v1"`)
	return s
}

// TestAddRemoveResource: a resource added to a running server is served, discovered
// (legacy and aggregated, with a new ETag) and documented in OpenAPI at once; removed, it
// is gone from all of them, and added again it finds its stored objects.
func TestAddRemoveResource(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ctx := ctxFor(t)
	ns := newNamespace(t, cs, "dynamic")
	api := srv.APIServer()
	hpas := cs.AutoscalingV1().HorizontalPodAutoscalers(ns)
	// HorizontalPodAutoscalers are built in: both versions go first (v1 is a view of v2).
	for _, v := range []string{"v1", "v2"} {
		if err := api.RemoveResource(schema.GroupVersionResource{Group: "autoscaling", Version: v, Resource: "horizontalpodautoscalers"}); err != nil {
			t.Fatalf("removing the built-in autoscaling/%s: %v", v, err)
		}
	}

	before := observe(t, srv, cs)
	if before.legacy || before.aggregated || before.openAPIv2 || before.openAPIv3 {
		t.Fatalf("autoscaling/v1 served before it was added: %+v", before)
	}
	if _, err := hpas.List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("list before add: %v, want NotFound", err)
	}

	if err := api.AddResource(hpaDefinition()); err != nil {
		t.Fatalf("adding: %v", err)
	}
	if err := api.AddResource(hpaDefinition()); err == nil {
		t.Fatal("adding the same resource twice succeeded")
	}
	added := observe(t, srv, cs)
	if !added.legacy || !added.aggregated || !added.openAPIv2 || !added.openAPIv3 || added.etag == before.etag {
		t.Fatalf("after add: %+v (etag before %s), want served everywhere with a new ETag", added, before.etag)
	}
	hpa := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3,
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web", APIVersion: "apps/v1"}}}
	created, err := hpas.Create(ctx, hpa, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}

	if err := api.RemoveResource(autoscalingv1.SchemeGroupVersion.WithResource("horizontalpodautoscalers")); err != nil {
		t.Fatalf("removing: %v", err)
	}
	removed := observe(t, srv, cs)
	if removed.legacy || removed.aggregated || removed.openAPIv2 || removed.openAPIv3 || removed.etag == added.etag {
		t.Fatalf("after remove: %+v, want gone everywhere with a new ETag", removed)
	}
	if _, err := hpas.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after remove: %v, want NotFound", err)
	}

	if err := api.AddResource(hpaDefinition()); err != nil {
		t.Fatalf("adding again: %v", err)
	}
	got, err := hpas.Get(ctx, "web", metav1.GetOptions{})
	if err != nil || got.UID != created.UID {
		t.Fatalf("get after adding again: %v (uid %v), want the stored object %v", err, got.GetUID(), created.UID)
	}
}
