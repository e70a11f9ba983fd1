package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// object is what every typed client-go object pointer is.
type object interface {
	metav1.Object
	runtime.Object
}

// crudClient is the method set shared by client-go's typed resource clients, so one
// generic test covers every resource with its real typed client.
type crudClient[T object, L runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// collectionDeleter is the typed clients' deletecollection (namespaces have none, as in
// Kubernetes).
type collectionDeleter interface {
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

// resourceCase exercises one resource with a clientset; ns is a namespace it may use and
// prefix keeps names of concurrent runs (cluster-scoped resources) apart.
type resourceCase struct {
	name string
	run  func(t *testing.T, cs kubernetes.Interface, ns, prefix string)
}

// crudCase builds the case of one resource. terminating says a delete only marks the
// object (namespaces: Terminating, kept until finalized) instead of removing it.
func crudCase[T object, L runtime.Object](name string, terminating bool, client func(cs kubernetes.Interface, ns string) crudClient[T, L], newObj func(name string) T) resourceCase {
	return resourceCase{name: name, run: func(t *testing.T, cs kubernetes.Interface, ns, prefix string) {
		exerciseCRUD(t, client(cs, ns), newObj, prefix, terminating)
	}}
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/hello:1"}}}
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: podSpec()}
}

func resourceCases() []resourceCase {
	return append([]resourceCase{
		crudCase("namespaces", true, func(cs kubernetes.Interface, _ string) crudClient[*corev1.Namespace, *corev1.NamespaceList] {
			return cs.CoreV1().Namespaces()
		}, func(n string) *corev1.Namespace { return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}} }),
		crudCase("pods", false, func(cs kubernetes.Interface, ns string) crudClient[*corev1.Pod, *corev1.PodList] {
			return cs.CoreV1().Pods(ns)
		}, func(n string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: podSpec()}
		}),
		crudCase("nodes", false, func(cs kubernetes.Interface, _ string) crudClient[*corev1.Node, *corev1.NodeList] {
			return cs.CoreV1().Nodes()
		}, func(n string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}} }),
		crudCase("configmaps", false, func(cs kubernetes.Interface, ns string) crudClient[*corev1.ConfigMap, *corev1.ConfigMapList] {
			return cs.CoreV1().ConfigMaps(ns)
		}, func(n string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string]string{"k": "v"}}
		}),
		crudCase("secrets", false, func(cs kubernetes.Interface, ns string) crudClient[*corev1.Secret, *corev1.SecretList] {
			return cs.CoreV1().Secrets(ns)
		}, func(n string) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string][]byte{"k": []byte("v")}}
		}),
		crudCase("serviceaccounts", false, func(cs kubernetes.Interface, ns string) crudClient[*corev1.ServiceAccount, *corev1.ServiceAccountList] {
			return cs.CoreV1().ServiceAccounts(ns)
		}, func(n string) *corev1.ServiceAccount {
			return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: n}}
		}),
		crudCase("events", false, func(cs kubernetes.Interface, ns string) crudClient[*corev1.Event, *corev1.EventList] {
			return cs.CoreV1().Events(ns)
		}, func(n string) *corev1.Event {
			return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: n}, Reason: "Tested", Message: "m", Type: corev1.EventTypeNormal,
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", APIVersion: "v1"}, Source: corev1.EventSource{Component: "test"}}
		}),
		crudCase("events.k8s.io", false, func(cs kubernetes.Interface, ns string) crudClient[*eventsv1.Event, *eventsv1.EventList] {
			return cs.EventsV1().Events(ns)
		}, func(n string) *eventsv1.Event {
			return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: n}, EventTime: metav1.NowMicro(), ReportingController: "example.com/test",
				ReportingInstance: "test-1", Action: "Test", Reason: "Tested", Type: corev1.EventTypeNormal,
				Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p", APIVersion: "v1"}}
		}),
		crudCase("deployments", false, func(cs kubernetes.Interface, ns string) crudClient[*appsv1.Deployment, *appsv1.DeploymentList] {
			return cs.AppsV1().Deployments(ns)
		}, func(n string) *appsv1.Deployment {
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": n}}, Template: podTemplate(n)}}
		}),
		crudCase("replicasets", false, func(cs kubernetes.Interface, ns string) crudClient[*appsv1.ReplicaSet, *appsv1.ReplicaSetList] {
			return cs.AppsV1().ReplicaSets(ns)
		}, func(n string) *appsv1.ReplicaSet {
			return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": n}}, Template: podTemplate(n)}}
		}),
		crudCase("leases", false, func(cs kubernetes.Interface, ns string) crudClient[*coordinationv1.Lease, *coordinationv1.LeaseList] {
			return cs.CoordinationV1().Leases(ns)
		}, func(n string) *coordinationv1.Lease {
			return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me"), LeaseDurationSeconds: ptr.To[int32](15)}}
		}),
	}, schedulingInputCases()...)
}

