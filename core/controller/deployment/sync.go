package deployment

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"

	"github.com/wasmplane/wasmplane/core/controller/internal/controllerref"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// syncStatusOnly only refreshes status (a Deployment being deleted).
func (c *Controller) syncStatusOnly(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	return c.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// sync handles scaling events and paused Deployments: scale without rolling out, and clean up
// old ReplicaSets while paused.
func (c *Controller) sync(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, oldRSs); err != nil {
		return err
	}
	if d.Spec.Paused {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// checkPausedConditions records pausing and resuming in the Progressing condition, so that
// time spent paused does not count against progressDeadlineSeconds.
func (c *Controller) checkPausedConditions(ctx context.Context, d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == ReasonTimedOut {
		return nil
	}
	pausedCond := cond != nil && cond.Reason == ReasonPaused
	changed := false
	switch {
	case d.Spec.Paused && !pausedCond:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonPaused, "Deployment is paused", c.now()))
		changed = true
	case !d.Spec.Paused && pausedCond:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonResumed, "Deployment is resumed", c.now()))
		changed = true
	}
	if !changed {
		return nil
	}
	out, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating paused condition: %w", err)
	}
	*d = *out
	return nil
}

// getAllReplicaSetsAndSyncRevision returns the new ReplicaSet (created when create is true and
// none matches the template) and the old ones, and syncs the revision annotations.
func (c *Controller) getAllReplicaSetsAndSyncRevision(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	old := findOldReplicaSets(d, rsList)
	newRS, err := c.getNewReplicaSet(ctx, d, rsList, old, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, old, nil
}

// getNewReplicaSet returns the ReplicaSet for d's current template, updating its revision and
// annotations, or creates it.
func (c *Controller) getNewReplicaSet(ctx context.Context, d *appsv1.Deployment, rsList, oldRSs []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	existing := findNewReplicaSet(d, rsList)
	newRevision := maxRevision(oldRSs) + 1
	if existing != nil {
		rs := existing.DeepCopy()
		annotationsChanged := setNewReplicaSetAnnotations(d, rs, newRevision, true)
		minReadyChanged := rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds
		if annotationsChanged || minReadyChanged {
			rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			out, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
			if err != nil {
				return nil, fmt.Errorf("updating ReplicaSet %s: %w", rs.Name, err)
			}
			return out, nil
		}
		needsUpdate := setDeploymentRevision(d, rs.Annotations[RevisionAnnotation])
		if hasProgressDeadline(d) && getCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonFoundNewRS,
				fmt.Sprintf("Found new replica set %q", rs.Name), c.now()))
			needsUpdate = true
		}
		if needsUpdate {
			if err := c.updateDeploymentAndStatus(ctx, d); err != nil {
				return nil, err
			}
		}
		return rs, nil
	}
	if !create {
		return nil, nil
	}
	hash := ComputeHash(&d.Spec.Template, d.Status.CollisionCount)
	tmpl := d.Spec.Template.DeepCopy()
	tmpl.Labels = cloneWith(tmpl.Labels, PodTemplateHashLabel, hash)
	sel := d.Spec.Selector.DeepCopy()
	sel.MatchLabels = cloneWith(sel.MatchLabels, PodTemplateHashLabel, hash)
	zero := int32(0)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, Labels: tmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{*controllerref.NewControllerRef(d, controllerKind)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, MinReadySeconds: d.Spec.MinReadySeconds, Selector: sel, Template: *tmpl},
	}
	n := newRSNewReplicas(d, append(append([]*appsv1.ReplicaSet(nil), oldRSs...), rs), rs)
	rs.Spec.Replicas = &n
	setNewReplicaSetAnnotations(d, rs, newRevision, false)
	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	alreadyExists := false
	switch {
	case kerrors.IsAlreadyExists(err):
		alreadyExists = true
		cur, gerr := c.rsLister.ReplicaSets(d.Namespace).Get(rs.Name)
		if gerr != nil {
			return nil, fmt.Errorf("reading existing ReplicaSet %s: %w", rs.Name, gerr)
		}
		// Ours with the same template: an earlier sync created it and the cache lagged.
		if ref := metav1.GetControllerOfNoCopy(cur); ref != nil && ref.UID == d.UID && equalIgnoreHash(&d.Spec.Template, &cur.Spec.Template) {
			created = cur
			break
		}
		// A genuine hash collision: bump collisionCount so the next sync picks another name.
		if d.Status.CollisionCount == nil {
			d.Status.CollisionCount = new(int32)
		}
		*d.Status.CollisionCount++
		if _, uerr := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); uerr != nil {
			return nil, fmt.Errorf("recording hash collision: %w", uerr)
		}
		return nil, fmt.Errorf("hash collision for ReplicaSet %s (collisionCount now %d)", rs.Name, *d.Status.CollisionCount)
	case err != nil:
		if hasProgressDeadline(d) {
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonFailedRSCreate,
				fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err), c.now()))
			_, _ = c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
		return nil, fmt.Errorf("creating ReplicaSet %s: %w", rs.Name, err)
	}
	if !alreadyExists {
		c.log.Info("created new ReplicaSet", "deployment", d.Namespace+"/"+d.Name, "replicaset", created.Name, "replicas", n)
	}
	needsUpdate := setDeploymentRevision(d, strconv.FormatInt(newRevision, 10))
	if !alreadyExists && hasProgressDeadline(d) {
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSCreated,
			fmt.Sprintf("Created new replica set %q", created.Name), c.now()))
		needsUpdate = true
	}
	if needsUpdate {
		if err := c.updateDeploymentAndStatus(ctx, d); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// updateDeploymentAndStatus writes d's revision annotation and then its status.
func (c *Controller) updateDeploymentAndStatus(ctx context.Context, d *appsv1.Deployment) error {
	st := d.Status
	out, err := c.client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating Deployment %s: %w", d.Name, err)
	}
	if !reflect.DeepEqual(out.Status, st) {
		out.Status = st
		out, err = c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("updating Deployment status %s: %w", d.Name, err)
		}
	}
	*d = *out
	return nil
}

