package deployment

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rolloutRolling moves pods from old ReplicaSets to the new one within maxSurge and
// maxUnavailable: scale the new one up as far as surge allows, else the old ones down as far
// as availability allows.
func (c *Controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	all := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaledUp, err := c.reconcileNewReplicaSet(ctx, all, newRS, d)
	if err != nil {
		return err
	}
	if scaledUp {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	scaledDown, err := c.reconcileOldReplicaSets(ctx, all, activeReplicaSets(oldRSs), newRS, d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, all, newRS, d)
}

func (c *Controller) reconcileNewReplicaSet(ctx context.Context, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	want := replicas(d.Spec.Replicas)
	cur := replicas(newRS.Spec.Replicas)
	if cur == want {
		return false, nil
	}
	if cur > want {
		scaled, _, err := c.scaleReplicaSet(ctx, newRS, want, d)
		return scaled, err
	}
	scaled, _, err := c.scaleReplicaSet(ctx, newRS, newRSNewReplicas(d, all, newRS), d)
	return scaled, err
}

func (c *Controller) reconcileOldReplicaSets(ctx context.Context, all, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	if specReplicas(oldRSs) == 0 {
		return false, nil
	}
	minAvailable := replicas(d.Spec.Replicas) - MaxUnavailable(d)
	newUnavailable := replicas(newRS.Spec.Replicas) - min(newRS.Status.AvailableReplicas, replicas(newRS.Spec.Replicas))
	maxScaledDown := specReplicas(all) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	// First drop old pods that are not available anyway: that costs no availability.
	oldRSs, cleaned, err := c.cleanupUnhealthyReplicas(ctx, oldRSs, d, maxScaledDown)
	if err != nil {
		return false, err
	}
	all = append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaled, err := c.scaleDownOldForRollingUpdate(ctx, all, oldRSs, d)
	if err != nil {
		return false, err
	}
	return cleaned+scaled > 0, nil
}

func (c *Controller) cleanupUnhealthyReplicas(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment, maxCleanup int32) ([]*appsv1.ReplicaSet, int32, error) {
	byCreation(oldRSs)
	var total int32
	for i, rs := range oldRSs {
		if total >= maxCleanup {
			break
		}
		n := replicas(rs.Spec.Replicas)
		if n == 0 || n <= rs.Status.AvailableReplicas {
			continue
		}
		down := min(maxCleanup-total, n-rs.Status.AvailableReplicas)
		_, out, err := c.scaleReplicaSet(ctx, rs, n-down, d)
		if err != nil {
			return nil, 0, err
		}
		total += down
		oldRSs[i] = out
	}
	return oldRSs, total, nil
}

func (c *Controller) scaleDownOldForRollingUpdate(ctx context.Context, all, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) (int32, error) {
	minAvailable := replicas(d.Spec.Replicas) - MaxUnavailable(d)
	available := availableReplicas(all)
	if available <= minAvailable {
		return 0, nil
	}
	byCreation(oldRSs)
	budget := available - minAvailable
	var total int32
	for _, rs := range oldRSs {
		if total >= budget {
			break
		}
		n := replicas(rs.Spec.Replicas)
		if n == 0 {
			continue
		}
		down := min(n, budget-total)
		if _, _, err := c.scaleReplicaSet(ctx, rs, n-down, d); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// rolloutRecreate scales every old ReplicaSet to zero, waits until none of their pods runs,
// and only then creates and scales up the new one.
func (c *Controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	all := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaledDown := false
	for _, rs := range activeReplicaSets(oldRSs) {
		scaled, _, err := c.scaleReplicaSet(ctx, rs, 0, d)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown || oldPodsRunning(newRS, oldRSs, podMap) {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	if newRS == nil {
		if newRS, oldRSs, err = c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true); err != nil {
			return err
		}
		all = append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	}
	if _, _, err := c.scaleReplicaSet(ctx, newRS, replicas(d.Spec.Replicas), d); err != nil {
		return err
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, all, newRS, d)
}

// syncRolloutStatus writes status with the Progressing condition a rollout implies, and
// requeues a stuck rollout for when its progress deadline passes.
func (c *Controller) syncRolloutStatus(ctx context.Context, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	st := c.calculateStatus(all, newRS, d)
	now := c.now()
	if !hasProgressDeadline(d) {
		removeCondition(&st, appsv1.DeploymentProgressing)
	}
	cur := getCondition(d.Status, appsv1.DeploymentProgressing)
	complete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == ReasonNewRSAvailable
	if hasProgressDeadline(d) && !complete {
		name := ""
		if newRS != nil {
			name = newRS.Name
		}
		switch {
		case deploymentComplete(d, &st):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSAvailable,
				fmt.Sprintf("ReplicaSet %q has successfully progressed.", name), now))
		case deploymentProgressing(d, &st):
			cond := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonRSUpdated,
				fmt.Sprintf("ReplicaSet %q is progressing.", name), now)
			// Progress refreshes lastUpdateTime (the deadline's clock) even with the same reason.
			if cur != nil && cur.Status == corev1.ConditionTrue {
				cond.LastTransitionTime = cur.LastTransitionTime
			}
			removeCondition(&st, appsv1.DeploymentProgressing)
			st.Conditions = append(st.Conditions, cond)
		case deploymentTimedOut(d, &st, now):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonTimedOut,
				fmt.Sprintf("ReplicaSet %q has timed out progressing.", name), now))
		}
	}
	if f := replicaFailure(all, newRS); f != nil {
		setCondition(&st, appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: f.Status, Reason: f.Reason,
			Message: f.Message, LastUpdateTime: f.LastTransitionTime, LastTransitionTime: f.LastTransitionTime})
	} else {
		removeCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	if equality.Semantic.DeepEqual(d.Status, st) {
		c.requeueStuck(d, st, now)
		return nil
	}
	d.Status = st
	if _, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating Deployment status: %w", err)
	}
	return nil
}

func replicaFailure(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) *appsv1.ReplicaSetCondition {
	// The new ReplicaSet's failure matters most; otherwise any.
	order := all
	if newRS != nil {
		order = append([]*appsv1.ReplicaSet{newRS}, all...)
	}
	for _, rs := range order {
		if rs == nil {
			continue
		}
		for i := range rs.Status.Conditions {
			if rs.Status.Conditions[i].Type == appsv1.ReplicaSetReplicaFailure {
				return &rs.Status.Conditions[i]
			}
		}
	}
	return nil
}

// requeueStuck checks d again when its progress deadline expires, so
// ProgressDeadlineExceeded is reported even if nothing else happens.
func (c *Controller) requeueStuck(d *appsv1.Deployment, st appsv1.DeploymentStatus, now time.Time) {
	cond := getCondition(st, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || cond == nil || cond.Reason == ReasonNewRSAvailable || cond.Reason == ReasonTimedOut {
		return
	}
	if st.Replicas == st.UpdatedReplicas && st.AvailableReplicas == st.Replicas && st.Replicas == replicas(d.Spec.Replicas) {
		return
	}
	after := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(now)
	key := d.Namespace + "/" + d.Name
	if after < time.Second {
		c.queue.AddRateLimited(key)
		return
	}
	c.queue.AddAfter(key, after)
}
