package job

import (
	"slices"
	"strconv"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/replicaset"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

// Condition reasons and messages, as Kubernetes writes them.
const (
	reasonCompletionsReached = "CompletionsReached"
	msgCompletionsReached    = "Reached expected number of succeeded pods"
	reasonBackoffLimit       = "BackoffLimitExceeded"
	msgBackoffLimit          = "Job has reached the specified backoff limit"
	reasonDeadline           = "DeadlineExceeded"
	msgDeadline              = "Job was active longer than specified deadline"
	reasonSuspended          = "JobSuspended"
	reasonResumed            = "JobResumed"
	msgMaxFailedIndexes      = "Job has exceeded the specified maximal number of failed indexes"
	msgFailedIndexes         = "Job has failed indexes"
)

// result is what one sync decided: the status to write before anything else, the pods
// to create and delete, and the pods whose finalizer may go once the status is stored.
type result struct {
	status       batchv1.JobStatus
	create       []int // completion indexes of pods to create; -1 for NonIndexed
	delete       []*corev1.Pod
	release      []*corev1.Pod // terminated pods already recorded as uncounted
	requeueAfter time.Duration
	events       []event
	// failureCounts are the per-index failure counters (counted, ignored) the pods
	// created for an index carry, for Jobs with backoffLimitPerIndex.
	failureCounts map[int][2]int32
}

type event struct{ typ, reason, msg string }

func isFinished(j *batchv1.Job) bool {
	return condTrue(j.Status.Conditions, batchv1.JobComplete) || condTrue(j.Status.Conditions, batchv1.JobFailed)
}

func condTrue(conds []batchv1.JobCondition, t batchv1.JobConditionType) bool {
	c := findCond(conds, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

func findCond(conds []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// setCond sets a condition, keeping its transition time when the status does not change.
func setCond(conds []batchv1.JobCondition, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, msg string, now metav1.Time) []batchv1.JobCondition {
	if c := findCond(conds, t); c != nil {
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = status, reason, msg, now
		return conds
	}
	return append(conds, batchv1.JobCondition{Type: t, Status: status, Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now})
}

func hasFinalizer(p *corev1.Pod) bool { return slices.Contains(p.Finalizers, TrackingFinalizer) }

// podTerminated reports whether p has finished and, if so, whether it succeeded. A pod
// deleted before it finished counts as failed, as Kubernetes counts it.
func podTerminated(p *corev1.Pod) (done, succeeded bool) {
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return true, true
	case corev1.PodFailed:
		return true, false
	}
	return false, false
}

// indexOf is an Indexed Job pod's completion index, or -1.
func indexOf(p *corev1.Pod, completions int) int {
	v, ok := p.Annotations[CompletionIndexKey]
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i >= completions {
		return -1
	}
	return i
}

// finishTime is when a terminated pod stopped, for backoff.
func finishTime(p *corev1.Pod) time.Time {
	var t time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
			t = term.FinishedAt.Time
		}
	}
	if t.IsZero() && p.DeletionTimestamp != nil {
		t = p.DeletionTimestamp.Time
	}
	if t.IsZero() {
		t = p.CreationTimestamp.Time
	}
	return t
}

// reconcile decides, from the Job and its pods as the cache shows them, what to write
// and which pods to create or delete. It does no I/O.
func (c *Controller) reconcile(job *batchv1.Job, pods []*corev1.Pod) result {
	now := metav1.NewTime(c.clock.Now())
	st := *job.Status.DeepCopy()
	var r result
	indexed := ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion
	completions := int(ptr.Deref(job.Spec.Completions, 0))
	suspended := ptr.Deref(job.Spec.Suspend, false)
	policy := job.Spec.PodFailurePolicy
	perIndex := indexed && job.Spec.BackoffLimitPerIndex != nil
	// With podReplacementPolicy Failed (implied by a podFailurePolicy) a pod being
	// deleted is neither replaced nor judged until it reaches a terminal phase.
	onlyFailed := policy != nil || ptr.Deref(job.Spec.PodReplacementPolicy, batchv1.TerminatingOrFailed) == batchv1.Failed

	if st.UncountedTerminatedPods == nil {
		st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	uncountedOK := sets.New(st.UncountedTerminatedPods.Succeeded...)
	uncountedFailed := sets.New(st.UncountedTerminatedPods.Failed...)
	completed := parseIndexes(st.CompletedIndexes, completions)
	failedIdx := map[int]bool{}
	if perIndex && st.FailedIndexes != nil {
		failedIdx = parseIndexes(*st.FailedIndexes, completions)
	}

	// Target conditions: the first one set stays, and the Job ends when its pods are gone.
	target := func(t batchv1.JobConditionType, reason, msg string) {
		if findCond(st.Conditions, batchv1.JobFailureTarget) != nil || findCond(st.Conditions, batchv1.JobSuccessCriteriaMet) != nil {
			return
		}
		st.Conditions = setCond(st.Conditions, t, corev1.ConditionTrue, reason, msg, now)
	}
	// A FailJob rule matching a failed pod fails the Job; the FailureTarget records the
	// message before any finalizer goes.
	if policy != nil {
		for _, p := range pods {
			if p.Status.Phase != corev1.PodFailed {
				continue
			}
			if v := judgeFailure(policy, p); v.failJobMsg != "" {
				target(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, v.failJobMsg)
				break
			}
		}
	}
	failing := condTrue(st.Conditions, batchv1.JobFailureTarget)
	endingEarly := failing || condTrue(st.Conditions, batchv1.JobSuccessCriteriaMet)

	// Terminated pods still carrying the finalizer have not been counted: record them as
	// uncounted (stored before their finalizer goes) and, for Indexed Jobs, their index.
	var active, terminating, newFailed, held []*corev1.Pod
	var ready int32
	var lastFailure time.Time
	verdicts := map[types.UID]failureVerdict{}
	lastFailed := map[int]*corev1.Pod{} // per index, the failed pod a replacement continues from
	occupied := map[int]bool{}          // indexes whose pod is still terminating, not to be replaced yet
	for _, p := range pods {
		done, ok := podTerminated(p)
		if !done && p.DeletionTimestamp != nil {
			terminating = append(terminating, p)
			// A pod never scheduled has no kubelet to give it a terminal phase (Kubernetes'
			// pod garbage collector marks it Failed): it is counted as failed now.
			if onlyFailed && !failing && p.Spec.NodeName != "" {
				occupied[indexOf(p, completions)] = true
				continue
			}
			if hasFinalizer(p) && !uncountedOK.Has(p.UID) {
				// Deleted before it finished: a failure, counted when it is gone, unless
				// the Job's suspension deleted it.
				if !suspended {
					uncountedFailed.Insert(p.UID)
				}
				r.release = append(r.release, p)
			}
			continue
		}
		if !done {
			active = append(active, p)
			if replicaset.IsPodReady(p) {
				ready++
			}
			continue
		}
		if !ok {
			v := judgeFailure(policy, p)
			verdicts[p.UID] = v
			if v.count && finishTime(p).After(lastFailure) {
				lastFailure = finishTime(p)
			}
			if ix := indexOf(p, completions); perIndex && ix >= 0 {
				if prev := lastFailed[ix]; prev == nil || laterFailure(p, prev) {
					lastFailed[ix] = p
				}
				if n, _ := indexFailures(p); hasFinalizer(p) && v.count &&
					(v.action == batchv1.PodFailurePolicyActionFailIndex || n >= *job.Spec.BackoffLimitPerIndex) {
					failedIdx[ix] = true
				}
			}
		}
		if !hasFinalizer(p) {
			continue
		}
		if ok {
			if !uncountedFailed.Has(p.UID) {
				uncountedOK.Insert(p.UID)
				if indexed {
					if i := indexOf(p, completions); i >= 0 {
						completed[i] = true
					}
				}
			}
			r.release = append(r.release, p)
		} else {
			newFailed = append(newFailed, p)
		}
	}
	activeIdx := map[int]bool{}
	for _, p := range active {
		activeIdx[indexOf(p, completions)] = true
	}
	for _, p := range newFailed {
		// With backoffLimitPerIndex the last failed pod of an index that will run again
		// keeps its finalizer until a replacement runs that carries its failure count on.
		if ix := indexOf(p, completions); perIndex && !endingEarly && ix >= 0 && !completed[ix] && !failedIdx[ix] && !activeIdx[ix] && lastFailed[ix] == p {
			held = append(held, p)
			continue
		}
		if verdicts[p.UID].count && !uncountedOK.Has(p.UID) {
			uncountedFailed.Insert(p.UID)
		}
		r.release = append(r.release, p)
	}
	// Uncounted pods that are gone or released are counted now.
	hasFin := map[types.UID]bool{}
	for _, p := range pods {
		hasFin[p.UID] = hasFinalizer(p)
	}
	for uid := range uncountedOK {
		if !hasFin[uid] {
			uncountedOK.Delete(uid)
			if !indexed {
				st.Succeeded++
			}
		}
	}
	for uid := range uncountedFailed {
		if !hasFin[uid] {
			uncountedFailed.Delete(uid)
			st.Failed++
		}
	}
	st.UncountedTerminatedPods.Succeeded = sets.List(uncountedOK)
	st.UncountedTerminatedPods.Failed = sets.List(uncountedFailed)
	if indexed {
		st.CompletedIndexes = formatIndexes(completed)
		st.Succeeded = int32(len(completed))
	}
	if perIndex {
		st.FailedIndexes = ptr.To(formatIndexes(failedIdx))
	}
	succeeded := st.Succeeded + int32(len(uncountedOK))
	if indexed {
		succeeded = st.Succeeded
	}
	failed := st.Failed + int32(len(uncountedFailed))

	// Start time: set when the Job first runs, reset on resume so activeDeadlineSeconds
	// counts running time only.
	if suspended {
		if !condTrue(st.Conditions, batchv1.JobSuspended) {
			st.Conditions = setCond(st.Conditions, batchv1.JobSuspended, corev1.ConditionTrue, reasonSuspended, "Job suspended", now)
			r.events = append(r.events, event{corev1.EventTypeNormal, "Suspended", "Job suspended"})
		}
	} else {
		if condTrue(st.Conditions, batchv1.JobSuspended) {
			st.Conditions = setCond(st.Conditions, batchv1.JobSuspended, corev1.ConditionFalse, reasonResumed, "Job resumed", now)
			st.StartTime = nil
			r.events = append(r.events, event{corev1.EventTypeNormal, "Resumed", "Job resumed"})
		}
		if st.StartTime == nil {
			st.StartTime = &now
		}
	}

	// Kubernetes' order: failures before successes.
	if failed > ptr.Deref(job.Spec.BackoffLimit, 6) || pastBackoffLimitOnFailure(job, pods) {
		target(batchv1.JobFailureTarget, reasonBackoffLimit, msgBackoffLimit)
	}
	if ads := job.Spec.ActiveDeadlineSeconds; ads != nil && st.StartTime != nil && !suspended {
		deadline := st.StartTime.Add(time.Duration(*ads) * time.Second)
		if !now.Time.Before(deadline) {
			target(batchv1.JobFailureTarget, reasonDeadline, msgDeadline)
		} else {
			r.requeueAfter = deadline.Sub(now.Time)
		}
	}
	if perIndex {
		if m := job.Spec.MaxFailedIndexes; m != nil && len(failedIdx) > int(*m) {
			target(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, msgMaxFailedIndexes)
		} else if len(failedIdx) > 0 && len(failedIdx)+len(completed) >= completions {
			target(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, msgFailedIndexes)
		}
	}
	if indexed {
		if msg, ok := matchSuccessPolicy(job.Spec.SuccessPolicy, completed, completions); ok {
			target(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, msg)
		}
	}
	switch {
	case indexed && len(completed) >= completions:
		target(batchv1.JobSuccessCriteriaMet, reasonCompletionsReached, msgCompletionsReached)
	case !indexed && job.Spec.Completions != nil && succeeded >= *job.Spec.Completions:
		target(batchv1.JobSuccessCriteriaMet, reasonCompletionsReached, msgCompletionsReached)
	case !indexed && job.Spec.Completions == nil && succeeded > 0 && len(active) == 0:
		// Work-queue Jobs end once one pod succeeded and no other still runs.
		target(batchv1.JobSuccessCriteriaMet, reasonCompletionsReached, msgCompletionsReached)
	}

	ending := condTrue(st.Conditions, batchv1.JobFailureTarget) || condTrue(st.Conditions, batchv1.JobSuccessCriteriaMet)
	switch {
	case ending || suspended:
		r.delete = append(r.delete, active...)
		active = nil
	case indexed:
		r.create, r.delete = planIndexed(active, occupied, completed, failedIdx, completions, int(ptr.Deref(job.Spec.Parallelism, 1)))
	default:
		want := int(ptr.Deref(job.Spec.Parallelism, 1))
		if job.Spec.Completions != nil {
			want = min(want, int(*job.Spec.Completions-succeeded))
		} else if succeeded > 0 {
			want = 0 // a work-queue Job starts no new pod once one succeeded
		}
		want = max(want, 0)
		n := want - len(active)
		if n < 0 {
			r.delete = newestFirst(active)[:-n]
		}
		if onlyFailed {
			n -= len(terminating)
		}
		for range n {
			r.create = append(r.create, -1)
		}
	}
	if perIndex {
		c.backoffPerIndex(&r, lastFailed, job.Spec.PodFailurePolicy, now.Time)
	} else if len(r.create) > 0 && failed > 0 && !lastFailure.IsZero() {
		// Backoff after failures: hold creations until the delay since the last one passed.
		if wait := lastFailure.Add(c.backoffAfter(failed)).Sub(now.Time); wait > 0 {
			r.create = nil
			r.requeueAt(wait)
		}
	}

	st.Active = int32(len(active) - len(r.delete) + len(r.create))
	if ending || suspended {
		st.Active = 0
	}
	st.Active = max(st.Active, 0)
	st.Ready = &ready
	st.Terminating = ptr.To(int32(len(terminating) + len(r.delete)))

	// The Job finishes when its target is reached and no pod is left running or
	// uncounted.
	if ending && len(active) == 0 && len(terminating) == 0 && len(r.delete) == 0 && len(held) == 0 && len(uncountedOK)+len(uncountedFailed) == 0 {
		if c := findCond(st.Conditions, batchv1.JobSuccessCriteriaMet); c != nil && c.Status == corev1.ConditionTrue {
			st.Conditions = setCond(st.Conditions, batchv1.JobComplete, corev1.ConditionTrue, c.Reason, c.Message, now)
			st.CompletionTime = &now
			r.events = append(r.events, event{corev1.EventTypeNormal, "Completed", "Job completed"})
		} else if c := findCond(st.Conditions, batchv1.JobFailureTarget); c != nil {
			st.Conditions = setCond(st.Conditions, batchv1.JobFailed, corev1.ConditionTrue, c.Reason, c.Message, now)
			r.events = append(r.events, event{corev1.EventTypeWarning, c.Reason, c.Message})
		}
	}
	if ending {
		r.requeueAfter = 0
	}
	r.status = st
	return r
}

// pastBackoffLimitOnFailure reports whether the container restarts of a Job whose pods
// restart in place (restartPolicy OnFailure) reached its backoffLimit: with that policy a
// failing container restarts instead of failing its pod, so Kubernetes counts the
// restartCounts of the pods still pending or running — any restart when the limit is 0.
func pastBackoffLimitOnFailure(job *batchv1.Job, pods []*corev1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			restarts += cs.RestartCount
		}
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
	}
	limit := ptr.Deref(job.Spec.BackoffLimit, 6)
	if limit == 0 {
		return restarts > 0
	}
	return restarts >= limit
}

