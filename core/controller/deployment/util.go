package deployment

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Annotations and labels Kubernetes' deployment controller and kubectl agree on.
const (
	// RevisionAnnotation is the revision of a ReplicaSet (and of its Deployment's current one).
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists the earlier revisions a revived ReplicaSet had.
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the Deployment's replicas when the ReplicaSet was last scaled.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is replicas+maxSurge when the ReplicaSet was last scaled.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
	// PodTemplateHashLabel tells the ReplicaSets of one Deployment (and their pods) apart.
	PodTemplateHashLabel = appsv1.DefaultDeploymentUniqueLabelKey
	// revisionHistoryLimitChars bounds the revision-history annotation.
	revisionHistoryLimitChars = 2000
)

// Condition reasons, as in Kubernetes (kubectl rollout status reads them).
const (
	ReasonNewRSCreated        = "NewReplicaSetCreated"
	ReasonFoundNewRS          = "FoundNewReplicaSet"
	ReasonRSUpdated           = "ReplicaSetUpdated"
	ReasonNewRSAvailable      = "NewReplicaSetAvailable"
	ReasonTimedOut            = "ProgressDeadlineExceeded"
	ReasonFailedRSCreate      = "ReplicaSetCreateError"
	ReasonPaused              = "DeploymentPaused"
	ReasonResumed             = "DeploymentResumed"
	ReasonMinimumAvailable    = "MinimumReplicasAvailable"
	ReasonMinimumUnavailable  = "MinimumReplicasUnavailable"
	annotationLastAppliedConf = corev1.LastAppliedConfigAnnotation
)

// ComputeHash returns the pod-template-hash of template, as Kubernetes computes it: FNV-32a
// over the object's deep dump plus the collision count, rendered with SafeEncodeString.
func ComputeHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		_, _ = h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// ResolveFenceposts turns maxSurge and maxUnavailable into pod counts for desired replicas:
// surge rounds up, unavailable rounds down, and if both are zero one pod may be unavailable
// so that a rollout can make progress.
func ResolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	zero := intstr.FromInt32(0)
	if maxSurge == nil {
		maxSurge = &zero
	}
	if maxUnavailable == nil {
		maxUnavailable = &zero
	}
	surge, err := intstr.GetScaledValueFromIntOrPercent(maxSurge, int(desired), true)
	if err != nil {
		return 0, 0, fmt.Errorf("maxSurge: %w", err)
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, int(desired), false)
	if err != nil {
		return 0, 0, fmt.Errorf("maxUnavailable: %w", err)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return int32(surge), int32(unavailable), nil
}

func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType || d.Spec.Strategy.Type == ""
}

func rollingParams(d *appsv1.Deployment) (*intstr.IntOrString, *intstr.IntOrString) {
	if d.Spec.Strategy.RollingUpdate == nil {
		// API defaults are 25%/25%; be robust to an undefaulted object.
		q := intstr.FromString("25%")
		return &q, &q
	}
	return d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable
}

// MaxUnavailable is how many of d's pods may be unavailable during a rolling update.
func MaxUnavailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || replicas(d.Spec.Replicas) == 0 {
		return 0
	}
	s, u := rollingParams(d)
	_, unavailable, _ := ResolveFenceposts(s, u, replicas(d.Spec.Replicas))
	return min(unavailable, replicas(d.Spec.Replicas))
}

// MaxSurge is how many pods above replicas d may run during a rolling update.
func MaxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	s, u := rollingParams(d)
	surge, _, _ := ResolveFenceposts(s, u, replicas(d.Spec.Replicas))
	return surge
}

// equalIgnoreHash compares two pod templates ignoring the pod-template-hash label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, PodTemplateHashLabel)
	delete(b.Labels, PodTemplateHashLabel)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return equality.Semantic.DeepEqual(a, b)
}

