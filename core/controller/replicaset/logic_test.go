package replicaset

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpectations(t *testing.T) {
	now := time.Unix(1000, 0)
	e := NewExpectations(func() time.Time { return now })
	if !e.Satisfied("a") {
		t.Fatal("unknown key must be satisfied")
	}
	e.ExpectCreations("a", 2)
	if e.Satisfied("a") {
		t.Fatal("outstanding creations")
	}
	e.CreationObserved("a")
	if e.Satisfied("a") {
		t.Fatal("one creation still outstanding")
	}
	e.CreationObserved("a")
	if !e.Satisfied("a") {
		t.Fatal("all creations observed")
	}
	e.ExpectDeletions("a", []string{"ns/p1", "ns/p2"})
	e.DeletionObserved("a", "ns/p1")
	e.DeletionObserved("a", "ns/p1") // the same pod twice counts once
	if e.Satisfied("a") {
		t.Fatal("p2 still expected")
	}
	e.DeletionObserved("a", "ns/p2")
	if !e.Satisfied("a") {
		t.Fatal("all deletions observed")
	}
	e.ExpectCreations("a", 5)
	e.LowerCreations("a", 2) // skipped creations
	if add, _ := e.pending("a"); add != 3 {
		t.Fatalf("pending = %d, want 3", add)
	}
	now = now.Add(expectationsTTL + time.Second)
	if !e.Satisfied("a") {
		t.Fatal("expired expectations must let the controller sync")
	}
	e.Delete("a")
	if add, del := e.pending("a"); add != 0 || del != 0 {
		t.Fatal("deleted")
	}
}

func pod(name, node string, phase corev1.PodPhase, ready bool, readySince time.Time, restarts int32, created time.Time) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase,
			ContainerStatuses: []corev1.ContainerStatus{{RestartCount: restarts}}}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(readySince)}}
	return p
}

func TestDeletionRanking(t *testing.T) {
	t0 := time.Unix(10000, 0)
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name        string
		first, then *corev1.Pod
	}{
		{"unassigned before assigned", pod("a", "", corev1.PodRunning, true, t0, 0, t0), pod("b", "n1", corev1.PodRunning, true, t0, 0, t0)},
		{"pending before unknown", pod("a", "n", corev1.PodPending, false, t0, 0, t0), pod("b", "n", corev1.PodUnknown, false, t0, 0, t0)},
		{"unknown before running", pod("a", "n", corev1.PodUnknown, false, t0, 0, t0), pod("b", "n", corev1.PodRunning, false, t0, 0, t0)},
		{"not ready before ready", pod("a", "n", corev1.PodRunning, false, t0, 0, t0), pod("b", "n", corev1.PodRunning, true, t0, 0, t0)},
		{"ready shorter before longer", pod("a", "n", corev1.PodRunning, true, t0.Add(time.Minute), 0, t0), pod("b", "n", corev1.PodRunning, true, t0, 0, t0)},
		{"more restarts first", pod("a", "n", corev1.PodRunning, true, t0, 5, t0), pod("b", "n", corev1.PodRunning, true, t0, 1, t0)},
		{"newer first", pod("a", "n", corev1.PodRunning, true, t0, 0, t0.Add(time.Second)), pod("b", "n", corev1.PodRunning, true, t0, 0, t0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := rankedPod{pod: tc.first}, rankedPod{pod: tc.then}
			if !deletionLess(a, b, now) || deletionLess(b, a, now) {
				t.Errorf("%s should be deleted before %s", tc.first.Name, tc.then.Name)
			}
			got := podsToDelete([]*corev1.Pod{tc.then, tc.first}, nil, 1, now)
			if got[0].Name != tc.first.Name {
				t.Errorf("podsToDelete picked %s", got[0].Name)
			}
		})
	}
	// Co-location: with equal state, a pod on a crowded node goes first.
	crowded := []*corev1.Pod{pod("x1", "busy", corev1.PodRunning, true, t0, 0, t0), pod("x2", "busy", corev1.PodRunning, true, t0, 0, t0), pod("y", "idle", corev1.PodRunning, true, t0, 0, t0)}
	got := podsToDelete(crowded, crowded, 1, now)
	if got[0].Spec.NodeName != "busy" {
		t.Errorf("picked %s on %s, want a pod on the crowded node", got[0].Name, got[0].Spec.NodeName)
	}
}

func TestIsPodAvailable(t *testing.T) {
	t0 := time.Unix(10000, 0)
	p := pod("a", "", corev1.PodRunning, true, t0, 0, t0)
	if !IsPodAvailable(p, 0, t0) {
		t.Error("ready with minReadySeconds 0 is available")
	}
	if IsPodAvailable(p, 10, t0.Add(5*time.Second)) {
		t.Error("ready for 5s of 10 is not available")
	}
	if !IsPodAvailable(p, 10, t0.Add(11*time.Second)) {
		t.Error("ready for 11s of 10 is available")
	}
}

func TestCalculateStatusReplicaFailure(t *testing.T) {
	n := int32(3)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.ReplicaSetSpec{Replicas: &n, MinReadySeconds: 10,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a", "tier": "x"}}}}}
	t0 := time.Unix(10000, 0)
	full := pod("p1", "", corev1.PodRunning, true, t0, 0, t0)
	full.Labels = map[string]string{"app": "a", "tier": "x"}
	partial := pod("p2", "", corev1.PodRunning, true, t0.Add(5*time.Second), 0, t0)
	partial.Labels = map[string]string{"app": "a"}
	st := calculateStatus(rs, []*corev1.Pod{full, partial}, errors.New("exceeded quota"), t0.Add(12*time.Second))
	if st.Replicas != 2 || st.FullyLabeledReplicas != 1 || st.ReadyReplicas != 2 || st.AvailableReplicas != 1 {
		t.Fatalf("status = %+v", st)
	}
	c := findCondition(st.Conditions, appsv1.ReplicaSetReplicaFailure)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "FailedCreate" || c.Message == "" {
		t.Fatalf("ReplicaFailure = %+v", c)
	}
	rs.Status = st
	st = calculateStatus(rs, []*corev1.Pod{full, partial}, nil, t0.Add(20*time.Second))
	if findCondition(st.Conditions, appsv1.ReplicaSetReplicaFailure) != nil || st.AvailableReplicas != 2 {
		t.Fatalf("after success: %+v", st)
	}
}

func TestPodFromTemplate(t *testing.T) {
	n := int32(1)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", UID: "u1"}, Spec: appsv1.ReplicaSetSpec{Replicas: &n,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}
	p := PodFromTemplate(rs)
	ref := metav1.GetControllerOf(p)
	if p.GenerateName != "web-abc-" || p.Namespace != "ns" || ref == nil || ref.UID != "u1" || ref.Kind != "ReplicaSet" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion || p.Labels["app"] != "a" {
		t.Fatalf("pod = %+v", p.ObjectMeta)
	}
}