// requeueAt asks for a sync after wait unless an earlier one is already due.
func (r *result) requeueAt(wait time.Duration) {
	if r.requeueAfter == 0 || wait < r.requeueAfter {
		r.requeueAfter = wait
	}
}

// backoffAfter is the delay before a new pod after n failures: the base backoff
// doubled per further failure, capped at MaxBackoff.
func (c *Controller) backoffAfter(n int32) time.Duration {
	delay := c.backoff << min(n-1, 16)
	if delay > MaxBackoff || delay <= 0 {
		delay = MaxBackoff
	}
	return delay
}

// backoffPerIndex gives each index to create the failure counters it continues from
// and holds back the indexes whose own backoff has not passed: with
// backoffLimitPerIndex every index backs off on its own failures.
func (c *Controller) backoffPerIndex(r *result, lastFailed map[int]*corev1.Pod, policy *batchv1.PodFailurePolicy, now time.Time) {
	var keep []int
	for _, ix := range r.create {
		var counts [2]int32
		if p := lastFailed[ix]; p != nil {
			counts[0], counts[1] = indexFailures(p)
			if judgeFailure(policy, p).count {
				counts[0]++
			} else {
				counts[1]++
			}
			if wait := finishTime(p).Add(c.backoffAfter(counts[0] + counts[1])).Sub(now); wait > 0 {
				r.requeueAt(wait)
				continue
			}
		}
		if r.failureCounts == nil {
			r.failureCounts = map[int][2]int32{}
		}
		r.failureCounts[ix] = counts
		keep = append(keep, ix)
	}
	r.create = keep
}

