package apiserver

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func deploymentAC(ns, name string, containers ...*corev1ac.ContainerApplyConfiguration) *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment(name, ns).WithSpec(appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": name})).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(map[string]string{"app": name}).
			WithSpec(corev1ac.PodSpec().WithContainers(containers...))))
}

// entry is one managedFields record without its time and fields.
type entry struct {
	Manager, Operation, Subresource, APIVersion string
}

func entries(t *testing.T, m metav1.Object) []entry {
	t.Helper()
	var out []entry
	for _, e := range m.GetManagedFields() {
		if e.Time == nil {
			t.Errorf("managedFields entry of %q has no time", e.Manager)
		}
		if e.FieldsType != "FieldsV1" || e.FieldsV1 == nil {
			t.Errorf("managedFields entry of %q has fields type %q", e.Manager, e.FieldsType)
		}
		out = append(out, entry{Manager: e.Manager, Operation: string(e.Operation), Subresource: e.Subresource, APIVersion: e.APIVersion})
	}
	// The library orders entries by operation and time; within a second the order of
	// two entries is not fixed.
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.Manager, b.Manager) })
	return out
}

// fieldsOf is the FieldsV1 JSON of manager's entry with operation op.
func fieldsOf(t *testing.T, m metav1.Object, manager string, op metav1.ManagedFieldsOperationType) string {
	t.Helper()
	for _, e := range m.GetManagedFields() {
		if e.Manager == manager && e.Operation == op {
			return string(e.FieldsV1.Raw)
		}
	}
	t.Fatalf("no %s entry of %q in %+v", op, manager, m.GetManagedFields())
	return ""
}

