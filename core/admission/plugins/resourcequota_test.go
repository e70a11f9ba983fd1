package plugins

import (
	"context"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func rq(name string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "1"},
		Spec: corev1.ResourceQuotaSpec{Hard: hard}, Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
}

// service is a Service of one port.
func service(name string, typ corev1.ServiceType, allocateNodePorts *bool) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: typ,
		Ports: []corev1.ServicePort{{Port: 80}}, AllocateLoadBalancerNodePorts: allocateNodePorts}}
}

func TestResourceQuota(t *testing.T) {
	cpuPod := pod(corev1.Container{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{
		Requests: rl("cpu", "500m", "memory", "64Mi"), Limits: rl("cpu", "1", "memory", "64Mi")}})
	tests := []struct {
		name     string
		quotas   []*corev1.ResourceQuota
		resource string
		obj      runtime.Object
		dryRun   bool
		wantErr  string
		wantUsed map[string]corev1.ResourceList
	}{
		{name: "no quota", resource: "pods", obj: pod()},
		{name: "pod counted", quotas: []*corev1.ResourceQuota{rq("q", rl("pods", "2"), rl("pods", "1"))}, resource: "pods", obj: pod(),
			wantUsed: map[string]corev1.ResourceList{"q": rl("pods", "2")}},
		{name: "pod over count", quotas: []*corev1.ResourceQuota{rq("q", rl("pods", "10"), rl("pods", "10"))}, resource: "pods", obj: pod(),
			wantErr: `pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=10, limited: pods=10`},
		{name: "dry run checks but does not charge", quotas: []*corev1.ResourceQuota{rq("q", rl("pods", "2"), rl("pods", "1"))}, resource: "pods", obj: pod(), dryRun: true,
			wantUsed: map[string]corev1.ResourceList{"q": rl("pods", "1")}},
		{name: "compute charged", quotas: []*corev1.ResourceQuota{rq("q", rl("requests.cpu", "2", "limits.memory", "1Gi"), rl("requests.cpu", "1", "limits.memory", "0"))},
			resource: "pods", obj: cpuPod, wantUsed: map[string]corev1.ResourceList{"q": rl("requests.cpu", "1500m", "limits.memory", "64Mi")}},
		{name: "compute exceeded", quotas: []*corev1.ResourceQuota{rq("q", rl("requests.cpu", "1"), rl("requests.cpu", "600m"))}, resource: "pods", obj: cpuPod,
			wantErr: `pods "p" is forbidden: exceeded quota: q, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1`},
		{name: "compute quota needs requests", quotas: []*corev1.ResourceQuota{rq("q", rl("requests.cpu", "1", "limits.memory", "1Gi"), rl("requests.cpu", "0", "limits.memory", "0"))},
			resource: "pods", obj: pod(), wantErr: `pods "p" is forbidden: failed quota: q: must specify limits.memory for: c; requests.cpu for: c`},
		{name: "status unknown", quotas: []*corev1.ResourceQuota{rq("q", rl("pods", "1"), nil)}, resource: "pods", obj: pod(),
			wantErr: `pods "p" is forbidden: status unknown for quota: q, resources: pods`},
		{name: "configmap classic and count names", quotas: []*corev1.ResourceQuota{rq("q", rl("configmaps", "5", "count/configmaps", "5", "pods", "1"), rl("configmaps", "0", "count/configmaps", "4", "pods", "1"))},
			resource: "configmaps", obj: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}},
			wantUsed: map[string]corev1.ResourceList{"q": rl("configmaps", "1", "count/configmaps", "5", "pods", "1")}},
		{name: "two quotas, second exceeded, nothing charged",
			quotas:   []*corev1.ResourceQuota{rq("a", rl("pods", "5"), rl("pods", "0")), rq("b", rl("count/pods", "1"), rl("count/pods", "1"))},
			resource: "pods", obj: pod(), wantErr: `pods "p" is forbidden: exceeded quota: b, requested: count/pods=1, used: count/pods=1, limited: count/pods=1`,
			wantUsed: map[string]corev1.ResourceList{"a": rl("pods", "0"), "b": rl("count/pods", "1")}},
		{name: "node port service counted", quotas: []*corev1.ResourceQuota{rq("q", rl("services", "10", "services.nodeports", "1"), rl("services", "0", "services.nodeports", "0"))},
			resource: "services", obj: service("np", corev1.ServiceTypeNodePort, nil),
			wantUsed: map[string]corev1.ResourceList{"q": rl("services", "1", "services.nodeports", "1")}},
		{name: "load balancer needs a node port", quotas: []*corev1.ResourceQuota{rq("q", rl("services.loadbalancers", "1", "services.nodeports", "1"), rl("services.loadbalancers", "0", "services.nodeports", "1"))},
			resource: "services", obj: service("lb", corev1.ServiceTypeLoadBalancer, nil),
			wantErr: `services "lb" is forbidden: exceeded quota: q, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1`},
		{name: "load balancer without node ports", quotas: []*corev1.ResourceQuota{rq("q", rl("services.loadbalancers", "1", "services.nodeports", "1"), rl("services.loadbalancers", "0", "services.nodeports", "1"))},
			resource: "services", obj: service("lb", corev1.ServiceTypeLoadBalancer, new(false)),
			wantUsed: map[string]corev1.ResourceList{"q": rl("services.loadbalancers", "1", "services.nodeports", "1")}},
		{name: "scoped quota ignores best-effort pod", quotas: []*corev1.ResourceQuota{func() *corev1.ResourceQuota {
			q := rq("q", rl("pods", "0"), rl("pods", "0"))
			q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}
			return q
		}()}, resource: "pods", obj: pod(), wantUsed: map[string]corev1.ResourceList{"q": rl("pods", "0")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeReader{quotas: map[string]*corev1.ResourceQuota{}}
			for _, q := range tt.quotas {
				f.quotas[q.Name] = q.DeepCopy()
			}
			a := attrs(admission.Create, tt.resource, tt.obj)
			a.DryRun = tt.dryRun
			err := (&ResourceQuota{Quotas: f}).Validate(context.Background(), a)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !apierrors.IsForbidden(err) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.wantUsed {
				got := f.quotas[name].Status.Used
				for n, q := range want {
					if v := got[n]; v.Cmp(q) != 0 {
						t.Errorf("quota %s used %s = %s, want %s", name, n, v.String(), q.String())
					}
				}
			}
		})
	}
}

