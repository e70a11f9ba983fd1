package statefulset

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/history"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var now = time.Unix(10000, 0)

func newSet(replicas int32, mutate ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "set-uid", Generation: 4},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: "db-headless",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "sleeper:latest"}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
			},
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)}},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func parallel(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }

func partition(n int32) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(n) }
}

func onDelete(s *appsv1.StatefulSet) {
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
}

// pods builds member pods: each spec is "<ordinal><state>" at revision rev, where state
// is r (running and ready), p (pending), f (failed) or t (terminating).
func pods(rev string, specs ...string) map[int]*corev1.Pod {
	out := map[int]*corev1.Pod{}
	for _, s := range specs {
		ord, _ := strconv.Atoi(s[:len(s)-1])
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-" + s[:len(s)-1], Labels: map[string]string{history.HashLabel: rev}}}
		switch s[len(s)-1] {
		case 'r':
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
		case 'p':
			p.Status.Phase = corev1.PodPending
		case 'f':
			p.Status.Phase = corev1.PodFailed
		case 't':
			p.Status.Phase = corev1.PodRunning
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		out[ord] = p
	}
	return out
}

func merge(ms ...map[int]*corev1.Pod) map[int]*corev1.Pod {
	out := map[int]*corev1.Pod{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func podNames(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name          string
		set           *appsv1.StatefulSet
		pods          map[int]*corev1.Pod
		wantCreate    []int
		wantRemove    []string
		wantCondemned []string
	}{
		{name: "ordered: the first missing ordinal", set: newSet(3), pods: pods("u", "0r"), wantCreate: []int{1}},
		{name: "ordered: waits for a pending pod", set: newSet(3), pods: pods("u", "0r", "1p")},
		{name: "ordered: waits for a terminating pod", set: newSet(3), pods: pods("u", "0t")},
		{name: "ordered: a failed pod is deleted to be recreated", set: newSet(3), pods: pods("u", "0r", "1f"), wantRemove: []string{"db-1"}},
		{name: "parallel: every missing ordinal", set: newSet(3, parallel), pods: pods("u", "1p"), wantCreate: []int{0, 2}},
		{name: "ordered: scale down from the highest", set: newSet(1), pods: pods("u", "0r", "1r", "2r"), wantCondemned: []string{"db-2"}},
		{name: "ordered: scale down waits for the terminating", set: newSet(1), pods: pods("u", "0r", "1r", "2t")},
		{name: "parallel: scale down all at once", set: newSet(1, parallel), pods: pods("u", "0r", "1r", "2r"), wantCondemned: []string{"db-1", "db-2"}},
		{name: "ordered: scale down waits for unready in range", set: newSet(1), pods: pods("u", "0p", "1r")},
		{name: "start ordinal", set: newSet(2, func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }),
			pods: pods("u", "0r", "5r"), wantCreate: []int{6}},
		{name: "rolling update from the highest", set: newSet(3), pods: pods("old", "0r", "1r", "2r"), wantRemove: []string{"db-2"}},
		{name: "rolling update goes on below updated pods", set: newSet(3), pods: merge(pods("old", "0r", "1r"), pods("u", "2r")), wantRemove: []string{"db-1"}},
		{name: "rolling update waits for an unready updated pod", set: newSet(3), pods: merge(pods("old", "0r", "1r"), pods("u", "2p"))},
		{name: "rolling update stops at the partition", set: newSet(3, partition(2)), pods: merge(pods("old", "0r", "1r"), pods("u", "2r"))},
		{name: "OnDelete leaves old pods", set: newSet(3, onDelete), pods: pods("old", "0r", "1r", "2r")},
		{name: "up to date", set: newSet(2), pods: pods("u", "0r", "1r")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := decide(tc.set, tc.pods, "u", now)
			if !slices.Equal(p.create, tc.wantCreate) || !slices.Equal(podNames(p.remove), tc.wantRemove) || !slices.Equal(podNames(p.condemned), tc.wantCondemned) {
				t.Errorf("create %v remove %v condemned %v; want %v %v %v", p.create, podNames(p.remove), podNames(p.condemned),
					tc.wantCreate, tc.wantRemove, tc.wantCondemned)
			}
		})
	}
}

