package daemon

import (
	"sort"

	"github.com/wasmplane/wasmplane/core/controller/replicaset"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// nodeState is one node as a sync sees it: whether the DaemonSet wants a pod there, may
// keep one there, and the DaemonSet's pods targeting it.
type nodeState struct {
	name string
	run  bool
	stay bool
	pods []*corev1.Pod
}

// plan is what one sync does: create a pod on each node of create, delete the pods in
// remove. failedWait lists nodes whose failed pod is left alone for now (backoff).
type plan struct {
	create     []string
	remove     []*corev1.Pod
	failedWait []string
}

func (p plan) empty() bool { return len(p.create) == 0 && len(p.remove) == 0 }

// manage is Kubernetes' podsShouldBeOnNode over every node: a pod where one should run
// and none exists; failed and succeeded pods removed (failed ones unless backoff says to
// wait); extra pods on a node removed, keeping the oldest (with surge, the oldest of each
// revision); pods removed from nodes the DaemonSet may not stay on. Pods whose node does
// not exist any more (orphans) are removed too.
func manage(ds *appsv1.DaemonSet, nodes []nodeState, orphans []*corev1.Pod, hash string, backoff func(node string) bool) plan {
	var p plan
	surge := allowsSurge(ds)
	for _, n := range nodes {
		switch {
		case n.run && len(n.pods) == 0:
			p.create = append(p.create, n.name)
		case n.stay:
			var running []*corev1.Pod
			for _, pod := range n.pods {
				switch {
				case pod.DeletionTimestamp != nil:
				case pod.Status.Phase == corev1.PodFailed:
					if backoff != nil && backoff(n.name) {
						p.failedWait = append(p.failedWait, n.name)
						continue
					}
					p.remove = append(p.remove, pod)
				case pod.Status.Phase == corev1.PodSucceeded:
					p.remove = append(p.remove, pod)
				default:
					running = append(running, pod)
				}
			}
			if len(running) <= 1 {
				continue
			}
			sortOldestFirst(running)
			if !surge {
				p.remove = append(p.remove, running[1:]...)
				continue
			}
			var haveNew, haveOld bool
			for _, pod := range running {
				switch {
				case isUpdated(pod, hash) && !haveNew:
					haveNew = true
				case !isUpdated(pod, hash) && !haveOld:
					haveOld = true
				default:
					p.remove = append(p.remove, pod)
				}
			}
		case len(n.pods) > 0:
			for _, pod := range n.pods {
				if pod.DeletionTimestamp == nil {
					p.remove = append(p.remove, pod)
				}
			}
		}
	}
	for _, pod := range orphans {
		if pod.DeletionTimestamp == nil {
			p.remove = append(p.remove, pod)
		}
	}
	return p
}

func allowsSurge(ds *appsv1.DaemonSet) bool {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxSurge == nil {
		return false
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, 100, true)
	return err == nil && n > 0
}

// budgets returns how many pods may be surged and be unavailable during a rolling
// update, percentages of the nodes that want a pod rounded up as Kubernetes does; with
// both zero (a percentage of few nodes), one may be unavailable.
func budgets(ds *appsv1.DaemonSet, desired int) (surge, unavailable int) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		return 0, 1
	}
	if ru.MaxSurge != nil {
		surge, _ = intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, desired, true)
	}
	if ru.MaxUnavailable != nil {
		unavailable, _ = intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, desired, true)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable
}

// split returns the newest live pod of the current revision and the oldest live pod of
// older ones on a node; ok is false with more than one of either (manage cleans up).
func split(pods []*corev1.Pod, hash string) (cur, old *corev1.Pod, ok bool) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			continue
		}
		if isUpdated(pod, hash) {
			if cur != nil {
				return nil, nil, false
			}
			cur = pod
		} else {
			if old != nil {
				return nil, nil, false
			}
			old = pod
		}
	}
	return cur, old, true
}

// rollingUpdate replaces pods of older revisions on nodes the DaemonSet runs on. Without
// surge it deletes old pods (manage then creates their replacements) while at most
// maxUnavailable nodes lack an available pod; old pods that are not available anyway go
// at once. With surge it first creates the new pod beside an available old one (at most
// maxSurge at a time) and deletes the old pod once the new one is available.
func rollingUpdate(ds *appsv1.DaemonSet, nodes []nodeState, hash string, now metav1.Time) plan {
	desired := 0
	for _, n := range nodes {
		if n.run {
			desired++
		}
	}
	maxSurge, maxUnavailable := budgets(ds, desired)
	minReady := ds.Spec.MinReadySeconds
	var p plan
	var unavailable, surging int
	var candidates []*corev1.Pod
	var surgeCandidates []string
	// Nodes in name order, so that the same nodes are chosen from one sync to the next.
	sorted := append([]nodeState(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	for _, n := range sorted {
		if !n.run && !n.stay {
			continue
		}
		cur, old, ok := split(n.pods, hash)
		if !ok {
			unavailable++
			continue
		}
		if maxSurge == 0 {
			switch {
			case cur == nil && old == nil, cur != nil && old != nil:
				unavailable++
			case cur != nil:
				if !available(cur, minReady, now) {
					unavailable++
				}
			case !available(old, minReady, now):
				p.remove = append(p.remove, old)
			default:
				candidates = append(candidates, old)
			}
			continue
		}
		switch {
		case cur == nil && old == nil:
			unavailable++
		case cur != nil && old != nil:
			if available(cur, minReady, now) {
				p.remove = append(p.remove, old)
			} else {
				surging++
			}
		case cur != nil:
			if !available(cur, minReady, now) {
				unavailable++
			}
		case !available(old, minReady, now):
			p.create = append(p.create, n.name) // nothing to lose: replace at once
		default:
			surgeCandidates = append(surgeCandidates, n.name)
		}
	}
	if maxSurge == 0 {
		p.remove = append(p.remove, candidates[:clamp(maxUnavailable-unavailable, len(candidates))]...)
		return p
	}
	p.create = append(p.create, surgeCandidates[:clamp(maxSurge-surging, len(surgeCandidates))]...)
	return p
}

func clamp(n, hi int) int {
	return max(0, min(n, hi))
}

// calculateStatus counts nodes as Kubernetes' updateDaemonSetStatus does.
func calculateStatus(ds *appsv1.DaemonSet, nodes []nodeState, hash string, now metav1.Time) appsv1.DaemonSetStatus {
	st := *ds.Status.DeepCopy()
	var desired, current, misscheduled, ready, avail, updated int32
	for _, n := range nodes {
		var live []*corev1.Pod
		for _, pod := range n.pods {
			if pod.DeletionTimestamp == nil || (pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded) {
				live = append(live, pod)
			}
		}
		if n.run {
			desired++
		}
		if len(live) == 0 {
			continue
		}
		if !n.run {
			misscheduled++
			continue
		}
		current++
		var isReady, isAvail, isUpdatedNode bool
		for _, pod := range live {
			isReady = isReady || replicaset.IsPodReady(pod)
			isAvail = isAvail || available(pod, ds.Spec.MinReadySeconds, now)
			isUpdatedNode = isUpdatedNode || isUpdated(pod, hash)
		}
		if isReady {
			ready++
		}
		if isAvail {
			avail++
		}
		if isUpdatedNode {
			updated++
		}
	}
	st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberMisscheduled = desired, current, misscheduled
	st.NumberReady, st.NumberAvailable, st.UpdatedNumberScheduled = ready, avail, updated
	st.NumberUnavailable = max(0, desired-avail)
	st.ObservedGeneration = ds.Generation
	return st
}
