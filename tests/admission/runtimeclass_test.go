package admission_test

import (
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"maps"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestBuiltinRuntimeClass: a pod naming a missing RuntimeClass is refused with 403, and
// one naming an existing class gets its overhead, node selector and tolerations.
func TestBuiltinRuntimeClass(t *testing.T) {
	s := testserver.StartAPI(t)
	cs := s.Clientset(t, false)
	ctx := context.Background()
	ns := builtinNamespace(t, cs)
	overhead := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "sandboxed"}, Handler: "runsc",
		Overhead: &nodev1.Overhead{PodFixed: overhead},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "gvisor"},
			Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	p := simplePod("missing")
	p.Spec.RuntimeClassName = ptr.To("ghost")
	_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	wantStatus(t, err, 403, `pods "missing" is forbidden: pod rejected: RuntimeClass "ghost" not found`)

	p = simplePod("sandboxed")
	p.Spec.RuntimeClassName = ptr.To("sandboxed")
	got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"wasmplane.test/nowhere": "true", "sandbox": "gvisor"}
	if !equality.Semantic.DeepEqual(got.Spec.Overhead, overhead) || !maps.Equal(got.Spec.NodeSelector, want) {
		t.Fatalf("overhead %v node selector %v", got.Spec.Overhead, got.Spec.NodeSelector)
	}
	found := false
	for _, tol := range got.Spec.Tolerations {
		found = found || tol.Key == "sandbox"
	}
	if !found {
		t.Fatalf("tolerations %+v lack the class's", got.Spec.Tolerations)
	}

	p = simplePod("conflict")
	p.Spec.RuntimeClassName = ptr.To("sandboxed")
	p.Spec.NodeSelector["sandbox"] = "kata"
	_, err = cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	wantStatus(t, err, 403, "conflict: runtimeClass.scheduling.nodeSelector[sandbox] = gvisor; pod.spec.nodeSelector[sandbox] = kata")

	// A deleted class refuses new pods once the watch cache has seen the delete: the
	// lookup reads the cache and falls back to storage only when the class is missing
	// there, as Kubernetes' plugin reads its informer, so a pod created in between is
	// admitted (and deleted here before the next try, under a generated name).
	if err := cs.NodeV1().RuntimeClasses().Delete(ctx, "sandboxed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Condition(t, 20*time.Second, "pods of the deleted class to be refused", func(ctx context.Context) (bool, error) {
		p := simplePod("")
		p.GenerateName = "after-delete-"
		p.Spec.RuntimeClassName = ptr.To("sandboxed")
		created, cerr := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err = cerr; err != nil {
			return true, nil
		}
		return false, cs.CoreV1().Pods(ns).Delete(ctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	wantStatus(t, err, 403, `RuntimeClass "sandboxed" not found`)
}

// testServiceQuota: a quota on node ports and load balancers charges Services by type,
// refuses a LoadBalancer Service past the node ports left, and gets them back when the
// Services go.
func testServiceQuota(t *testing.T, s *testserver.Server) {
	cs := s.Clientset(t, false)
	ctx := context.Background()
	ns := builtinNamespace(t, cs)
	hard := corev1.ResourceList{corev1.ResourceServices: resource.MustParse("10"), corev1.ResourceServicesNodePorts: resource.MustParse("1"),
		corev1.ResourceServicesLoadBalancers: resource.MustParse("1")}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "services"},
		Spec: corev1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	usedIs := func(services, nodePorts int64) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "services", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s, sok := q.Status.Used[corev1.ResourceServices]
			n, nok := q.Status.Used[corev1.ResourceServicesNodePorts]
			return sok && nok && s.Value() == services && n.Value() == nodePorts, nil
		}
	}
	waitfor.Condition(t, 20*time.Second, "the controller to fill the quota status", usedIs(0, 0))
	svc := func(name string, typ corev1.ServiceType) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: typ,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	}
	for _, sv := range []*corev1.Service{svc("plain", corev1.ServiceTypeClusterIP), svc("np", corev1.ServiceTypeNodePort)} {
		if _, err := cs.CoreV1().Services(ns).Create(ctx, sv, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create service %s: %v", sv.Name, err)
		}
	}
	_, err := cs.CoreV1().Services(ns).Create(ctx, svc("lb", corev1.ServiceTypeLoadBalancer), metav1.CreateOptions{})
	wantStatus(t, err, 403, "exceeded quota: services, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1")
	waitfor.Condition(t, 20*time.Second, "two services and one node port charged", usedIs(2, 1))
	for _, name := range []string{"plain", "np"} {
		if err := cs.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Condition(t, 20*time.Second, "the services' quota released", usedIs(0, 0))
}