// TestApplyDeployment applies a Deployment with client-go's apply configurations from two
// managers: each owns its own container (the pod spec's containers merge by name, from
// Kubernetes' schema), a shared field conflicts, ApplyStatus owns status only.
func TestApplyDeployment(t *testing.T) {
	srv := testserver.StartAPI(t)
	ctx := ctxFor(t)
	for _, m := range []struct {
		name string
		json bool
	}{{"protobuf", false}, {"json", true}} {
		t.Run(m.name, func(t *testing.T) {
			cs := srv.Clientset(t, m.json)
			ns := "deploy-" + m.name
			newNamespace(t, cs, ns)
			deployments := cs.AppsV1().Deployments(ns)

			created, err := deployments.Apply(ctx, deploymentAC(ns, "web", corev1ac.Container().WithName("app").WithImage("app:1")).WithSpec(
				appsv1ac.DeploymentSpec().WithReplicas(2)), metav1.ApplyOptions{FieldManager: "team-app"})
			if err == nil {
				t.Fatalf("apply without a selector and template was accepted: %+v", created.Spec)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("apply of an invalid deployment: %v, want 422 Invalid", err)
			}
			if _, err := deployments.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("an invalid apply stored the deployment: %v", err)
			}

			app := deploymentAC(ns, "web", corev1ac.Container().WithName("app").WithImage("app:1"))
			app.Spec.WithReplicas(2)
			created, err = deployments.Apply(ctx, app, metav1.ApplyOptions{FieldManager: "team-app"})
			if err != nil {
				t.Fatalf("apply create: %v", err)
			}
			if created.Generation != 1 || *created.Spec.Replicas != 2 || created.Spec.Template.Spec.Containers[0].Image != "app:1" {
				t.Fatalf("created %+v", created.Spec)
			}
			if got, want := entries(t, created), []entry{{"team-app", "Apply", "", "apps/v1"}}; !slices.Equal(got, want) {
				t.Fatalf("managedFields %+v, want %+v", got, want)
			}

			// A second team adds a sidecar: both containers stay (a list map keyed by name).
			sidecar := deploymentAC(ns, "web", corev1ac.Container().WithName("proxy").WithImage("proxy:1"))
			both, err := deployments.Apply(ctx, sidecar, metav1.ApplyOptions{FieldManager: "team-mesh"})
			if err != nil {
				t.Fatalf("apply sidecar: %v", err)
			}
			var names []string
			for _, c := range both.Spec.Template.Spec.Containers {
				names = append(names, c.Name+"="+c.Image)
			}
			if !slices.Equal(names, []string{"app=app:1", "proxy=proxy:1"}) || *both.Spec.Replicas != 2 {
				t.Fatalf("containers %v replicas %d after the second apply", names, *both.Spec.Replicas)
			}
			if f := fieldsOf(t, both, "team-mesh", metav1.ManagedFieldsOperationApply); !strings.Contains(f, `k:{\"name\":\"proxy\"}`) || strings.Contains(f, `k:{\"name\":\"app\"}`) {
				t.Errorf("team-mesh owns %s", f)
			}

			// team-mesh setting replicas conflicts with team-app.
			grab := deploymentAC(ns, "web", corev1ac.Container().WithName("proxy").WithImage("proxy:1"))
			grab.Spec.WithReplicas(5)
			_, err = deployments.Apply(ctx, grab, metav1.ApplyOptions{FieldManager: "team-mesh"})
			var status apierrors.APIStatus
			if !apierrors.IsConflict(err) || !errorsAs(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) != 1 ||
				status.Status().Details.Causes[0].Field != ".spec.replicas" || status.Status().Details.Causes[0].Message != `conflict with "team-app"` {
				t.Fatalf("conflicting apply: %v (%+v)", err, status)
			}
			forced, err := deployments.Apply(ctx, grab, metav1.ApplyOptions{FieldManager: "team-mesh", Force: true})
			if err != nil || *forced.Spec.Replicas != 5 {
				t.Fatalf("forced apply: %v", err)
			}
			if f := fieldsOf(t, forced, "team-app", metav1.ManagedFieldsOperationApply); strings.Contains(f, "replicas") {
				t.Errorf("team-app still owns replicas after the forced apply: %s", f)
			}
			if forced.Generation != 3 {
				t.Errorf("generation %d after two spec changes, want 3", forced.Generation)
			}

			// Status is owned through the status endpoint only; a spec field in ApplyStatus is
			// not applied (status' reset fields).
			st := appsv1ac.Deployment("web", ns).WithStatus(appsv1ac.DeploymentStatus().WithObservedGeneration(2).WithReplicas(5))
			st.WithSpec(appsv1ac.DeploymentSpec().WithReplicas(9))
			withStatus, err := deployments.ApplyStatus(ctx, st, metav1.ApplyOptions{FieldManager: "controller", Force: true})
			if err != nil {
				t.Fatalf("apply status: %v", err)
			}
			if withStatus.Status.Replicas != 5 || *withStatus.Spec.Replicas != 5 {
				t.Fatalf("after ApplyStatus status.replicas=%d spec.replicas=%d, want 5 and 5", withStatus.Status.Replicas, *withStatus.Spec.Replicas)
			}
			if got, want := entries(t, withStatus), []entry{
				{"controller", "Apply", "status", "apps/v1"}, {"team-app", "Apply", "", "apps/v1"}, {"team-mesh", "Apply", "", "apps/v1"},
			}; !slices.Equal(got, want) {
				t.Errorf("managedFields %+v, want %+v", got, want)
			}
			if f := fieldsOf(t, withStatus, "controller", metav1.ManagedFieldsOperationApply); strings.Contains(f, "spec") || !strings.Contains(f, "f:status") {
				t.Errorf("the status manager owns %s", f)
			}
			// The spec apply of status does not own status either.
			specOnly := deploymentAC(ns, "web", corev1ac.Container().WithName("app").WithImage("app:1"))
			specOnly.WithStatus(appsv1ac.DeploymentStatus().WithReplicas(77))
			again, err := deployments.Apply(ctx, specOnly, metav1.ApplyOptions{FieldManager: "team-app", Force: true})
			if err != nil || again.Status.Replicas != 5 {
				t.Fatalf("status through the main endpoint: %v (status.replicas %d, want 5)", err, again.Status.Replicas)
			}

			// Applying what is already there writes nothing (timestamps are not a change).
			same, err := deployments.Apply(ctx, specOnly, metav1.ApplyOptions{FieldManager: "team-app", Force: true})
			if err != nil || same.ResourceVersion != again.ResourceVersion {
				t.Fatalf("a no-op apply: %v, resourceVersion %s -> %s", err, again.ResourceVersion, same.ResourceVersion)
			}

			// A dry-run apply (kubectl diff) answers the merged object and stores nothing.
			dry := deploymentAC(ns, "web", corev1ac.Container().WithName("app").WithImage("app:2"))
			preview, err := deployments.Apply(ctx, dry, metav1.ApplyOptions{FieldManager: "team-app", DryRun: []string{metav1.DryRunAll}})
			if err != nil || preview.Spec.Template.Spec.Containers[0].Image != "app:2" {
				t.Fatalf("dry-run apply: %v", err)
			}
			if cur, err := deployments.Get(ctx, "web", metav1.GetOptions{}); err != nil || cur.ResourceVersion != same.ResourceVersion || cur.Spec.Template.Spec.Containers[0].Image != "app:1" {
				t.Fatalf("the dry-run apply was stored: %v", err)
			}
		})
	}
}

func errorsAs(err error, status *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*status = s
	}
	return ok
}

