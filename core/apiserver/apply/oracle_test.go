package apply

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

func ptrTo[T any](v T) *T { return &v }

// TestCustomFieldManagersAreTheLibrarys: the same for a custom resource (Unstructured
// objects, a deduced schema), against the library's CRD field manager.
func TestCustomFieldManagersAreTheLibrarys(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	tc := managedfields.NewDeducedTypeConverter()
	ours, err := NewManagers(Config{Kind: gvk, TypeConverter: tc, Custom: true, ResetFields: StatusResetFields(nil)})
	if err != nil {
		t.Fatal(err)
	}
	o := &oracle{ours: ours, lib: map[string]*managedfields.FieldManager{}}
	for _, sub := range []string{Main, Status} {
		filter := map[fieldpath.APIVersion]fieldpath.Filter{"example.com/v1": fieldpath.NewExcludeSetFilter(fieldpath.NewSet(StatusResetFields(nil)[sub]...))}
		if o.lib[sub], err = managedfields.NewDefaultCRDFieldManager(tc, customConvertor{}, defaulter(nil), customCreater{}, gvk, gvk.GroupVersion(), sub, filter); err != nil {
			t.Fatal(err)
		}
	}
	empty := &unstructured.Unstructured{}
	empty.SetGroupVersionKind(gvk)
	widget := func(size int, color string) string {
		return fmt.Sprintf("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: %d, color: %s, parts: [a, b]}\n", size, color)
	}
	o.run(t, empty, []step{
		{manager: "a", patch: widget(1, "red")},
		{manager: "a", patch: widget(2, "red")},
		{manager: "b", patch: widget(3, "blue"), wantConflict: true},
		{manager: "b", patch: widget(3, "blue"), force: true},
		{manager: "u", mutate: func(o runtime.Object) {
			unstructured.SetNestedField(o.(*unstructured.Unstructured).Object, "green", "spec", "color")
		}},
		{sub: Status, manager: "ctl", mutate: func(o runtime.Object) {
			unstructured.SetNestedField(o.(*unstructured.Unstructured).Object, "Ready", "status", "phase")
		}},
		{manager: "a", patch: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 3}\n"},
		{manager: "u", mutate: setManagedFields(`{"f:metadata":{"f:managedFields":{}}}`, `{"f:spec":{"f:size":{}}}`)},
		{manager: "u", mutate: func(o runtime.Object) {
			unstructured.SetNestedField(o.(*unstructured.Unstructured).Object, int64(9), "spec", "size")
		}},
	}, false)
}

// setManagedFields is an update that writes managedFields itself: an Update entry of
// manager "x" with the first fields, an Apply entry of "y" with the second (both of the
// object's apiVersion).
func setManagedFields(x, y string) func(runtime.Object) {
	return func(o runtime.Object) {
		v := o.GetObjectKind().GroupVersionKind().GroupVersion().String()
		if v == "" || v == "/" {
			v = "apps/v1"
		}
		o.(metav1.Object).SetManagedFields([]metav1.ManagedFieldsEntry{
			{Manager: "x", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: v, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(x)}},
			{Manager: "y", Operation: metav1.ManagedFieldsOperationApply, APIVersion: v, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(y)}},
		})
	}
}

func resourceQuantity(s string) resource.Quantity  { return resource.MustParse(s) }
func intstrFromString(s string) intstr.IntOrString { return intstr.FromString(s) }
func intstrFromInt(i int) intstr.IntOrString       { return intstr.FromInt32(int32(i)) }

// oracle is one resource's field managers twice: as this package builds them, and as
// Kubernetes does (the library with client-go's type converter and the scheme itself),
// the answer the package's must match.
type oracle struct {
	ours *Managers
	lib  map[string]*managedfields.FieldManager
}