// laterFailure reports whether failed pod a comes after b in an index's history: more
// failures recorded, or the same and finished later.
func laterFailure(a, b *corev1.Pod) bool {
	ac, ai := indexFailures(a)
	bc, bi := indexFailures(b)
	if ac+ai != bc+bi {
		return ac+ai > bc+bi
	}
	return finishTime(a).After(finishTime(b))
}

// planIndexed returns the indexes to start (lowest missing first) and the active pods to
// delete: duplicates of an index, pods of completed, failed or out-of-range indexes, and
// the highest indexes beyond parallelism. Occupied indexes (their pod still terminating)
// are neither started nor counted free.
func planIndexed(active []*corev1.Pod, occupied, completed, failed map[int]bool, completions, parallelism int) ([]int, []*corev1.Pod) {
	var del []*corev1.Pod
	running := map[int]*corev1.Pod{}
	for _, p := range newestFirst(active) {
		i := indexOf(p, completions)
		if i < 0 || completed[i] || failed[i] || running[i] != nil {
			del = append(del, p)
			continue
		}
		running[i] = p
	}
	if extra := len(running) - parallelism; extra > 0 {
		keys := make([]int, 0, len(running))
		for i := range running {
			keys = append(keys, i)
		}
		slices.Sort(keys)
		for _, i := range keys[len(keys)-extra:] {
			del = append(del, running[i])
			delete(running, i)
		}
	}
	busy := len(running)
	for i := range occupied {
		if i >= 0 && running[i] == nil {
			busy++
		}
	}
	var create []int
	for i := 0; i < completions && busy+len(create) < parallelism; i++ {
		if !completed[i] && !failed[i] && !occupied[i] && running[i] == nil {
			create = append(create, i)
		}
	}
	return create, del
}

// newestFirst orders pods for deletion: not-yet-ready and younger pods go first.
func newestFirst(pods []*corev1.Pod) []*corev1.Pod {
	out := slices.Clone(pods)
	slices.SortStableFunc(out, func(a, b *corev1.Pod) int {
		if ra, rb := replicaset.IsPodReady(a), replicaset.IsPodReady(b); ra != rb {
			if ra {
				return 1
			}
			return -1
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	return out
}
