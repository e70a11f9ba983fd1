package replicaset

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// IsPodReady reports whether pod's Ready condition is True.
func IsPodReady(pod *corev1.Pod) bool {
	c := readyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// IsPodAvailable reports whether pod has been ready for at least minReadySeconds at now.
func IsPodAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := readyCondition(pod)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	min := time.Duration(minReadySeconds) * time.Second
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(min).Before(now)
}

// isActive reports whether pod still counts towards a ReplicaSet's replicas.
func isActive(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp == nil
}

func maxRestarts(pod *corev1.Pod) int32 {
	var m int32
	for _, s := range pod.Status.ContainerStatuses {
		m = max(m, s.RestartCount)
	}
	return m
}

// phaseRank orders phases for deletion: pods that have not started go first.
func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 3
}

// rankedPod is a pod with the number of its controller's pods sharing its node, so scale
// down spreads out rather than emptying one node.
type rankedPod struct {
	pod  *corev1.Pod
	rank int
}

// deletionLess reports whether a should be deleted before b, as Kubernetes ranks them:
// unassigned < assigned; Pending < Unknown < Running; not ready < ready; more co-located pods
// first; ready for less time < longer; more restarts first; newer first.
func deletionLess(a, b rankedPod, now time.Time) bool {
	pa, pb := a.pod, b.pod
	if (pa.Spec.NodeName == "") != (pb.Spec.NodeName == "") {
		return pa.Spec.NodeName == ""
	}
	if ra, rb := phaseRank(pa.Status.Phase), phaseRank(pb.Status.Phase); ra != rb {
		return ra < rb
	}
	if IsPodReady(pa) != IsPodReady(pb) {
		return !IsPodReady(pa)
	}
	if a.rank != b.rank {
		return a.rank > b.rank
	}
	if IsPodReady(pa) && IsPodReady(pb) {
		ta, tb := readyCondition(pa).LastTransitionTime, readyCondition(pb).LastTransitionTime
		if !ta.Equal(&tb) {
			return afterOrZero(ta.Time, tb.Time)
		}
	}
	if ra, rb := maxRestarts(pa), maxRestarts(pb); ra != rb {
		return ra > rb
	}
	if !pa.CreationTimestamp.Equal(&pb.CreationTimestamp) {
		return afterOrZero(pa.CreationTimestamp.Time, pb.CreationTimestamp.Time)
	}
	return pa.Name < pb.Name // deterministic
}

// afterOrZero reports whether t1 is later than t2, treating a zero time as the latest.
func afterOrZero(t1, t2 time.Time) bool {
	if t1.IsZero() || t2.IsZero() {
		return t1.IsZero()
	}
	return t1.After(t2)
}

// podsToDelete picks the n pods to delete first from filtered, ranking co-location by the
// pods of related (same-owner-family) ReplicaSets in related.
func podsToDelete(filtered, related []*corev1.Pod, n int, now time.Time) []*corev1.Pod {
	if n >= len(filtered) {
		return filtered
	}
	perNode := map[string]int{}
	for _, p := range related {
		if isActive(p) && p.Spec.NodeName != "" {
			perNode[p.Spec.NodeName]++
		}
	}
	ranked := make([]rankedPod, len(filtered))
	for i, p := range filtered {
		r := 0
		if p.Spec.NodeName != "" {
			r = perNode[p.Spec.NodeName]
		}
		ranked[i] = rankedPod{pod: p, rank: r}
	}
	sort.SliceStable(ranked, func(i, j int) bool { return deletionLess(ranked[i], ranked[j], now) })
	out := make([]*corev1.Pod, n)
	for i := range n {
		out[i] = ranked[i].pod
	}
	return out
}
