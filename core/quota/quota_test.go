package quota

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func TestUsage(t *testing.T) {
	now := time.Now()
	podGR := schema.GroupResource{Resource: "pods"}
	withRes := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}, Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}},
		}}}
	done := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	stuck := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now.Add(-time.Minute)}, DeletionGracePeriodSeconds: ptr.To(int64(30))}}
	tests := []struct {
		name string
		gr   schema.GroupResource
		obj  runtime.Object
		want string
	}{
		{name: "pod with init max", gr: podGR, obj: withRes, want: "count/pods=1,cpu=2,limits.memory=1Gi,pods=1,requests.cpu=2"},
		{name: "terminal pod counts as object only", gr: podGR, obj: done, want: "count/pods=1"},
		{name: "pod stuck terminating", gr: podGR, obj: stuck, want: "count/pods=1"},
		{name: "secret", gr: schema.GroupResource{Resource: "secrets"}, obj: &corev1.Secret{}, want: "count/secrets=1,secrets=1"},
		{name: "grouped", gr: schema.GroupResource{Group: "apps", Resource: "deployments"}, obj: &corev1.Secret{}, want: "count/deployments.apps=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PrettyPrint(Usage(tt.gr, tt.obj, now)); got != tt.want {
				t.Errorf("usage = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestResourceOf(t *testing.T) {
	tests := []struct {
		name corev1.ResourceName
		want schema.GroupResource
		ok   bool
	}{
		{"pods", schema.GroupResource{Resource: "pods"}, true},
		{"count/deployments.apps", schema.GroupResource{Group: "apps", Resource: "deployments"}, true},
		{"count/widgets.example.com", schema.GroupResource{Group: "example.com", Resource: "widgets"}, true},
		{"requests.cpu", schema.GroupResource{}, false},
	}
	for _, tt := range tests {
		got, ok := ResourceOf(tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ResourceOf(%s) = %v %v", tt.name, got, ok)
		}
	}
}

func TestMatchesScopes(t *testing.T) {
	podGR := schema.GroupResource{Resource: "pods"}
	be := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}, PriorityClassName: "high"}}
	term := &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: ptr.To(int64(10)), Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	q := func(scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Scopes: scopes}}
	}
	sel := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
		{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}}}}
	tests := []struct {
		name string
		q    *corev1.ResourceQuota
		gr   schema.GroupResource
		obj  runtime.Object
		want bool
	}{
		{"unscoped matches anything", q(), schema.GroupResource{Resource: "secrets"}, &corev1.Secret{}, true},
		{"scoped never matches non-pods", q(corev1.ResourceQuotaScopeBestEffort), schema.GroupResource{Resource: "secrets"}, &corev1.Secret{}, false},
		{"best effort", q(corev1.ResourceQuotaScopeBestEffort), podGR, be, true},
		{"not best effort", q(corev1.ResourceQuotaScopeNotBestEffort), podGR, be, false},
		{"terminating", q(corev1.ResourceQuotaScopeTerminating), podGR, term, true},
		{"not terminating", q(corev1.ResourceQuotaScopeNotTerminating), podGR, term, false},
		{"priority class in", sel, podGR, be, true},
		{"priority class not in", sel, podGR, term, false},
	}
	for _, tt := range tests {
		if got := Matches(tt.q, tt.gr, tt.obj); got != tt.want {
			t.Errorf("%s: Matches = %v, want %v", tt.name, got, tt.want)
		}
	}
}