func newOracle(t *testing.T, gvk schema.GroupVersionKind, reset map[string][]fieldpath.Path, def func(runtime.Object)) *oracle {
	t.Helper()
	scheme := clientgoscheme.Scheme
	ours, err := NewManagers(Config{Scheme: scheme, Kind: gvk, Default: def, ResetFields: reset})
	if err != nil {
		t.Fatal(err)
	}
	o := &oracle{ours: ours, lib: map[string]*managedfields.FieldManager{}}
	for _, sub := range []string{Main, Status} {
		var filter map[fieldpath.APIVersion]fieldpath.Filter
		if paths := reset[sub]; len(paths) > 0 {
			filter = map[fieldpath.APIVersion]fieldpath.Filter{fieldpath.APIVersion(gvk.GroupVersion().String()): fieldpath.NewExcludeSetFilter(fieldpath.NewSet(paths...))}
		}
		fm, err := managedfields.NewDefaultFieldManager(applyconfigurations.NewTypeConverter(scheme), scheme, defaulter(def), scheme, gvk, gvk.GroupVersion(), sub, filter)
		if err != nil {
			t.Fatal(err)
		}
		o.lib[sub] = fm
	}
	return o
}

// step is one write: an apply of patch (YAML), or an update that mutate makes of the live
// object.
type step struct {
	sub, manager string
	patch        string
	force        bool
	mutate       func(obj runtime.Object)
	wantConflict bool
}

// run makes the writes of steps through both field managers, each from its own last
// result, and fails at the first answer that differs: the object with its managedFields
// (times aside: each write stamps the clock), or the error. Unless lenient, a step gets a
// conflict exactly when it wants one; run returns how many steps were refused.
func (o *oracle) run(t *testing.T, empty runtime.Object, steps []step, lenient bool) int {
	t.Helper()
	ours, lib := empty.DeepCopyObject(), empty.DeepCopyObject()
	refused := 0
	for i, s := range steps {
		gotOurs, errOurs := o.write(t, o.ours.For(s.sub), ours, s)
		gotLib, errLib := o.write(t, o.lib[s.sub], lib, s)
		if fmt.Sprint(errOurs) != fmt.Sprint(errLib) {
			t.Fatalf("step %d: error %v, the library's %v", i, errOurs, errLib)
		}
		if errLib != nil {
			refused++
		}
		if !lenient && s.wantConflict != (errLib != nil && strings.Contains(errLib.Error(), "conflict")) {
			t.Fatalf("step %d: error %v, want a conflict: %v", i, errLib, s.wantConflict)
		}
		if errLib != nil {
			continue
		}
		a, b := withoutTimes(t, gotOurs), withoutTimes(t, gotLib)
		if !apiequality.Semantic.DeepEqual(a, b) {
			t.Fatalf("step %d: got\n%#v\nthe library's\n%#v", i, a, b)
		}
		ours, lib = gotOurs, gotLib
	}
	return refused
}

// fieldManager is what run needs of this package's field manager and of the library's.
type fieldManager interface {
	UpdateNoErrors(liveObj, newObj runtime.Object, manager string) runtime.Object
	Apply(liveObj, appliedObj runtime.Object, manager string, force bool) (runtime.Object, error)
}

// write makes step s on live through fm.
func (o *oracle) write(t *testing.T, fm fieldManager, live runtime.Object, s step) (runtime.Object, error) {
	t.Helper()
	if s.mutate != nil {
		next := live.DeepCopyObject()
		s.mutate(next)
		return fm.UpdateNoErrors(live, next, s.manager), nil
	}
	patch, _, err := DecodePatch([]byte(s.patch), true)
	if err != nil {
		t.Fatalf("%q: %v", s.patch, err)
	}
	return fm.Apply(live, patch, s.manager, s.force)
}

// withoutTimes is obj as its Go type (an apply may answer Unstructured) without the
// managedFields' times.
func withoutTimes(t *testing.T, obj runtime.Object) runtime.Object {
	t.Helper()
	obj = obj.DeepCopyObject()
	if u, ok := obj.(runtime.Unstructured); ok && clientgoscheme.Scheme.Recognizes(obj.GetObjectKind().GroupVersionKind()) {
		typed, err := clientgoscheme.Scheme.New(obj.GetObjectKind().GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), typed); err != nil {
			t.Fatal(err)
		}
		obj = typed
	}
	m := obj.(metav1.Object)
	mf := m.GetManagedFields()
	for i := range mf {
		mf[i].Time = nil
	}
	// The library orders entries by operation and time, then by manager: two runs of
	// the same writes that straddle a second differently order them differently.
	slices.SortStableFunc(mf, func(a, b metav1.ManagedFieldsEntry) int {
		return cmp.Or(cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Manager, b.Manager), cmp.Compare(a.Subresource, b.Subresource))
	})
	m.SetManagedFields(mf)
	return obj
}

