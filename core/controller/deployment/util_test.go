package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestResolveFenceposts(t *testing.T) {
	for _, tc := range []struct {
		surge, unavailable intstr.IntOrString
		desired            int32
		wantS, wantU       int32
	}{
		{intstr.FromString("25%"), intstr.FromString("25%"), 10, 3, 2}, // surge rounds up, unavailable down
		{intstr.FromString("25%"), intstr.FromString("25%"), 4, 1, 1},
		{intstr.FromString("25%"), intstr.FromString("25%"), 1, 1, 0},
		{intstr.FromString("0%"), intstr.FromString("0%"), 10, 0, 1}, // both zero: one may be unavailable
		{intstr.FromInt32(0), intstr.FromInt32(0), 5, 0, 1},
		{intstr.FromInt32(3), intstr.FromInt32(1), 10, 3, 1},
		{intstr.FromString("33%"), intstr.FromString("33%"), 10, 4, 3},
		{intstr.FromString("100%"), intstr.FromString("0%"), 7, 7, 0},
		{intstr.FromString("10%"), intstr.FromString("10%"), 0, 0, 1},
	} {
		s, u, err := ResolveFenceposts(&tc.surge, &tc.unavailable, tc.desired)
		if err != nil {
			t.Fatal(err)
		}
		if s != tc.wantS || u != tc.wantU {
			t.Errorf("ResolveFenceposts(%s, %s, %d) = %d, %d; want %d, %d", tc.surge.String(), tc.unavailable.String(), tc.desired, s, u, tc.wantS, tc.wantU)
		}
	}
}

func TestMaxUnavailableCappedAndRecreate(t *testing.T) {
	n := int32(2)
	u := intstr.FromInt32(5)
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &n, Strategy: appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &u}}}}
	if got := MaxUnavailable(d); got != 2 {
		t.Errorf("MaxUnavailable = %d, want capped at replicas 2", got)
	}
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if MaxUnavailable(d) != 0 || MaxSurge(d) != 0 {
		t.Error("Recreate has no surge or unavailable budget")
	}
}

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

func TestComputeHash(t *testing.T) {
	a, b := template("img:1"), template("img:2")
	h1 := ComputeHash(&a, nil)
	if h1 != ComputeHash(&a, nil) {
		t.Fatal("hash is not deterministic")
	}
	if h1 == ComputeHash(&b, nil) {
		t.Fatal("different templates hash the same")
	}
	one := int32(1)
	if h1 == ComputeHash(&a, &one) {
		t.Fatal("collisionCount does not change the hash")
	}
	if errs := validation.IsValidLabelValue(h1); len(errs) > 0 {
		t.Fatalf("hash %q is not a label value: %v", h1, errs)
	}
	for _, r := range h1 {
		if r == 'a' || r == 'e' || r == 'i' || r == 'o' || r == 'u' || r == '0' || r == '1' || r == '3' {
			t.Fatalf("hash %q is not SafeEncodeString output", h1)
		}
	}
}

func TestEqualIgnoreHash(t *testing.T) {
	a, b := template("img"), template("img")
	b.Labels[PodTemplateHashLabel] = "abc"
	if !equalIgnoreHash(&a, &b) {
		t.Error("templates differing only in the hash label must be equal")
	}
	c := template("other")
	if equalIgnoreHash(&a, &c) {
		t.Error("different images must differ")
	}
}

func rsWith(name string, n int32, maxAnn string) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}, Spec: appsv1.ReplicaSetSpec{Replicas: &n}}
	if maxAnn != "" {
		rs.Annotations[MaxReplicasAnnotation] = maxAnn
	}
	return rs
}

func TestReplicaSetProportion(t *testing.T) {
	want := int32(20)
	s, u := intstr.FromInt32(2), intstr.FromInt32(1)
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &want, Strategy: appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}}}}
	// Scaled 10 -> 20 (max 12 -> 22): a ReplicaSet with 6 of 12 gets 6*22/12 = 11, i.e. +5.
	if got := replicaSetProportion(rsWith("a", 6, "12"), d, 10, 0); got != 5 {
		t.Errorf("proportion = %d, want 5", got)
	}
	// Never more than what is left to add.
	if got := replicaSetProportion(rsWith("a", 6, "12"), d, 10, 8); got != 2 {
		t.Errorf("proportion = %d, want 2", got)
	}
}

func TestNewRSNewReplicasCountsPodsStillThere(t *testing.T) {
	want := int32(10)
	s, u := intstr.FromInt32(2), intstr.FromInt32(0)
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &want, Strategy: appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}}}}
	old := rsWith("old", 8, "")
	old.Status.Replicas = 10 // scaled down, pods not deleted yet
	newRS := rsWith("new", 2, "")
	newRS.Status.Replicas = 2
	if got := newRSNewReplicas(d, []*appsv1.ReplicaSet{old, newRS}, newRS); got != 2 {
		t.Errorf("new replicas = %d, want 2 (12 pods already exist)", got)
	}
	old.Status.Replicas = 8
	if got := newRSNewReplicas(d, []*appsv1.ReplicaSet{old, newRS}, newRS); got != 4 {
		t.Errorf("new replicas = %d, want 4", got)
	}
}

func TestSetNewReplicaSetAnnotationsRollback(t *testing.T) {
	n := int32(3)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"kubernetes.io/change-cause": "undo", RevisionAnnotation: "9"}},
		Spec: appsv1.DeploymentSpec{Replicas: &n}}
	rs := rsWith("a", 0, "")
	rs.Annotations[RevisionAnnotation] = "2"
	if !setNewReplicaSetAnnotations(d, rs, 5, true) {
		t.Fatal("no change reported")
	}
	if rs.Annotations[RevisionAnnotation] != "5" || rs.Annotations[RevisionHistoryAnnotation] != "2" || rs.Annotations["kubernetes.io/change-cause"] != "undo" {
		t.Fatalf("annotations = %v", rs.Annotations)
	}
	// Never lowered.
	if setNewReplicaSetAnnotations(d, rs, 4, true) || rs.Annotations[RevisionAnnotation] != "5" {
		t.Fatalf("revision lowered: %v", rs.Annotations)
	}
}
