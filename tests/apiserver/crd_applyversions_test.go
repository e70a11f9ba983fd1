package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// applyAcrossVersions is what a server answered to server-side applies of one field in
// two versions whose shapes differ (gadgets: v1 spec.size, v2 spec.replicas).
type applyAcrossVersions struct {
	// Conflict is the unforced v2 apply's error: its reason and causes.
	Conflict string
	// Managers are the managedFields after the forced v2 apply: manager, version, fields.
	Managers []string
}

// runApplyAcrossVersions: "alpha" applies spec.size in v1, "beta" applies spec.replicas
// (the same field through the conversion webhook) in v2, first without and then with
// force.
func runApplyAcrossVersions(t *testing.T, cfg *rest.Config, hook *conversionWebhook) applyAcrossVersions {
	t.Helper()
	ctx := context.Background()
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, gadgetsCRD(hook), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "conv.example.com", Version: v, Resource: "gadgets"}
	}
	gadget := func(v string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "conv.example.com/" + v, "kind": "Gadget",
			"metadata": map[string]any{"name": "g", "namespace": "default"}, "spec": spec}}
	}
	// Established, and served in both versions (a fresh CRD takes a moment on kube-apiserver).
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "gadgets.conv.example.com", metav1.GetOptions{})
		if err != nil || !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			return false, nil
		}
		_, err = dyn.Resource(gvr("v1")).Namespace("default").Apply(ctx, "g", gadget("v1", map[string]any{"size": "3"}), metav1.ApplyOptions{FieldManager: "alpha"})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("gadgets not served or alpha's apply refused: %v", err)
	}
	var out applyAcrossVersions
	_, err = dyn.Resource(gvr("v2")).Namespace("default").Apply(ctx, "g", gadget("v2", map[string]any{"replicas": int64(5)}), metav1.ApplyOptions{FieldManager: "beta"})
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		out.Conflict = fmt.Sprintf("%d %s", st.Code, st.Reason)
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				out.Conflict += fmt.Sprintf("; %s %s %s", c.Type, c.Field, c.Message)
			}
		}
	} else if err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(gvr("v2")).Namespace("default").Apply(ctx, "g", gadget("v2", map[string]any{"replicas": int64(5)}), metav1.ApplyOptions{FieldManager: "beta", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range got.GetManagedFields() {
		out.Managers = append(out.Managers, fmt.Sprintf("%s %s %s %s", m.Manager, m.Operation, m.APIVersion, m.FieldsV1.Raw))
	}
	slices.Sort(out.Managers)
	return out
}

// TestApplyAcrossVersionsThroughConversionWebhook: a manager's fields recorded in another
// version are compared in that version's shape, converted by the CRD's webhook, so the
// same field applied in two versions conflicts and force takes it over — the answers
// compared with kube-apiserver's when the real control plane is at hand.
func TestApplyAcrossVersionsThroughConversionWebhook(t *testing.T) {
	hook := startConversionWebhook(t)
	srv := testserver.StartAPI(t)
	got := runApplyAcrossVersions(t, srv.Config(true), hook)
	if !strings.HasPrefix(got.Conflict, "409 Conflict") || !strings.Contains(got.Conflict, `"alpha"`) {
		t.Errorf("unforced v2 apply of alpha's field: %q, want 409 naming alpha", got.Conflict)
	}
	for _, m := range got.Managers {
		if strings.HasPrefix(m, "alpha ") && strings.Contains(m, "f:size") {
			t.Errorf("alpha still owns spec.size after beta's forced apply: %v", got.Managers)
		}
	}
	kcfg, ok := startKubeAPIServer(t)
	if !ok {
		t.Logf("wasmplane alone: %+v", got)
		return
	}
	want := runApplyAcrossVersions(t, kcfg, hook)
	if got.Conflict != want.Conflict {
		t.Errorf("unforced v2 apply:\n wasmplane      %q\n kube-apiserver %q", got.Conflict, want.Conflict)
	}
	if !slices.Equal(got.Managers, want.Managers) {
		t.Errorf("managedFields after the forced apply:\n wasmplane      %q\n kube-apiserver %q", got.Managers, want.Managers)
	}
}
