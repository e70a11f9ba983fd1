package statefulset

import (
	"sort"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/history"
	"github.com/wasmplane/wasmplane/core/controller/replicaset"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// plan is what one sync does: create the pods of the ordinals in create, delete the pods in
// remove (condemned ones in condemned).
type plan struct {
	create    []int
	remove    []*corev1.Pod
	condemned []*corev1.Pod
}

func (p plan) empty() bool { return len(p.create) == 0 && len(p.remove) == 0 && len(p.condemned) == 0 }

func terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// healthy is Kubernetes' isRunningAndReady (and available, with minReadySeconds): what
// OrderedReady waits for before touching the next ordinal.
func healthy(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	return !terminating(p) && p.Status.Phase == corev1.PodRunning && replicaset.IsPodAvailable(p, minReadySeconds, now)
}

// decide is Kubernetes' StatefulSet update for one sync. Ordinals in range are brought up
// lowest first (a missing pod created, a failed one deleted to be recreated); pods out of
// range are condemned, highest first. With OrderedReady, each step waits for the pods
// before it to be running and ready, and one thing happens per sync; with Parallel all of
// it happens at once. Once the set is complete, RollingUpdate deletes the highest pod
// not at updateRev, down to the partition, one at a time and only over healthy pods.
func decide(set *appsv1.StatefulSet, pods map[int]*corev1.Pod, updateRev string, now time.Time) plan {
	start, replicas := startOrdinal(set), int(ptr.Deref(set.Spec.Replicas, 1))
	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	minReady := set.Spec.MinReadySeconds
	var p plan
	for ord := start; ord < start+replicas; ord++ {
		pod := pods[ord]
		switch {
		case pod == nil:
			p.create = append(p.create, ord)
		case terminal(pod) && !terminating(pod):
			p.remove = append(p.remove, pod)
		case healthy(pod, minReady, now):
			continue
		}
		if monotonic {
			return p
		}
	}
	var condemned []int
	for ord := range pods {
		if ord < start || ord >= start+replicas {
			condemned = append(condemned, ord)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(condemned)))
	for _, ord := range condemned {
		pod := pods[ord]
		if terminating(pod) {
			if monotonic {
				return p
			}
			continue
		}
		p.condemned = append(p.condemned, pod)
		if monotonic {
			return p
		}
	}
	if !p.empty() || set.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		return p
	}
	partition := 0
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	for ord := start + replicas - 1; ord >= start+partition; ord-- {
		pod := pods[ord]
		if pod == nil {
			return p
		}
		if pod.Labels[history.HashLabel] != updateRev && !terminating(pod) {
			p.remove = append(p.remove, pod)
			return p
		}
		if !healthy(pod, minReady, now) {
			return p
		}
	}
	return p
}

// calculateStatus counts the pods as Kubernetes does; once a rolling update has every
// pod updated and ready, the update revision becomes the current one.
func calculateStatus(set *appsv1.StatefulSet, pods map[int]*corev1.Pod, currentRev, updateRev string, now time.Time) appsv1.StatefulSetStatus {
	st := *set.Status.DeepCopy()
	st.ObservedGeneration = set.Generation
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.CurrentReplicas, st.UpdatedReplicas = 0, 0, 0, 0, 0
	for _, pod := range pods {
		if terminating(pod) {
			continue
		}
		st.Replicas++
		if pod.Status.Phase == corev1.PodRunning && replicaset.IsPodReady(pod) {
			st.ReadyReplicas++
			if replicaset.IsPodAvailable(pod, set.Spec.MinReadySeconds, now) {
				st.AvailableReplicas++
			}
		}
		if pod.Labels[history.HashLabel] == currentRev {
			st.CurrentReplicas++
		}
		if pod.Labels[history.HashLabel] == updateRev {
			st.UpdatedReplicas++
		}
	}
	st.CurrentRevision, st.UpdateRevision = currentRev, updateRev
	if set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		st.UpdatedReplicas == st.Replicas && st.ReadyReplicas == st.Replicas {
		st.CurrentReplicas, st.CurrentRevision = st.UpdatedReplicas, updateRev
	}
	return st
}
