// Package disruptiontarget writes the DisruptionTarget condition that Kubernetes' control
// plane sets on a pod just before it deletes the pod for a reason of its own — the
// scheduler's preemption, a NoExecute taint, the pod garbage collector — so that the pod's
// owner can tell a disruption from the pod's own failure (a Job's podFailurePolicy matches
// it with onPodConditions).
package disruptiontarget

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The reasons Kubernetes gives (k8s.io/api/core/v1 names the first two).
const (
	ReasonPreemption = corev1.PodReasonPreemptionByScheduler
	ReasonTaint      = "DeletionByTaintManager"
	ReasonPodGC      = "DeletionByPodGC"
)

// Mark sets pod's DisruptionTarget condition (status True, reason, message) with a
// strategic-merge patch of its status, which merges conditions by type. A pod that
// already carries the same condition is left alone; a pod already gone is not an error.
// failed also sets the phase Failed (the pod garbage collector's deletions, whose pods no
// kubelet will ever finish).
func Mark(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, reason, message string, failed bool) error {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == reason && !failed {
			return nil
		}
	}
	status := map[string]any{"conditions": []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: reason, Message: message, LastTransitionTime: metav1.Now()}}}
	if failed {
		status["phase"] = corev1.PodFailed
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return fmt.Errorf("disruption target patch: %w", err)
	}
	_, err = client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking pod %s/%s as a disruption target: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