const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels: {app: web%s}
  finalizers: [%s]
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: %s
        args: [%s]
        ports: [%s]
        env: [%s]
%s`

func deployment(extraLabel, finalizers string, replicas int, image, args, ports, env, more string) string {
	return fmt.Sprintf(deploymentYAML, extraLabel, finalizers, replicas, image, args, ports, env, more)
}

// TestFieldManagersAreTheLibrarys runs the same writes through the package's field
// managers and through Kubernetes' as kube-apiserver builds them, and wants the same
// objects, managedFields and conflicts: applies by several managers with and without
// force, pruning of what a manager stops applying, merges of keyed lists (containers by
// name, ports by port and protocol, env by name), sets (finalizers) and atomic lists
// (args), updates between applies, status written through its own endpoint, duplicates
// in a keyed list of the live object.
func TestFieldManagersAreTheLibrarys(t *testing.T) {
	deployGVK := appsv1.SchemeGroupVersion.WithKind("Deployment")
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	sidecar := "      - name: side\n        image: side:1\n"
	port := func(p int, proto string) string { return fmt.Sprintf("{containerPort: %d, protocol: %s}", p, proto) }
	for _, tc := range []struct {
		name  string
		gvk   schema.GroupVersionKind
		empty runtime.Object
		def   func(runtime.Object)
		steps []step
	}{{
		name: "deployment: applies, prune, conflicts, force", gvk: deployGVK, empty: &appsv1.Deployment{}, def: defaultDeployment,
		steps: []step{
			{manager: "a", patch: deployment("", "x.io/a", 1, "app:1", "--v=1", port(80, "TCP"), "{name: A, value: '1'}", sidecar)},
			{manager: "a", patch: deployment("", "x.io/a", 1, "app:2", "--v=1", port(80, "TCP"), "{name: A, value: '1'}", sidecar)},
			// b takes replicas it did not have: a conflict, then forced.
			{manager: "b", patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec: {replicas: 3}\n", wantConflict: true},
			{manager: "b", force: true, patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec: {replicas: 3}\n"},
			// a stops applying the sidecar, a port and env A; adds a UDP port of the same number.
			{manager: "a", patch: deployment(", tier: front", "x.io/a", 3, "app:2", "--v=2", port(80, "UDP")+", "+port(81, "TCP"), "{name: B, value: '2'}", "")},
			// b applies a second finalizer (a set) and its own env entry.
			{manager: "b", patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default, finalizers: [x.io/b]}\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: app\n        env: [{name: C, value: '3'}]\n"},
			// a changes env C that b owns: a conflict naming b.
			{manager: "a", patch: deployment(", tier: front", "x.io/a", 3, "app:2", "--v=2", port(80, "UDP"), "{name: B, value: '2'}, {name: C, value: 'x'}", ""), wantConflict: true},
			// An update by c changes the image a applied; a's next apply takes it back.
			{manager: "c", mutate: func(o runtime.Object) { o.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image = "app:9" }},
			{manager: "a", patch: deployment(", tier: front", "x.io/a", 3, "app:2", "--v=2", port(80, "UDP"), "{name: B, value: '2'}", ""), wantConflict: true},
			{manager: "a", force: true, patch: deployment(", tier: front", "x.io/a", 3, "app:3", "", port(80, "UDP"), "{name: B, value: '2'}", "")},
			// The same apply again: nothing changes.
			{manager: "a", force: true, patch: deployment(", tier: front", "x.io/a", 3, "app:3", "", port(80, "UDP"), "{name: B, value: '2'}", "")},
			// b lets go of everything.
			{manager: "b", patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\n"},
			// Status through the main endpoint is not owned (reset fields).
			{manager: "a", patch: deployment("", "", 2, "app:4", "", "", "", "status: {replicas: 7}\n")},
		},
	}, {
		name: "deployment: the live object has duplicate env names", gvk: deployGVK, empty: &appsv1.Deployment{}, def: defaultDeployment,
		steps: []step{
			{manager: "a", patch: deployment("", "", 1, "app:1", "", "", "{name: A, value: '1'}", "")},
			{manager: "u", mutate: func(o runtime.Object) {
				c := &o.(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
				c.Env = append(c.Env, corev1.EnvVar{Name: "A", Value: "2"})
			}},
			{manager: "a", patch: deployment("", "", 1, "app:2", "", "", "{name: A, value: '1'}", ""), wantConflict: true},
			{manager: "a", patch: deployment("", "", 1, "app:2", "", "", "{name: A, value: '3'}", ""), force: true},
			{manager: "b", patch: deployment("", "", 1, "app:2", "", "", "{name: A, value: '4'}", ""), force: true},
		},
	}, {
		name: "pod: spec by apply, status by updates and applies on its endpoint", gvk: podGVK, empty: &corev1.Pod{},
		steps: []step{
			{manager: "a", patch: "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, labels: {x: y}}\nspec:\n  containers:\n  - {name: app, image: app:1}\n  tolerations: [{key: k, operator: Exists}]\n"},
			{sub: Status, manager: "kubelet", mutate: func(o runtime.Object) {
				p := o.(*corev1.Pod)
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
				p.Spec.NodeName = "ignored" // a status write cannot set spec
			}},
			{sub: Status, manager: "kubelet", mutate: func(o runtime.Object) {
				p := o.(*corev1.Pod)
				p.Status.Conditions[0].Status = corev1.ConditionFalse
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "app:1"}}
			}},
			{sub: Status, manager: "ctl", patch: "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nstatus:\n  conditions:\n  - {type: Ready, status: 'True'}\n", wantConflict: true},
			{sub: Status, manager: "ctl", force: true, patch: "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nstatus:\n  conditions:\n  - {type: Ready, status: 'True'}\n  - {type: Custom, status: 'True'}\n"},
			{manager: "a", patch: "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers:\n  - {name: app, image: app:1}\n"},
			{manager: "u", mutate: func(o runtime.Object) { o.(*corev1.Pod).Labels = map[string]string{"x": "z"} }},
			{manager: "a", patch: "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, labels: {x: w}}\nspec:\n  containers:\n  - {name: app, image: app:1}\n", wantConflict: true},
			{manager: "a", force: true, patch: "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, labels: {x: w}}\nspec:\n  containers:\n  - {name: app, image: app:1}\n"},
		},
	}, {
		name: "deployment: managedFields written by clients", gvk: deployGVK, empty: &appsv1.Deployment{}, def: defaultDeployment,
		steps: []step{
			{manager: "a", patch: deployment("", "", 1, "app:1", "", "", "{name: A, value: '1'}", "")},
			// A manager that owns metadata.managedFields itself: the library's comparison
			// takes the path from it; the managers go to the library as it is.
			{manager: "u", mutate: setManagedFields(`{"f:metadata":{"f:managedFields":{}}}`, `{"f:spec":{"f:replicas":{}}}`)},
			{manager: "u", mutate: func(o runtime.Object) { o.(*appsv1.Deployment).Spec.Replicas = ptrTo(int32(4)) }},
			{manager: "a", patch: deployment("", "", 1, "app:2", "", "", "{name: A, value: '1'}", ""), wantConflict: true},
			{manager: "a", force: true, patch: deployment("", "", 1, "app:2", "", "", "{name: A, value: '1'}", "")},
			// The same spelled with an escape.
			{manager: "u", mutate: setManagedFields(`{"f:metadata":{"f:\u006danagedFields":{}}}`, `{"f:spec":{"f:replicas":{}}}`)},
			{manager: "u", mutate: func(o runtime.Object) { o.(*appsv1.Deployment).Spec.Replicas = ptrTo(int32(5)) }},
			// Fields that are not a JSON object, then not JSON at all.
			{manager: "u", mutate: setManagedFields(`["f:spec"]`, `{"f:spec":{"f:replicas":{}}}`)},
			{manager: "u", mutate: func(o runtime.Object) { o.(*appsv1.Deployment).Spec.Replicas = ptrTo(int32(6)) }},
			{manager: "u", mutate: setManagedFields(`{"f:spec":`, `{"f:spec":{"f:replicas":{}}}`)},
			{manager: "u", mutate: func(o runtime.Object) { o.(*appsv1.Deployment).Spec.Replicas = ptrTo(int32(7)) }},
			{manager: "a", force: true, patch: deployment("", "", 1, "app:3", "", "", "{name: A, value: '1'}", "")},
			// A reset (an empty list), then entries as a client copied them from a GET.
			{manager: "u", mutate: func(o runtime.Object) { o.(*appsv1.Deployment).ManagedFields = []metav1.ManagedFieldsEntry{} }},
			{manager: "a", force: true, patch: deployment("", "", 2, "app:4", "", "", "{name: A, value: '1'}", "")},
			{manager: "u", mutate: func(o runtime.Object) { o.(*appsv1.Deployment).Spec.Replicas = ptrTo(int32(8)) }},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			newOracle(t, tc.gvk, StatusResetFields(nil), tc.def).run(t, tc.empty, tc.steps, false)
		})
	}
}

// TestFieldManagersRandomWrites applies random subsets of a Deployment's fields by
// three managers, forced or not, with updates between them, through the package's field
// managers and the library's, and wants the same answers throughout.
func TestFieldManagersRandomWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(opts ...string) string { return opts[rng.IntN(len(opts))] }
	var steps []step
	for range 300 {
		if rng.IntN(5) == 0 {
			img := pick("u:1", "u:2")
			steps = append(steps, step{manager: pick("u", "v"), mutate: func(o runtime.Object) {
				d := o.(*appsv1.Deployment)
				if len(d.Spec.Template.Spec.Containers) > 0 {
					d.Spec.Template.Spec.Containers[0].Image = img
				}
				if d.Labels == nil {
					d.Labels = map[string]string{}
				}
				d.Labels["u"] = img
			}})
			continue
		}
		ports := pick("", "{containerPort: 80}", "{containerPort: 80, protocol: UDP}", "{containerPort: 80}, {containerPort: 81, name: b}")
		env := pick("", "{name: A, value: '1'}", "{name: A, value: '2'}, {name: B}", "{name: B, valueFrom: {fieldRef: {fieldPath: metadata.name}}}")
		more := pick("", "      - name: side\n        image: side:1\n", "      - name: side\n        image: side:2\n        resources: {limits: {cpu: 100m}}\n")
		steps = append(steps, step{manager: pick("a", "b", "c"), force: rng.IntN(2) == 0,
			patch: deployment(pick("", ", t: x"), pick("", "x.io/a", "x.io/a, x.io/b"), 1+rng.IntN(3), pick("app:1", "app:2"), pick("", "--v=1", "--v=1, -x"), ports, env, more)})
	}
	o := newOracle(t, appsv1.SchemeGroupVersion.WithKind("Deployment"), StatusResetFields(nil), defaultDeployment)
	// Conflicts are expected anywhere in a random sequence: compare them, do not demand them.
	conflicts := o.run(t, &appsv1.Deployment{}, steps, true)
	if conflicts == 0 || conflicts == len(steps) {
		t.Errorf("%d conflicts in %d steps: the sequence does not exercise both", conflicts, len(steps))
	}
	t.Logf("%d steps, %d conflicts", len(steps), conflicts)
}

// TestManagerConverterSameTypedValue: a Go object's typed value read through its
// unstructured form is the library's typed value of the object: equal values, equal
// field sets, for kinds with quantities, times, int-or-strings, byte slices, keyed,
// set and atomic lists, and for an empty object.
func TestManagerConverterSameTypedValue(t *testing.T) {
	now := metav1.Now()
	grace := int64(30)
	objects := []runtime.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"a": "b"}, Finalizers: []string{"x.io/f"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u1"}}, CreationTimestamp: now},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "app", Image: "app:1",
				Command: []string{"a", "b"}, Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "dup"}},
				Ports:          []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {ContainerPort: 80, Protocol: corev1.ProtocolUDP}},
				Resources:      corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("250m"), corev1.ResourceMemory: resourceQuantity("64Mi")}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstrFromString("http")}}}}},
				Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"b": {0, 1, 2}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstrFromInt(8080)}}}},
		&appsv1.Deployment{},
	}
	scheme := clientgoscheme.Scheme
	lib := applyconfigurations.NewTypeConverter(scheme)
	for _, obj := range objects {
		obj.(metav1.Object).SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, Time: &now,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:a":{}}}}`)}}})
	}
	for _, obj := range objects {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			t.Fatal(err)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		t.Run(gvks[0].Kind, func(t *testing.T) {
			before := obj.DeepCopyObject()
			without := obj.DeepCopyObject()
			without.(metav1.Object).SetManagedFields(nil)
			want, err := lib.ObjectToTyped(without, typed.AllowDuplicates)
			if err != nil {
				t.Fatal(err)
			}
			for _, via := range []bool{false, true} {
				got, err := managerConverter{TypeConverter: NewTypeConverter(scheme), viaUnstructured: via}.ObjectToTyped(obj, typed.AllowDuplicates)
				if err != nil {
					t.Fatal(err)
				}
				sameTyped(t, got, want)
			}
			if !apiequality.Semantic.DeepEqual(obj, before) {
				t.Errorf("the object was modified")
			}
		})
	}
}