func TestRevisionFor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     *appsv1.StatefulSet
		ordinal int
		want    string
	}{
		{"no partition", newSet(3), 0, "u"},
		{"below the partition", newSet(3, partition(2)), 1, "c"},
		{"at the partition", newSet(3, partition(2)), 2, "u"},
		{"OnDelete", newSet(3, onDelete), 0, "u"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := revisionFor(tc.set, tc.ordinal, "c", "u"); got != tc.want {
				t.Errorf("revisionFor = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestNewPodAndClaims(t *testing.T) {
	set := newSet(3, func(s *appsv1.StatefulSet) {
		s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"tier": "disk"}}}}
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
	})
	pod := newPod(set, &set.Spec.Template, "db-abc", 2)
	if pod.Name != "db-2" || pod.Spec.Hostname != "db-2" || pod.Spec.Subdomain != "db-headless" {
		t.Errorf("identity: name %s hostname %s subdomain %s", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	if pod.Labels[appsv1.StatefulSetPodNameLabel] != "db-2" || pod.Labels[appsv1.PodIndexLabel] != "2" || pod.Labels[history.HashLabel] != "db-abc" {
		t.Errorf("labels = %v", pod.Labels)
	}
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].PersistentVolumeClaim == nil || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-db-2" {
		t.Errorf("the claim template must replace the template's volume of the same name: %+v", pod.Spec.Volumes)
	}
	if ordinalOf("db", pod.Name) != 2 || ordinalOf("db", "dbx-2") != -1 || ordinalOf("db", "db-2-x") != -1 {
		t.Error("ordinalOf")
	}
	claims := newClaims(set, 2)
	if len(claims) != 1 || claims[0].Name != "data-db-2" || claims[0].Labels["app"] != "db" || claims[0].Labels["tier"] != "disk" {
		t.Fatalf("claims = %+v", claims)
	}
	if refs := claims[0].OwnerReferences; len(refs) != 1 || refs[0].UID != set.UID || refs[0].Controller != nil {
		t.Errorf("whenDeleted Delete: owner references %+v, want the set as a plain owner", refs)
	}
	set.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if refs := newClaims(set, 0)[0].OwnerReferences; len(refs) != 0 {
		t.Errorf("Retain: owner references %+v", refs)
	}
}

func TestCalculateStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  *appsv1.StatefulSet
		pods map[int]*corev1.Pod
		want appsv1.StatefulSetStatus
	}{
		{"rolling update in progress", newSet(3), merge(pods("c", "0r", "1r"), pods("u", "2p")),
			appsv1.StatefulSetStatus{ObservedGeneration: 4, Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, CurrentReplicas: 2, UpdatedReplicas: 1, CurrentRevision: "c", UpdateRevision: "u"}},
		{"rolling update complete", newSet(2), pods("u", "0r", "1r", "2t"),
			appsv1.StatefulSetStatus{ObservedGeneration: 4, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, CurrentReplicas: 2, UpdatedReplicas: 2, CurrentRevision: "u", UpdateRevision: "u"}},
		{"OnDelete keeps the current revision", newSet(2, onDelete), pods("u", "0r", "1r"),
			appsv1.StatefulSetStatus{ObservedGeneration: 4, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, CurrentReplicas: 0, UpdatedReplicas: 2, CurrentRevision: "c", UpdateRevision: "u"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := calculateStatus(tc.set, tc.pods, "c", "u", now); !equalStatus(got, tc.want) {
				t.Errorf("status = %+v\nwant     %+v", got, tc.want)
			}
		})
	}
}

func equalStatus(a, b appsv1.StatefulSetStatus) bool {
	return a.ObservedGeneration == b.ObservedGeneration && a.Replicas == b.Replicas && a.ReadyReplicas == b.ReadyReplicas &&
		a.AvailableReplicas == b.AvailableReplicas && a.CurrentReplicas == b.CurrentReplicas && a.UpdatedReplicas == b.UpdatedReplicas &&
		a.CurrentRevision == b.CurrentRevision && a.UpdateRevision == b.UpdateRevision
}