func TestResourceQuotaRetriesConflicts(t *testing.T) {
	f := &fakeReader{quotas: map[string]*corev1.ResourceQuota{"q": rq("q", rl("pods", "3"), rl("pods", "0"))}, conflictOnce: true}
	if err := (&ResourceQuota{Quotas: f}).Validate(context.Background(), attrs(admission.Create, "pods", pod())); err != nil {
		t.Fatal(err)
	}
	if used := f.quotas["q"].Status.Used["pods"]; used.Value() != 1 || f.updates != 1 {
		t.Fatalf("used = %s after %d updates, want 1 after 1", used.String(), f.updates)
	}
}

func TestResourceQuotaIgnores(t *testing.T) {
	f := &fakeReader{quotas: map[string]*corev1.ResourceQuota{"q": rq("q", rl("pods", "0"), rl("pods", "0"))}}
	p := &ResourceQuota{Quotas: f}
	status := attrs(admission.Create, "pods", pod())
	status.Subresource = "binding"
	cluster := attrs(admission.Create, "pods", pod())
	cluster.Namespace = ""
	for _, a := range []*admission.Attributes{attrs(admission.Update, "pods", pod()), attrs(admission.Delete, "pods", nil), status, cluster} {
		if err := p.Validate(context.Background(), a); err != nil {
			t.Errorf("%s %s: %v", a.Operation, a.Subresource, err)
		}
	}
}

// TestResourceQuotaConcurrentCreates: 20 concurrent creates against pods=10 admit exactly 10.
func TestResourceQuotaConcurrentCreates(t *testing.T) {
	f := &fakeReader{quotas: map[string]*corev1.ResourceQuota{"q": rq("q", rl("pods", "10"), rl("pods", "0"))}}
	p := &ResourceQuota{Quotas: f}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, denied := 0, 0
	for range 20 {
		wg.Go(func() {
			err := p.Validate(context.Background(), &admission.Attributes{Operation: admission.Create, Namespace: "ns", Name: "p",
				Object: pod(), Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted++
			case apierrors.IsForbidden(err):
				denied++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	if admitted != 10 || denied != 10 {
		t.Fatalf("admitted %d denied %d, want 10 and 10", admitted, denied)
	}
	if used := f.quotas["q"].Status.Used["pods"]; used.Value() != 10 {
		t.Fatalf("used = %s", used.String())
	}
}
