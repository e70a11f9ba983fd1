// The aggregation tests check the aggregation layer: an APIService that names a Service
// sends its group version to the API server behind it, with the user as front-proxy
// headers, and its resources appear in discovery.

package apiserver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/aggregated"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"
)

var flunders = schema.GroupVersionResource{Group: aggregated.Group, Version: aggregated.Version, Resource: "flunders"}

func available(as *apiregistrationv1.APIService) *apiregistrationv1.APIServiceCondition {
	for i := range as.Status.Conditions {
		if as.Status.Conditions[i].Type == apiregistrationv1.Available {
			return &as.Status.Conditions[i]
		}
	}
	return nil
}

func TestAggregatedAPIServer(t *testing.T) {
	srv := testserver.StartAPI(t)
	ctx := context.Background()
	cfg := srv.Config(true)
	cs := srv.Clientset(t, true)
	agg, err := aggregatorclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	backend := aggregated.Start(t, cs, "default", "wardle")
	waitAvailable := func(name string, want func(*apiregistrationv1.APIServiceCondition) bool) *apiregistrationv1.APIServiceCondition {
		t.Helper()
		var last *apiregistrationv1.APIServiceCondition
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			as, err := agg.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = available(as)
			return last != nil && want(last), nil
		})
		if err != nil {
			t.Fatalf("APIService %s: condition %+v: %v", name, last, err)
		}
		return last
	}

	// The APIService comes first, its Service after: unavailable with kube-aggregator's
	// reason until the Service exists.
	as := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: aggregated.Version + "." + aggregated.Group},
		Spec: apiregistrationv1.APIServiceSpec{Group: aggregated.Group, Version: aggregated.Version, CABundle: backend.CABundle,
			GroupPriorityMinimum: 2000, VersionPriority: 10,
			Service: &apiregistrationv1.ServiceReference{Namespace: "default", Name: "wardle", Port: ptr.To(backend.Port)}}}
	if _, err := agg.ApiregistrationV1().APIServices().Create(ctx, as, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable(as.Name, func(c *apiregistrationv1.APIServiceCondition) bool {
		return c.Status == apiregistrationv1.ConditionFalse && c.Reason == "ServiceNotFound"
	})
	if _, err := dyn.Resource(flunders).Namespace("default").List(ctx, metav1.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("list while unavailable: %v, want 503", err)
	}
	// An ExternalName Service routes to its host, as in kube-aggregator.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "wardle", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"}}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := waitAvailable(as.Name, func(c *apiregistrationv1.APIServiceCondition) bool {
		return c.Status == apiregistrationv1.ConditionTrue
	})
	if c.Reason != "Passed" {
		t.Errorf("available reason %q, want Passed", c.Reason)
	}

	// Discovery (aggregated and legacy) lists the group version with the server's resources.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return false, err
		}
		_, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			return false, nil
		}
		for _, l := range lists {
			if l.GroupVersion == flunders.GroupVersion().String() {
				return slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == "flunders" }), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("discovery does not list %s: %v", flunders, err)
	}
	legacy, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/" + aggregated.Group).DoRaw(ctx)
	if err != nil || !strings.Contains(string(legacy), aggregated.Group+"/"+aggregated.Version) {
		t.Errorf("legacy group document: %s, %v", legacy, err)
	}

	// Requests go through with the caller's identity as headers, never its credentials.
	list, err := dyn.Resource(flunders).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].GetName() != "seen-by-system-admin" {
		t.Errorf("list = %+v, want the one flunder named for system:admin", list.Items)
	}
	for _, r := range backend.Seen() {
		if r.Authorization {
			t.Errorf("%s reached the aggregated server with the client's Authorization header", r.Path)
		}
	}
	seen := backend.Seen()
	if last := seen[len(seen)-1]; last.User != "system:admin" || !slices.Contains(last.Groups, "system:masters") {
		t.Errorf("the aggregated server saw %+v, want system:admin in system:masters", last)
	}

	// The main server authorizes first: a user without RBAC rights is refused before
	// anything is forwarded; with them, the server sees that user.
	jane := rest.CopyConfig(cfg)
	jane.Impersonate = rest.ImpersonationConfig{UserName: "jane"}
	janeDyn, err := dynamic.NewForConfig(jane)
	if err != nil {
		t.Fatal(err)
	}
	before := len(backend.Seen())
	if _, err := janeDyn.Resource(flunders).Namespace("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("jane without rights: %v, want 403", err)
	}
	for _, r := range backend.Seen()[before:] {
		if r.User == "jane" {
			t.Errorf("a forbidden request reached the aggregated server: %+v", r)
		}
	}
	if _, err := cs.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "flunder-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{aggregated.Group}, Resources: []string{"flunders"}, Verbs: []string{"get", "list"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "jane-flunders"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "flunder-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "jane"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := janeDyn.Resource(flunders).Namespace("default").Get(ctx, "seen-by-jane", metav1.GetOptions{})
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		groups, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "groups")
		return slices.Contains(groups, "system:authenticated"), nil
	})
	if err != nil {
		t.Fatalf("jane with rights: %v", err)
	}

	// The server goes away: requests get a 503, and the failed request has the APIService
	// checked again at once, which turns it unavailable.
	backend.Stop()
	if _, err := dyn.Resource(flunders).Namespace("default").List(ctx, metav1.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("list after the server stopped: %v, want 503", err)
	}
	waitAvailable(as.Name, func(c *apiregistrationv1.APIServiceCondition) bool {
		return c.Status == apiregistrationv1.ConditionFalse && c.Reason == "FailedDiscoveryCheck"
	})
	if _, err := dyn.Resource(flunders).Namespace("default").List(ctx, metav1.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("list after the APIService turned unavailable: %v, want 503", err)
	}

	// Deleting the APIService takes the group version out of discovery.
	if err := agg.ApiregistrationV1().APIServices().Delete(ctx, as.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/" + aggregated.Group).DoRaw(ctx)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the group is still discovered after its APIService was deleted: %v", err)
	}
}