func cloneWith(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// isScalingEvent reports whether d's replicas changed since its active ReplicaSets were last
// scaled (their desired-replicas annotation).
func (c *Controller) isScalingEvent(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (bool, error) {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return false, err
	}
	for _, rs := range activeReplicaSets(append(oldRSs, newRS)) {
		desired, ok := int32Annotation(rs, DesiredReplicasAnnotation)
		if ok && desired != replicas(d.Spec.Replicas) {
			return true, nil
		}
	}
	return false, nil
}

// scale brings the ReplicaSets to d's size: all into the only active one, or proportionally
// across several while a rollout is in progress.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	want := replicas(d.Spec.Replicas)
	if rs := findActiveOrLatest(newRS, oldRSs); rs != nil {
		if replicas(rs.Spec.Replicas) == want {
			return nil
		}
		_, _, err := c.scaleReplicaSet(ctx, rs, want, d)
		return err
	}
	if isSaturated(d, newRS) {
		for _, old := range activeReplicaSets(oldRSs) {
			if _, _, err := c.scaleReplicaSet(ctx, old, 0, d); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRollingUpdate(d) {
		return nil
	}
	all := activeReplicaSets(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS))
	allowed := want
	if want > 0 {
		allowed += MaxSurge(d)
	}
	toAdd := allowed - specReplicas(all)
	switch {
	case toAdd > 0:
		sortBySize(all, true)
	case toAdd < 0:
		sortBySize(all, false)
	}
	sizes := make(map[string]int32, len(all))
	var added int32
	for _, rs := range all {
		if toAdd == 0 {
			sizes[rs.Name] = replicas(rs.Spec.Replicas)
			continue
		}
		p := replicaSetProportion(rs, d, toAdd, added)
		sizes[rs.Name] = replicas(rs.Spec.Replicas) + p
		added += p
	}
	// Rounding leaves a remainder: give it to the largest ReplicaSet.
	if toAdd != 0 && len(all) > 0 {
		sizes[all[0].Name] = max(0, sizes[all[0].Name]+toAdd-added)
	}
	for _, rs := range all {
		if _, _, err := c.scaleReplicaSet(ctx, rs, sizes[rs.Name], d); err != nil {
			return err
		}
	}
	return nil
}

// scaleReplicaSet sets rs's replicas (and its desired/max annotations) if they differ.
func (c *Controller) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, size int32, d *appsv1.Deployment) (bool, *appsv1.ReplicaSet, error) {
	want := replicas(d.Spec.Replicas)
	sizeChange := replicas(rs.Spec.Replicas) != size
	if !sizeChange && !replicasAnnotationsNeedUpdate(rs, want, want+MaxSurge(d)) {
		return false, rs, nil
	}
	cp := rs.DeepCopy()
	cp.Spec.Replicas = &size
	setReplicasAnnotations(cp, want, want+MaxSurge(d))
	out, err := c.client.AppsV1().ReplicaSets(cp.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return false, nil, fmt.Errorf("scaling ReplicaSet %s to %d: %w", rs.Name, size, err)
	}
	if sizeChange {
		c.log.Debug("scaled ReplicaSet", "replicaset", rs.Namespace+"/"+rs.Name, "from", replicas(rs.Spec.Replicas), "to", size)
		if c.recorder != nil {
			dir := "up"
			if size < replicas(rs.Spec.Replicas) {
				dir = "down"
			}
			c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", dir, rs.Name, replicas(rs.Spec.Replicas), size)
		}
	}
	*rs = *out
	return sizeChange, out, nil
}

