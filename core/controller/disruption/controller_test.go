package disruption

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func pod(name string, ready bool, owner *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "web"}, UID: types.UID("uid-" + name)}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func rsOwner() *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-uid", Controller: ptr.To(true)}
}

func budget(min, maxUnavailable *intstr.IntOrString, disrupted map[string]metav1.Time) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pdb", Generation: 3},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: min, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptedPods: disrupted}}
}

func TestCompute(t *testing.T) {
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "dep-uid"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4)}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "rs-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "dep-uid", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4)}}
	three := []*corev1.Pod{pod("a", true, rsOwner()), pod("b", true, rsOwner()), pod("c", true, rsOwner())}
	for _, tc := range []struct {
		name                                string
		pdb                                 *policyv1.PodDisruptionBudget
		pods                                []*corev1.Pod
		expected, desired, healthy, allowed int32
		condition                           string
		disrupted                           int
		err                                 bool
	}{
		{name: "minAvailable 2 of 3 ready", pdb: budget(ptr.To(intstr.FromInt32(2)), nil, nil), pods: three,
			expected: 3, desired: 2, healthy: 3, allowed: 1, condition: policyv1.SufficientPodsReason},
		{name: "minAvailable 3 of 3 ready", pdb: budget(ptr.To(intstr.FromInt32(3)), nil, nil), pods: three,
			expected: 3, desired: 3, healthy: 3, allowed: 0, condition: policyv1.InsufficientPodsReason},
		{name: "an unready pod is not healthy", pdb: budget(ptr.To(intstr.FromInt32(2)), nil, nil),
			pods:     []*corev1.Pod{pod("a", true, rsOwner()), pod("b", false, rsOwner()), pod("c", true, rsOwner())},
			expected: 3, desired: 2, healthy: 2, allowed: 0, condition: policyv1.InsufficientPodsReason},
		{name: "maxUnavailable 1 of the Deployment's 4", pdb: budget(nil, ptr.To(intstr.FromInt32(1)), nil), pods: three,
			expected: 4, desired: 3, healthy: 3, allowed: 0, condition: policyv1.InsufficientPodsReason},
		{name: "minAvailable 50% of the Deployment's 4", pdb: budget(ptr.To(intstr.FromString("50%")), nil, nil), pods: three,
			expected: 4, desired: 2, healthy: 3, allowed: 1, condition: policyv1.SufficientPodsReason},
		{name: "a recently evicted pod is not healthy", pdb: budget(ptr.To(intstr.FromInt32(1)), nil, map[string]metav1.Time{"a": metav1.NewTime(now.Add(-time.Minute))}),
			pods: three, expected: 3, desired: 1, healthy: 2, allowed: 1, condition: policyv1.SufficientPodsReason, disrupted: 1},
		{name: "an overdue evicted pod counts again", pdb: budget(ptr.To(intstr.FromInt32(1)), nil, map[string]metav1.Time{"a": metav1.NewTime(now.Add(-3 * time.Minute))}),
			pods: three, expected: 3, desired: 1, healthy: 3, allowed: 2, condition: policyv1.SufficientPodsReason},
		{name: "no pods: nothing allowed", pdb: budget(ptr.To(intstr.FromInt32(0)), nil, nil),
			expected: 0, desired: 0, healthy: 0, allowed: 0, condition: policyv1.InsufficientPodsReason},
		{name: "a percentage over pods of an unknown controller fails", pdb: budget(ptr.To(intstr.FromString("50%")), nil, nil),
			pods: []*corev1.Pod{pod("a", true, &metav1.OwnerReference{Kind: "Widget", Name: "w", UID: "w", Controller: ptr.To(true)})}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{deployment, rs}
			client := fake.NewClientset(objs...)
			factory := informers.NewSharedInformerFactory(client, 0)
			c, err := New(client, factory, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			c.now = func() time.Time { return now }
			for _, p := range tc.pods {
				if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
					t.Fatal(err)
				}
			}
			st, _, err := c.compute(context.Background(), tc.pdb)
			if tc.err {
				if err == nil {
					t.Fatalf("want an error, got status %+v", st)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.ExpectedPods != tc.expected || st.DesiredHealthy != tc.desired || st.CurrentHealthy != tc.healthy || st.DisruptionsAllowed != tc.allowed {
				t.Errorf("expected/desired/healthy/allowed = %d/%d/%d/%d, want %d/%d/%d/%d", st.ExpectedPods, st.DesiredHealthy, st.CurrentHealthy,
					st.DisruptionsAllowed, tc.expected, tc.desired, tc.healthy, tc.allowed)
			}
			if st.ObservedGeneration != 3 {
				t.Errorf("observedGeneration %d, want 3", st.ObservedGeneration)
			}
			if c := meta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition); c == nil || c.Reason != tc.condition {
				t.Errorf("condition %+v, want reason %s", c, tc.condition)
			}
			if len(st.DisruptedPods) != tc.disrupted {
				t.Errorf("disrupted pods %v, want %d", st.DisruptedPods, tc.disrupted)
			}
		})
	}
}