// TestCRUD runs create/get/list/update/patch/delete/deletecollection/watch, generateName
// and dryRun on every served resource, once per wire encoding.
func TestCRUD(t *testing.T) {
	srv := testserver.StartAPI(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			cs := srv.Clientset(t, m.json)
			ns := newNamespace(t, cs, "crud-"+m.name)
			for _, rc := range resourceCases() {
				t.Run(rc.name, func(t *testing.T) { rc.run(t, cs, ns, m.name) })
			}
		})
	}
}

func exerciseCRUD[T object, L runtime.Object](t *testing.T, c crudClient[T, L], newObj func(string) T, prefix string, terminating bool) {
	ctx := ctxFor(t)
	run := prefix + "-" + fmt.Sprint(time.Now().UnixNano())
	sel := metav1.ListOptions{LabelSelector: "run=" + run}
	withLabel := func(o T) T {
		o.SetLabels(map[string]string{"run": run})
		return o
	}
	start, err := c.List(ctx, sel)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if n := meta.LenList(start); n != 0 {
		t.Fatalf("list before create: %d items, want 0", n)
	}
	startRV, _ := meta.ListAccessor(start)
	w, err := c.Watch(ctx, metav1.ListOptions{LabelSelector: sel.LabelSelector, ResourceVersion: startRV.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	name := prefix + "-obj"
	created, err := c.Create(ctx, withLabel(newObj(name)), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetCreationTimestamp().Time.IsZero() {
		t.Fatalf("create did not set uid/resourceVersion/creationTimestamp: %+v", created)
	}
	if _, err := c.Create(ctx, withLabel(newObj(name)), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: got %v, want AlreadyExists", err)
	}
	got, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil || got.GetUID() != created.GetUID() {
		t.Fatalf("get: %v (uid %v, want %v)", err, got, created.GetUID())
	}

	got.GetLabels()["updated"] = "true"
	updated, err := c.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if updated.GetResourceVersion() == created.GetResourceVersion() || updated.GetLabels()["updated"] != "true" {
		t.Fatalf("update not applied: rv %s labels %v", updated.GetResourceVersion(), updated.GetLabels())
	}
	// created carries the first resourceVersion: writing it back must conflict.
	created.GetLabels()["stale"] = "true"
	if _, err := c.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: got %v, want Conflict", err)
	}

	patches := []struct {
		pt    types.PatchType
		data  string
		check func(T) bool
	}{
		{types.MergePatchType, `{"metadata":{"labels":{"merge":"yes"}}}`, func(o T) bool { return o.GetLabels()["merge"] == "yes" }},
		{types.StrategicMergePatchType, `{"metadata":{"labels":{"strategic":"yes"}}}`, func(o T) bool { return o.GetLabels()["strategic"] == "yes" }},
		{types.JSONPatchType, `[{"op":"add","path":"/metadata/annotations","value":{"json":"yes"}}]`, func(o T) bool { return o.GetAnnotations()["json"] == "yes" }},
	}
	for _, p := range patches {
		out, err := c.Patch(ctx, name, p.pt, []byte(p.data), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("%s patch: %v", p.pt, err)
		}
		if !p.check(out) || out.GetLabels()["updated"] != "true" {
			t.Fatalf("%s patch not applied or lost earlier changes: labels %v annotations %v", p.pt, out.GetLabels(), out.GetAnnotations())
		}
	}

	genObj := withLabel(newObj(""))
	genObj.SetGenerateName(prefix + "-gen-")
	gen, err := c.Create(ctx, genObj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create with generateName: %v", err)
	}
	if !strings.HasPrefix(gen.GetName(), prefix+"-gen-") || len(gen.GetName()) != len(prefix+"-gen-")+5 {
		t.Fatalf("generateName gave %q", gen.GetName())
	}

	// dryRun=All validates and answers but stores nothing.
	dryAll := []string{metav1.DryRunAll}
	if _, err := c.Create(ctx, withLabel(newObj(prefix+"-dry")), metav1.CreateOptions{DryRun: dryAll}); err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	if _, err := c.Get(ctx, prefix+"-dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry-run create stored something: get = %v", err)
	}
	cur, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	cur.GetLabels()["dry"] = "true"
	if _, err := c.Update(ctx, cur, metav1.UpdateOptions{DryRun: dryAll}); err != nil {
		t.Fatalf("dry-run update: %v", err)
	}
	if _, err := c.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"dry":"patch"}}}`), metav1.PatchOptions{DryRun: dryAll}); err != nil {
		t.Fatalf("dry-run patch: %v", err)
	}
	if err := c.Delete(ctx, name, metav1.DeleteOptions{DryRun: dryAll}); err != nil {
		t.Fatalf("dry-run delete: %v", err)
	}
	after, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after dry runs: %v", err)
	}
	if after.GetResourceVersion() != cur.GetResourceVersion() || after.GetLabels()["dry"] != "" || after.GetDeletionTimestamp() != nil {
		t.Fatalf("dry runs changed the object: rv %s→%s labels %v deletionTimestamp %v", cur.GetResourceVersion(), after.GetResourceVersion(), after.GetLabels(), after.GetDeletionTimestamp())
	}

	list, err := c.List(ctx, sel)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if names := namesOf(t, list); !slices.Equal(names, sortedStrings(name, gen.GetName())) {
		t.Fatalf("list = %v, want [%s %s]", names, name, gen.GetName())
	}

	// Background propagation named explicitly: ReplicationControllers orphan their
	// dependents by default, which leaves an orphan finalizer for the garbage collector,
	// and this API-only server runs none (registry.TestDeleteFinalizers covers defaults).
	background := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &background}
	if err := c.Delete(ctx, name, del); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if dc, ok := c.(collectionDeleter); ok {
		if err := dc.DeleteCollection(ctx, del, sel); err != nil {
			t.Fatalf("deletecollection: %v", err)
		}
	} else if err := c.Delete(ctx, gen.GetName(), del); err != nil {
		t.Fatalf("delete: %v", err)
	}
	final, err := c.List(ctx, sel)
	if err != nil {
		t.Fatalf("list after delete: %v", err)
	}
	items, _ := meta.ExtractList(final)
	if terminating {
		// Namespaces stay, Terminating, until their content is gone and they are finalized.
		for _, it := range items {
			if m, _ := meta.Accessor(it); m.GetDeletionTimestamp() == nil {
				t.Fatalf("%s: deleted but no deletionTimestamp", m.GetName())
			}
		}
	} else if len(items) != 0 {
		t.Fatalf("after delete and deletecollection: %d objects left: %v", len(items), namesOf(t, final))
	}

	// A deleted namespace is first marked Terminating; the namespace controller (when it
	// runs) then empties and finalizes it, so a DELETED may follow.
	lastType, mayFollow := watch.Deleted, watch.EventType("")
	if terminating {
		lastType, mayFollow = watch.Modified, watch.Deleted
	}
	want := map[string][]watch.EventType{
		name:          {watch.Added, watch.Modified, watch.Modified, watch.Modified, watch.Modified, lastType},
		gen.GetName(): {watch.Added, lastType},
	}
	assertWatchSequence(t, w, want, mayFollow)
}

// assertWatchSequence reads w until every object saw as many events as want lists, then
// checks the per-object order (objects interleave freely; each one's history may not).
// mayFollow, when set, is an event type allowed after an object's expected history.
func assertWatchSequence(t *testing.T, w watch.Interface, want map[string][]watch.EventType, mayFollow watch.EventType) {
	t.Helper()
	got := map[string][]watch.EventType{}
	complete := func() bool {
		for name, evs := range want {
			if len(got[name]) < len(evs) {
				return false
			}
		}
		return true
	}
	deadline := time.After(20 * time.Second)
	for !complete() {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed early; got %v, want %v", got, want)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				t.Fatalf("watch event object: %v", err)
			}
			got[m.GetName()] = append(got[m.GetName()], ev.Type)
		case <-deadline:
			t.Fatalf("watch: timed out; got %v, want %v", got, want)
		}
	}
	for name, evs := range want {
		g := got[name]
		if mayFollow != "" && len(g) == len(evs)+1 && g[len(g)-1] == mayFollow {
			g = g[:len(evs)]
		}
		if !slices.Equal(g, evs) {
			t.Errorf("watch events of %s = %v, want %v", name, got[name], evs)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected watch events for %s: %v", name, got[name])
		}
	}
}

func namesOf(t *testing.T, list runtime.Object) []string {
	t.Helper()
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatalf("extract list: %v", err)
	}
	var out []string
	for _, it := range items {
		m, err := meta.Accessor(it)
		if err != nil {
			t.Fatalf("accessor: %v", err)
		}
		out = append(out, m.GetName())
	}
	slices.Sort(out)
	return out
}

func sortedStrings(s ...string) []string {
	slices.Sort(s)
	return s
}
