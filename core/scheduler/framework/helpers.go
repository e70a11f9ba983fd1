package framework

import (
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// DefaultNormalizeScore scales scores so the highest becomes maxPriority (reverse flips
// them so the lowest raw score wins), as Kubernetes' helper.
func DefaultNormalizeScore(maxPriority int64, reverse bool, scores NodeScoreList) *Status {
	var maxCount int64
	for i := range scores {
		if scores[i].Score > maxCount {
			maxCount = scores[i].Score
		}
	}
	if maxCount == 0 {
		if reverse {
			for i := range scores {
				scores[i].Score = maxPriority
			}
		}
		return nil
	}
	for i := range scores {
		s := scores[i].Score
		s = maxPriority * s / maxCount
		if reverse {
			s = maxPriority - s
		}
		scores[i].Score = s
	}
	return nil
}

// PodPriority is the pod's priority (0 when unset).
func PodPriority(pod *v1.Pod) int32 { return corev1helpers.PodPriority(pod) }
