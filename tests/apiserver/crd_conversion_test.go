package apiserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
)

// conversionWebhook converts gadgets between v1 (spec.size, a string) and v2
// (spec.replicas, an integer), answering ConversionReview v1 as a real webhook does.
type conversionWebhook struct {
	url, ca string
	calls   atomic.Int64
	srv     *httptest.Server
}

func startConversionWebhook(t *testing.T) *conversionWebhook {
	t.Helper()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	w := &conversionWebhook{ca: string(certPEM)}
	w.srv = httptest.NewUnstartedServer(http.HandlerFunc(w.serve))
	w.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	w.srv.StartTLS()
	t.Cleanup(w.srv.Close)
	w.url = w.srv.URL + "/convert"
	return w
}

func (w *conversionWebhook) serve(rw http.ResponseWriter, r *http.Request) {
	w.calls.Add(1)
	review := &apiextensionsv1.ConversionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		switch review.Request.DesiredAPIVersion {
		case "conv.example.com/v2":
			if s, ok := spec["size"].(string); ok {
				n, _ := strconv.Atoi(s)
				delete(spec, "size")
				spec["replicas"] = int64(n)
			}
		case "conv.example.com/v1":
			if n, ok := spec["replicas"].(int64); ok {
				delete(spec, "replicas")
				spec["size"] = strconv.FormatInt(n, 10)
			}
		}
		if spec != nil {
			_ = unstructured.SetNestedMap(u.Object, spec, "spec")
		}
		u.SetAPIVersion(review.Request.DesiredAPIVersion)
		b, _ := u.MarshalJSON()
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	review.Response, review.Request = resp, nil
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review)
}

func gadgetsCRD(w *conversionWebhook) *apiextensionsv1.CustomResourceDefinition {
	schemaOf := func(field string, typ string) *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: typ}}}}}}
	}
	return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gadgets.conv.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "conv.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaOf("size", "string")},
				{Name: "v2", Served: true, Schema: schemaOf("replicas", "integer")}},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: ptr.To(w.url), CABundle: []byte(w.ca)}}}}}
}

// TestConversionWebhook serves a CRD whose versions differ in shape through its
// conversion webhook: writes in v2 are stored in v1, reads, lists and watches in v2 are
// converted, and a webhook that is down fails v2 requests with a 500 while v1 works.
func TestConversionWebhook(t *testing.T) {
	srv := testserver.StartAPI(t)
	e := newCRDEnv(t, srv)
	ctx := context.Background()
	hook := startConversionWebhook(t)
	e.establish(t, gadgetsCRD(hook))
	v1 := schema.GroupVersionResource{Group: "conv.example.com", Version: "v1", Resource: "gadgets"}
	v2 := v1.GroupVersion().WithResource("gadgets")
	v2.Version = "v2"
	gadget := func(version string, spec map[string]any, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "conv.example.com/" + version, "kind": "Gadget",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}}
	}

	created, err := e.dyn.Resource(v2).Namespace("default").Create(ctx, gadget("v2", map[string]any{"replicas": int64(3)}, "a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(created.Object, "spec", "replicas"); n != 3 || created.GetAPIVersion() != "conv.example.com/v2" {
		t.Errorf("created in v2: %v", created.Object)
	}
	stored, err := e.dyn.Resource(v1).Namespace("default").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(stored.Object, "spec", "size"); s != "3" {
		t.Errorf("read in v1 (the storage version): %v, want spec.size \"3\"", stored.Object)
	}
	if hook.calls.Load() == 0 {
		t.Error("the conversion webhook was never called")
	}

	// A v2 watch sees an object written in v1 converted.
	w, err := e.dyn.Resource(v2).Namespace("default").Watch(ctx, metav1.ListOptions{ResourceVersion: created.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := e.dyn.Resource(v1).Namespace("default").Create(ctx, gadget("v1", map[string]any{"size": "5"}, "b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type != watch.Added {
			t.Fatalf("watch event %s %T", ev.Type, ev.Object)
		}
		if n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); n != 5 || u.GetAPIVersion() != "conv.example.com/v2" {
			t.Errorf("watched in v2: %v", u.Object)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event in 30 s")
	}

	// A list in v2 converts every item (one webhook call for the page).
	list, err := e.dyn.Resource(v2).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, it := range list.Items {
		got[it.GetName()], _, _ = unstructured.NestedInt64(it.Object, "spec", "replicas")
	}
	if fmt.Sprint(got) != fmt.Sprint(map[string]int64{"a": 3, "b": 5}) {
		t.Errorf("list in v2: %v", got)
	}

	// An update in v2 is stored converted.
	created.Object["spec"] = map[string]any{"replicas": int64(7)}
	if _, err := e.dyn.Resource(v2).Namespace("default").Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stored, err = e.dyn.Resource(v1).Namespace("default").Get(ctx, "a", metav1.GetOptions{})
	if s, _, _ := unstructured.NestedString(stored.Object, "spec", "size"); err != nil || s != "7" {
		t.Errorf("after a v2 update, v1 reads %v (%v)", stored.Object, err)
	}

	// The webhook goes away: v2 requests fail as kube-apiserver fails them, v1 still works.
	hook.srv.Close()
	if _, err := e.dyn.Resource(v2).Namespace("default").Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsInternalError(err) {
		t.Errorf("v2 read without a webhook: %v, want 500", err)
	}
	if _, err := e.dyn.Resource(v2).Namespace("default").Create(ctx, gadget("v2", map[string]any{"replicas": int64(1)}, "c"), metav1.CreateOptions{}); !apierrors.IsInternalError(err) {
		t.Errorf("v2 create without a webhook: %v, want 500", err)
	}
	if _, err := e.dyn.Resource(v1).Namespace("default").Get(ctx, "c", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a create that failed to convert left an object: %v", err)
	}
	if _, err := e.dyn.Resource(v1).Namespace("default").Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("v1 read without a webhook: %v", err)
	}

	// A Webhook strategy without a webhook is refused with kube-apiserver's cause.
	bad := gadgetsCRD(hook)
	bad.Name, bad.Spec.Group = "gadgets.bad.example.com", "bad.example.com"
	bad.Spec.Conversion.Webhook = nil
	_, err = e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("CRD with a Webhook strategy and no webhook: %v, want 422", err)
	}
	if st := err.(apierrors.APIStatus).Status(); st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != "spec.conversion.webhookClientConfig" {
		t.Errorf("causes %+v, want spec.conversion.webhookClientConfig (kube-apiserver names the internal field)", st.Details)
	}
}