// byCreation sorts oldest first, ties broken by name.
func byCreation(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool {
		a, b := rss[i], rss[j]
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
}

// findNewReplicaSet returns the oldest ReplicaSet whose template matches d's.
func findNewReplicaSet(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sorted := append([]*appsv1.ReplicaSet(nil), rss...)
	byCreation(sorted)
	for _, rs := range sorted {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// findOldReplicaSets returns every ReplicaSet but the new one.
func findOldReplicaSets(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	newRS := findNewReplicaSet(d, rss)
	var old []*appsv1.ReplicaSet
	for _, rs := range rss {
		if newRS == nil || rs.UID != newRS.UID {
			old = append(old, rs)
		}
	}
	return old
}

// Revision parses an object's revision annotation (0 when absent).
func Revision(obj metav1.Object) (int64, error) {
	v, ok := obj.GetAnnotations()[RevisionAnnotation]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("revision annotation %q: %w", v, err)
	}
	return n, nil
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		if v, err := Revision(rs); err == nil {
			m = max(m, v)
		}
	}
	return m
}

// setNewReplicaSetAnnotations copies d's annotations to rs and raises its revision to
// newRevision, keeping the revisions it had before in the history annotation (a rollback).
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision int64, exists bool) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		switch k {
		case annotationLastAppliedConf, RevisionAnnotation, RevisionHistoryAnnotation, DesiredReplicasAnnotation, MaxReplicasAnnotation:
			continue
		}
		if cur, ok := rs.Annotations[k]; ok && cur == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	oldRev, had := rs.Annotations[RevisionAnnotation]
	oldN, err := strconv.ParseInt(oldRev, 10, 64)
	if err != nil {
		if oldRev != "" {
			return changed
		}
		oldN = 0
	}
	if oldN < newRevision {
		rs.Annotations[RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
		changed = true
		if had {
			hist := rs.Annotations[RevisionHistoryAnnotation]
			if hist == "" {
				hist = oldRev
			} else {
				hist += "," + oldRev
			}
			for len(hist) > revisionHistoryLimitChars {
				_, rest, ok := strings.Cut(hist, ",")
				if !ok {
					break
				}
				hist = rest
			}
			rs.Annotations[RevisionHistoryAnnotation] = hist
		}
	}
	if !exists && setReplicasAnnotations(rs, replicas(d.Spec.Replicas), replicas(d.Spec.Replicas)+MaxSurge(d)) {
		changed = true
	}
	return changed
}

// setDeploymentRevision records revision on d, reporting a change.
func setDeploymentRevision(d *appsv1.Deployment, revision string) bool {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	if d.Annotations[RevisionAnnotation] == revision {
		return false
	}
	d.Annotations[RevisionAnnotation] = revision
	return true
}

func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	d, m := strconv.Itoa(int(desired)), strconv.Itoa(int(maxReplicas))
	if rs.Annotations[DesiredReplicasAnnotation] == d && rs.Annotations[MaxReplicasAnnotation] == m {
		return false
	}
	rs.Annotations[DesiredReplicasAnnotation] = d
	rs.Annotations[MaxReplicasAnnotation] = m
	return true
}

func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.Itoa(int(maxReplicas))
}

func int32Annotation(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

func activeReplicaSets(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && replicas(rs.Spec.Replicas) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// specReplicas sums spec.replicas.
func specReplicas(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += replicas(rs.Spec.Replicas)
		}
	}
	return n
}

// actualReplicas sums status.replicas.
func actualReplicas(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += rs.Status.Replicas
		}
	}
	return n
}

func readyReplicas(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += rs.Status.ReadyReplicas
		}
	}
	return n
}

// availableReplicas sums status.availableReplicas, counting a ReplicaSet being scaled down as
// at most its new size: the pods above it are on their way out, and trusting a status that
// has not caught up yet would let a rollout take down more than maxUnavailable.
func availableReplicas(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += min(rs.Status.AvailableReplicas, replicas(rs.Spec.Replicas))
		}
	}
	return n
}

// podsUpperBound sums, per ReplicaSet, the larger of spec.replicas and status.replicas: a
// ReplicaSet just scaled down still has its pods until its controller deletes them, and
// surging on the strength of the lower spec alone would briefly exceed maxSurge.
func podsUpperBound(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += max(replicas(rs.Spec.Replicas), rs.Status.Replicas)
		}
	}
	return n
}