// TestManagedFieldsOfEveryWrite checks the entries create, update, patch and apply leave,
// with the manager taken from fieldManager or, without it, from the User-Agent.
func TestManagedFieldsOfEveryWrite(t *testing.T) {
	srv := testserver.StartAPI(t)
	ctx := ctxFor(t)
	cfg := srv.Config(true)
	cfg.UserAgent = "my-operator/v0.3.1 (linux/amd64)"
	cs := kubernetes.NewForConfigOrDie(cfg)
	const ns = "writes"
	newNamespace(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)

	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"l": "1"}}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entries(t, cm), []entry{{"my-operator", "Update", "", "v1"}}; !slices.Equal(got, want) {
		t.Fatalf("after create %+v, want %+v", got, want)
	}
	if f := fieldsOf(t, cm, "my-operator", metav1.ManagedFieldsOperationUpdate); f != `{"f:data":{".":{},"f:a":{}},"f:metadata":{"f:labels":{".":{},"f:l":{}}}}` {
		t.Errorf("creator owns %s", f)
	}

	cm.Data["b"] = "2"
	cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "updater"})
	if err != nil {
		t.Fatal(err)
	}
	cm, err = cms.Patch(ctx, "c", types.StrategicMergePatchType, []byte(`{"data":{"c":"3"}}`), metav1.PatchOptions{FieldManager: "patcher"})
	if err != nil {
		t.Fatal(err)
	}
	cm, err = cms.Apply(ctx, corev1ac.ConfigMap("c", ns).WithData(map[string]string{"d": "4"}), metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatal(err)
	}
	// A second update by the same manager merges into its entry.
	cm, err = cms.Patch(ctx, "c", types.MergePatchType, []byte(`{"data":{"b":"22"}}`), metav1.PatchOptions{FieldManager: "updater"})
	if err != nil {
		t.Fatal(err)
	}
	want := []entry{{"my-operator", "Update", "", "v1"}, {"updater", "Update", "", "v1"}, {"patcher", "Update", "", "v1"}, {"applier", "Apply", "", "v1"}}
	got := entries(t, cm)
	slices.SortFunc(got, func(a, b entry) int { return strings.Compare(a.Manager, b.Manager) })
	slices.SortFunc(want, func(a, b entry) int { return strings.Compare(a.Manager, b.Manager) })
	if !slices.Equal(got, want) {
		t.Fatalf("managedFields %+v, want %+v", got, want)
	}
	for manager, key := range map[string]string{"updater": "f:b", "patcher": "f:c", "applier": "f:d"} {
		var fields map[string]any
		op := metav1.ManagedFieldsOperationUpdate
		if manager == "applier" {
			op = metav1.ManagedFieldsOperationApply
		}
		if err := json.Unmarshal([]byte(fieldsOf(t, cm, manager, op)), &fields); err != nil {
			t.Fatal(err)
		}
		data, _ := fields["f:data"].(map[string]any)
		if _, ok := data[key]; !ok || len(data) > 2 {
			t.Errorf("%s owns %v, want data %s", manager, fields, key)
		}
	}
	// The updater may not delete what the applier owns silently: an apply without d
	// drops it, an update keeps ownership records consistent.
	cm, err = cms.Apply(ctx, corev1ac.ConfigMap("c", ns).WithData(map[string]string{"e": "5"}), metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Data["d"]; ok || cm.Data["e"] != "5" || cm.Data["a"] != "1" {
		t.Errorf("data after the applier dropped d: %v", cm.Data)
	}

	// Clearing managedFields with an empty list is honoured (as Kubernetes).
	cm, err = cms.Patch(ctx, "c", types.MergePatchType, []byte(`{"metadata":{"managedFields":[{}]}}`), metav1.PatchOptions{FieldManager: "resetter"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.ManagedFields) != 0 {
		t.Errorf("managedFields after a reset: %+v", cm.ManagedFields)
	}
	// Updates of an object without records keep none (Kubernetes resumes tracking at the
	// next apply); an update of nothing keeps the resourceVersion.
	cur, err := cms.Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Data["f"] = "6"
	again, err := cms.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.ManagedFields) != 0 {
		t.Errorf("managedFields after an update that follows a reset: %+v", again.ManagedFields)
	}
	tracked, err := cms.Apply(ctx, corev1ac.ConfigMap("c", ns).WithData(map[string]string{"g": "7"}), metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatal(err)
	}
	// The fields set before are handed to "before-first-apply", as Kubernetes records them.
	if got := entries(t, tracked); len(got) != 2 || got[0] != (entry{"applier", "Apply", "", "v1"}) || got[1] != (entry{"before-first-apply", "Update", "", "v1"}) {
		t.Errorf("managedFields after the apply that follows a reset: %+v", got)
	}
	noop, err := cms.Update(ctx, tracked, metav1.UpdateOptions{FieldManager: "x"})
	if err != nil || noop.ResourceVersion != tracked.ResourceVersion {
		t.Errorf("a no-op update: %v, resourceVersion %s -> %s", err, tracked.ResourceVersion, noop.ResourceVersion)
	}
}
