package apply

import (
	"cmp"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// defaultDeployment sets the defaults kube-apiserver gives the fields the tests'
// Deployments leave out (a subset of SetObjectDefaults_Deployment: enough for the stored
// object to carry fields that no manager owns, as a served one does).
func defaultDeployment(obj runtime.Object) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	orDefault(&d.Spec.Replicas, 1)
	orDefault(&d.Spec.RevisionHistoryLimit, 10)
	orDefault(&d.Spec.ProgressDeadlineSeconds, 600)
	if d.Spec.Strategy.Type == "" {
		q := intstr.FromString("25%")
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &q, MaxSurge: &q}}
	}
	ps := &d.Spec.Template.Spec
	ps.RestartPolicy = cmp.Or(ps.RestartPolicy, corev1.RestartPolicyAlways)
	ps.DNSPolicy = cmp.Or(ps.DNSPolicy, corev1.DNSClusterFirst)
	ps.SchedulerName = cmp.Or(ps.SchedulerName, corev1.DefaultSchedulerName)
	orDefault(&ps.SecurityContext, corev1.PodSecurityContext{})
	orDefault(&ps.TerminationGracePeriodSeconds, 30)
	for i := range ps.Containers {
		c := &ps.Containers[i]
		c.TerminationMessagePath = cmp.Or(c.TerminationMessagePath, corev1.TerminationMessagePathDefault)
		c.TerminationMessagePolicy = cmp.Or(c.TerminationMessagePolicy, corev1.TerminationMessageReadFile)
		c.ImagePullPolicy = cmp.Or(c.ImagePullPolicy, corev1.PullIfNotPresent)
		for j := range c.Ports {
			c.Ports[j].Protocol = cmp.Or(c.Ports[j].Protocol, corev1.ProtocolTCP)
		}
	}
}

// orDefault points *p at v when it is nil.
func orDefault[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

// benchApplyBody is the Deployment tests/bench/apply sends, as JSON.
func benchApplyBody(name, image string) []byte {
	return []byte(fmt.Sprintf(`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":%[1]q,"namespace":"default","labels":{"app":%[1]q}},`+
		`"spec":{"replicas":1,"selector":{"matchLabels":{"app":%[1]q}},"template":{"metadata":{"labels":{"app":%[1]q}},`+
		`"spec":{"containers":[{"name":"app","image":%[2]q,"ports":[{"name":"http","containerPort":8080}],"env":[{"name":"MODE","value":"bench"}]}]}}}}`, name, image))
}

func deploymentManagers(tb testing.TB) *Managers {
	tb.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	m, err := NewManagers(Config{Scheme: scheme, Kind: appsv1.SchemeGroupVersion.WithKind("Deployment"), Default: defaultDeployment,
		ResetFields: StatusResetFields(nil)})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkDeploymentApply is the field manager's part of tests/bench/apply's server-side
// apply: the whole Deployment applied again with its image changed, on the object the
// previous apply stored; "reflect" with typed values read from the Go objects (the
// library's way), "unstructured" with the field manager Managers gives applies.
func BenchmarkDeploymentApply(b *testing.B) {
	fms := deploymentManagers(b).For(Main)
	for _, tc := range []struct {
		name  string
		apply func(live, patch runtime.Object, manager string, force bool) (runtime.Object, error)
	}{{"reflect", fms.library.Apply}, {"unstructured", fms.Apply}} {
		b.Run(tc.name, func(b *testing.B) {
			var live runtime.Object = &appsv1.Deployment{}
			step := func(i int) {
				patch, _, err := DecodePatch(benchApplyBody("web-0", fmt.Sprintf("app:%d", i%2)), true)
				if err != nil {
					b.Fatal(err)
				}
				out, err := tc.apply(live, patch, "bench", true)
				if err != nil {
					b.Fatal(err)
				}
				defaultDeployment(out)
				live = out
			}
			step(0)
			step(1)
			for i := 0; b.Loop(); i++ {
				step(i)
			}
		})
	}
}

// BenchmarkPodStatusWrite is a kubelet's readiness flip on a running pod that three
// managers wrote (a controller created it, the scheduler bound it, the kubelet keeps its
// status), through the library as kube-apiserver builds it and through Managers.
func BenchmarkPodStatusWrite(b *testing.B) {
	m, err := NewManagers(Config{Scheme: clientgoscheme.Scheme, Kind: corev1.SchemeGroupVersion.WithKind("Pod"),
		ResetFields: StatusResetFields(nil)})
	if err != nil {
		b.Fatal(err)
	}
	now := metav1.Now()
	created := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{"app": "web", "pod-template-hash": "abc"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "u1"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}}}}}
	for _, tc := range []struct {
		name   string
		update func(live, obj runtime.Object, manager string) runtime.Object
		status func(live, obj runtime.Object, manager string) runtime.Object
	}{
		{"library", m.For(Main).library.UpdateNoErrors, m.For(Status).library.UpdateNoErrors},
		{"managers", m.For(Main).UpdateNoErrors, m.For(Status).UpdateNoErrors},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cur := tc.update(&corev1.Pod{}, created.DeepCopy(), "kube-controller-manager").(*corev1.Pod)
			bound := cur.DeepCopy()
			bound.Spec.NodeName = "node-0"
			cur = tc.update(cur, bound, "kube-scheduler").(*corev1.Pod)
			running := cur.DeepCopy()
			running.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.1", StartTime: &now, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: true}}}
			cur = tc.status(cur, running, "kubelet").(*corev1.Pod)
			for i := 0; b.Loop(); i++ {
				cur = tc.status(cur, flipReadiness(cur, i), "kubelet").(*corev1.Pod)
				if len(cur.ManagedFields) != 3 {
					b.Fatalf("managedFields: %v", cur.ManagedFields)
				}
			}
		})
	}
}

// flipReadiness is a copy of a running pod whose Ready and ContainersReady conditions (its
// first two) and first container's readiness are false for even i, true for odd.
func flipReadiness(pod *corev1.Pod, i int) *corev1.Pod {
	next := pod.DeepCopy()
	st := corev1.ConditionTrue
	if i%2 == 0 {
		st = corev1.ConditionFalse
	}
	next.Status.Conditions[0].Status, next.Status.Conditions[1].Status = st, st
	next.Status.ContainerStatuses[0].Ready = st == corev1.ConditionTrue
	return next
}
