package plugins

import (
	"context"
	"sync"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeReader serves every lookup interface from maps.
type fakeReader struct {
	accounts map[string]*corev1.ServiceAccount
	classes  []schedulingv1.PriorityClass
	ranges   []corev1.LimitRange
	runtimes []nodev1.RuntimeClass

	mu      sync.Mutex
	quotas  map[string]*corev1.ResourceQuota
	rv      int
	updates int
	// conflictOnce makes the next status update fail with a conflict (another writer).
	conflictOnce bool
}

func (f *fakeReader) GetServiceAccount(_ context.Context, _, name string) (*corev1.ServiceAccount, error) {
	if sa, ok := f.accounts[name]; ok {
		return sa, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
}

func (f *fakeReader) GetPriorityClass(_ context.Context, name string) (*schedulingv1.PriorityClass, error) {
	for i := range f.classes {
		if f.classes[i].Name == name {
			return &f.classes[i], nil
		}
	}
	return nil, apierrors.NewNotFound(schedulingv1.Resource("priorityclasses"), name)
}

func (f *fakeReader) GetRuntimeClass(_ context.Context, name string) (*nodev1.RuntimeClass, error) {
	for i := range f.runtimes {
		if f.runtimes[i].Name == name {
			return f.runtimes[i].DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(nodev1.Resource("runtimeclasses"), name)
}

func (f *fakeReader) ListPriorityClasses(context.Context, bool) ([]schedulingv1.PriorityClass, error) {
	return f.classes, nil
}

func (f *fakeReader) ListLimitRanges(context.Context, string) ([]corev1.LimitRange, error) {
	return f.ranges, nil
}

func (f *fakeReader) ListQuotas(_ context.Context, _ string, _ bool) ([]corev1.ResourceQuota, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []corev1.ResourceQuota
	for _, q := range f.quotas {
		out = append(out, *q.DeepCopy())
	}
	return out, nil
}

func (f *fakeReader) UpdateQuotaStatus(_ context.Context, q *corev1.ResourceQuota) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.quotas[q.Name]
	if !ok {
		return apierrors.NewNotFound(corev1.Resource("resourcequotas"), q.Name)
	}
	if f.conflictOnce || cur.ResourceVersion != q.ResourceVersion {
		f.conflictOnce = false
		f.rv++
		cur.ResourceVersion = itoa(f.rv)
		return apierrors.NewConflict(corev1.Resource("resourcequotas"), q.Name, nil)
	}
	f.rv++
	cur.Status = *q.Status.DeepCopy()
	cur.ResourceVersion = itoa(f.rv)
	f.updates++
	return nil
}

// itoa names the fake's i-th write. The prefix keeps it apart from the resourceVersions
// tests give their objects ("1"), or a copy listed before the first write would still
// match after it and a stale charge would pass.
func itoa(i int) string { return "w" + resource.NewQuantity(int64(i), resource.DecimalSI).String() }

func attrs(op admission.Operation, resourceName string, obj runtime.Object) *admission.Attributes {
	a := &admission.Attributes{Operation: op, Namespace: "ns", Object: obj,
		Resource: schema.GroupVersionResource{Version: "v1", Resource: resourceName}}
	if m, err := metaName(obj); err == nil {
		a.Name = m
	}
	return a
}

func metaName(obj runtime.Object) (string, error) {
	if o, ok := obj.(metav1.Object); ok {
		return o.GetName(), nil
	}
	return "", nil
}

func pod(containers ...corev1.Container) *corev1.Pod {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "c", Image: "i"}}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: containers}}
}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}
