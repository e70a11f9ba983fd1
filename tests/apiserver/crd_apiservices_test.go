package apiserver

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"
)

// The server keeps a local APIService per served group version, with kube-apiserver's
// names and priorities, for custom resources too (removed with their CRD); an APIService
// naming a Service says it is not available, since wasmplane does not proxy; and
// apiregistration.k8s.io is in legacy and aggregated discovery.
func TestAPIServices(t *testing.T) {
	e := newCRDEnv(t, testserver.StartAPI(t))
	ctx := context.Background()
	agg, err := aggregatorclient.NewForConfig(e.srv.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	apiServices := agg.ApiregistrationV1().APIServices()
	// waitFor polls the APIService name until done holds of it (nil = absent).
	waitFor := func(name string, done func(*apiregistrationv1.APIService) bool) *apiregistrationv1.APIService {
		t.Helper()
		var last *apiregistrationv1.APIService
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			as, err := apiServices.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				last = nil
				return done(nil), nil
			}
			if err != nil {
				return false, err
			}
			last = as
			return done(as), nil
		})
		if err != nil {
			t.Fatalf("APIService %s: %v (last %+v)", name, err, last)
		}
		return last
	}
	local := func(group, version string, groupPriority, versionPriority int32, managed string) func(*apiregistrationv1.APIService) bool {
		return func(as *apiregistrationv1.APIService) bool {
			if as == nil || as.Spec.Service != nil || as.Spec.Group != group || as.Spec.Version != version ||
				as.Spec.GroupPriorityMinimum != groupPriority || as.Spec.VersionPriority != versionPriority ||
				as.Labels["kube-aggregator.kubernetes.io/automanaged"] != managed {
				return false
			}
			for _, c := range as.Status.Conditions {
				if c.Type == apiregistrationv1.Available {
					return c.Status == apiregistrationv1.ConditionTrue && c.Reason == "Local"
				}
			}
			return false
		}
	}
	absent := func(as *apiregistrationv1.APIService) bool { return as == nil }

	waitFor("v1.", local("", "v1", 18000, 1, "onstart"))
	waitFor("v1.apps", local("apps", "v1", 17800, 15, "onstart"))
	waitFor("v1.batch", local("batch", "v1", 17400, 15, "onstart"))

	// Discovery, legacy and aggregated, lists apiservices.
	dc, err := discovery.NewDiscoveryClientForConfig(e.srv.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	groups, byGV, _, err := dc.GroupsAndMaybeResources()
	if err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: "apiregistration.k8s.io", Version: "v1"}
	if byGV == nil || byGV[gv] == nil || !hasResource(byGV[gv], "apiservices") {
		t.Fatalf("aggregated discovery lacks apiservices: %v", byGV[gv])
	}
	found := false
	for _, g := range groups.Groups {
		found = found || g.Name == gv.Group
	}
	if !found {
		t.Fatalf("aggregated discovery lacks group %s", gv.Group)
	}
	legacy, err := dc.ServerResourcesForGroupVersion(gv.String())
	if err != nil || !hasResource(legacy, "apiservices") {
		t.Fatalf("/apis/%s: %v %v", gv, legacy, err)
	}

	// A CRD's served versions get APIServices, which go with the CRD.
	crd := simpleCRD("sprockets", "Sprocket", "registered.example.com", apiextensionsv1.JSONSchemaProps{Type: "object"})
	crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v2", Served: true,
		Schema: crd.Spec.Versions[0].Schema.DeepCopy()})
	e.establish(t, crd)
	waitFor("v1.registered.example.com", local("registered.example.com", "v1", 1000, 100, "true"))
	waitFor("v2.registered.example.com", local("registered.example.com", "v2", 1000, 100, "true"))
	if err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("v1.registered.example.com", absent)
	waitFor("v2.registered.example.com", absent)

	// A local APIService deleted by hand comes back.
	if err := apiServices.Delete(ctx, "v1.apps", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("v1.apps", local("apps", "v1", 17800, 15, "onstart"))

	// One that names a Service that does not exist is not available, with
	// kube-aggregator's reason.
	remote := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.remote.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "remote.example.com", Version: "v1alpha1", GroupPriorityMinimum: 2000, VersionPriority: 10,
			InsecureSkipTLSVerify: true, Service: &apiregistrationv1.ServiceReference{Namespace: "default", Name: "remote"}}}
	created, err := apiServices.Create(ctx, remote, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := created.Spec.Service.Port; p == nil || *p != 443 {
		t.Errorf("service port %v, want the default 443", p)
	}
	waitFor(remote.Name, func(as *apiregistrationv1.APIService) bool {
		for _, c := range as.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				return c.Status == apiregistrationv1.ConditionFalse && c.Reason == "ServiceNotFound" &&
					c.Message == `service/remote in "default" is not present`
			}
		}
		return false
	})

	// Bad input: kube-aggregator's validation, as a 422 with field causes.
	bad := remote.DeepCopy()
	bad.Name, bad.Spec.GroupPriorityMinimum, bad.Spec.Service.Port = "v1.wrongname.example.com", 0, ptr.To[int32](70000)
	_, err = apiServices.Create(ctx, bad, metav1.CreateOptions{})
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) {
		t.Fatalf("invalid APIService: %v", err)
	}
	st = err.(apierrors.APIStatus)
	fields := map[string]bool{}
	for _, c := range st.Status().Details.Causes {
		fields[c.Field] = true
	}
	for _, f := range []string{"metadata.name", "spec.groupPriorityMinimum", "spec.service.port"} {
		if !fields[f] {
			t.Errorf("no cause for %s in %v", f, st.Status().Details.Causes)
		}
	}
	if st.Status().Code != http.StatusUnprocessableEntity {
		t.Errorf("code %d", st.Status().Code)
	}
}

func hasResource(l *metav1.APIResourceList, name string) bool {
	if l == nil {
		return false
	}
	for _, r := range l.APIResources {
		if r.Name == name {
			return true
		}
	}
	return false
}