// cleanupDeployment deletes the oldest fully scaled-down ReplicaSets beyond revisionHistoryLimit.
func (c *Controller) cleanupDeployment(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) error {
	if d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	var cleanable []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	diff := len(cleanable) - int(*d.Spec.RevisionHistoryLimit)
	if diff <= 0 {
		return nil
	}
	sort.SliceStable(cleanable, func(i, j int) bool {
		ri, _ := Revision(cleanable[i])
		rj, _ := Revision(cleanable[j])
		if ri != rj {
			return ri < rj
		}
		return cleanable[i].CreationTimestamp.Before(&cleanable[j].CreationTimestamp)
	})
	for _, rs := range cleanable[:diff] {
		// Only ReplicaSets with no pods, whose status has caught up, are history.
		if rs.Status.Replicas != 0 || replicas(rs.Spec.Replicas) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		uid := rs.UID
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !kerrors.IsNotFound(err) {
			return fmt.Errorf("deleting old ReplicaSet %s: %w", rs.Name, err)
		}
	}
	return nil
}

// calculateStatus derives d's status from its ReplicaSets.
func (c *Controller) calculateStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) appsv1.DeploymentStatus {
	available := availableReplicas(allRSs)
	unavailable := max(0, specReplicas(allRSs)-available)
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            actualReplicas(allRSs),
		UpdatedReplicas:     actualReplicas([]*appsv1.ReplicaSet{newRS}),
		ReadyReplicas:       readyReplicas(allRSs),
		AvailableReplicas:   available,
		UnavailableReplicas: unavailable,
		CollisionCount:      d.Status.CollisionCount,
	}
	st.Conditions = append(st.Conditions, d.Status.Conditions...)
	if available >= replicas(d.Spec.Replicas)-MaxUnavailable(d) {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, ReasonMinimumAvailable, "Deployment has minimum availability.", c.now()))
	} else {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, ReasonMinimumUnavailable, "Deployment does not have minimum availability.", c.now()))
	}
	return st
}

// syncDeploymentStatus writes the status calculated from the ReplicaSets if it changed.
func (c *Controller) syncDeploymentStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	st := c.calculateStatus(allRSs, newRS, d)
	if apierrors.Semantic.DeepEqual(d.Status, st) {
		return nil
	}
	d.Status = st
	if _, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating Deployment status: %w", err)
	}
	return nil
}

// oldPodsRunning reports whether any pod of an old ReplicaSet may still be running.
func oldPodsRunning(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) bool {
	if actualReplicas(oldRSs) > 0 {
		return true
	}
	for uid, pods := range podMap {
		if newRS != nil && newRS.UID == uid {
			continue
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				return true
			}
		}
	}
	return false
}