// newRSNewReplicas is how many replicas the new ReplicaSet may have now.
func newRSNewReplicas(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	want := replicas(d.Spec.Replicas)
	if !isRollingUpdate(d) {
		return want
	}
	cur := replicas(newRS.Spec.Replicas)
	maxTotal := want + MaxSurge(d)
	total := podsUpperBound(all)
	if total >= maxTotal {
		return cur
	}
	return cur + min(maxTotal-total, want-cur)
}

// isSaturated reports whether rs alone runs all of d's pods, all available.
func isSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, ok := int32Annotation(rs, DesiredReplicasAnnotation)
	want := replicas(d.Spec.Replicas)
	return ok && desired == want && replicas(rs.Spec.Replicas) == want && rs.Status.AvailableReplicas == want
}

// findActiveOrLatest returns the only active ReplicaSet, or the newest one when none is
// active, or nil when several are (a rollout is in progress).
func findActiveOrLatest(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(old) == 0 {
		return nil
	}
	sorted := append([]*appsv1.ReplicaSet(nil), old...)
	byCreation(sorted)
	active := activeReplicaSets(append(append([]*appsv1.ReplicaSet(nil), sorted...), newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return sorted[len(sorted)-1]
	case 1:
		return active[0]
	}
	return nil
}

// replicaSetProportion is how many replicas rs gains (or loses) when the Deployment grows by
// toAdd and added have already been handed out.
func replicaSetProportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || replicas(rs.Spec.Replicas) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	frac := replicaSetFraction(rs, d)
	allowed := toAdd - added
	if toAdd > 0 {
		return min(frac, allowed)
	}
	return max(frac, allowed)
}

func replicaSetFraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	want := replicas(d.Spec.Replicas)
	if want == 0 {
		return -replicas(rs.Spec.Replicas)
	}
	total := want + MaxSurge(d)
	annotated, ok := int32Annotation(rs, MaxReplicasAnnotation)
	if !ok || annotated == 0 {
		annotated = d.Status.Replicas
	}
	if annotated == 0 {
		return 0
	}
	size := float64(replicas(rs.Spec.Replicas)*total) / float64(annotated)
	return int32(math.Round(size)) - replicas(rs.Spec.Replicas)
}

// sortBySize orders larger first; ties go newer first when growing, older first when
// shrinking, so proportional scaling hands leftovers out as Kubernetes does.
func sortBySize(rss []*appsv1.ReplicaSet, newerFirst bool) {
	sort.SliceStable(rss, func(i, j int) bool {
		a, b := rss[i], rss[j]
		if replicas(a.Spec.Replicas) != replicas(b.Spec.Replicas) {
			return replicas(a.Spec.Replicas) > replicas(b.Spec.Replicas)
		}
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		if newerFirst {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
}

// Conditions.

func newCondition(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string, now time.Time) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg,
		LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
}

func getCondition(st appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setCondition replaces the condition of its type unless status and reason are unchanged,
// keeping the transition time when only the reason changes.
func setCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := getCondition(*st, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(st, c.Type)
	st.Conditions = append(st.Conditions, c)
}

func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// deploymentComplete reports whether every replica is updated and available.
func deploymentComplete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	want := replicas(d.Spec.Replicas)
	return st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want && st.ObservedGeneration >= d.Generation
}

// deploymentProgressing reports whether st moved the rollout forward from d's last status.
func deploymentProgressing(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	old := d.Status
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas ||
		st.AvailableReplicas > old.AvailableReplicas
}

// deploymentTimedOut reports whether the rollout has made no progress for
// progressDeadlineSeconds.
func deploymentTimedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	c := getCondition(*st, appsv1.DeploymentProgressing)
	if c == nil || c.Reason == ReasonNewRSAvailable {
		return false
	}
	if c.Reason == ReasonTimedOut {
		return true
	}
	return c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Before(now)
}