func sameTyped(t *testing.T, got, want *typed.TypedValue) {
	t.Helper()
	{
		{
			if !value.Equals(got.AsValue(), want.AsValue()) {
				t.Errorf("values differ:\n%v\n%v", value.ToString(got.AsValue()), value.ToString(want.AsValue()))
			}
			gs, err := got.ToFieldSet()
			if err != nil {
				t.Fatal(err)
			}
			ws, err := want.ToFieldSet()
			if err != nil {
				t.Fatal(err)
			}
			if !gs.Equals(ws) {
				t.Errorf("field sets differ:\n%v\n%v", gs, ws)
			}
			if c, err := got.Compare(want); err != nil || !c.IsSame() {
				t.Errorf("compare: %v, %v", c, err)
			}
		}
	}
}

// TestManagedFieldsUnread: the writes whose managedFields the managers' typed values may
// leave out, and those that go to the library as it is.
func TestManagedFieldsUnread(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields []string // one entry each; "-" for an entry without fields
		want   bool
	}{
		{"no entries", nil, true},
		{"an entry without fields", []string{"-"}, true},
		{"ordinary sets", []string{`{"f:spec":{"f:replicas":{}}}`, `{"f:metadata":{"f:labels":{".":{},"f:a":{}}}}`}, true},
		{"names managedFields", []string{`{"f:spec":{}}`, `{"f:metadata":{"f:managedFields":{}}}`}, false},
		{"an escape", []string{`{"f:metadata":{"f:\u006danagedFields":{}}}`}, false},
		{"escaped quotes and backslashes in keys", []string{`{"f:spec":{"k:{\"name\":\"a\\\\b\"}":{}}}`}, true},
		{"a tab escape", []string{`{"f:spec":{"k:{\"name\":\"a\tb\"}":{}}}`}, false},
		{"a list", []string{`["f:spec"]`}, false},
		{"leading space", []string{` {"f:spec":{}}`}, false},
		{"not JSON", []string{`{"f:spec":`}, false},
		{"empty", []string{``}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{}
			for _, f := range tc.fields {
				e := metav1.ManagedFieldsEntry{Manager: "m", FieldsType: "FieldsV1"}
				if f != "-" {
					e.FieldsV1 = &metav1.FieldsV1{Raw: []byte(f)}
				}
				cm.ManagedFields = append(cm.ManagedFields, e)
			}
			if got := managedFieldsUnread(cm); got != tc.want {
				t.Errorf("managedFieldsUnread = %v, want %v", got, tc.want)
			}
		})
	}
}
