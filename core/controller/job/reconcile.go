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

	if st.UncountedTerminatedPods == nil {
		st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	uncountedOK := sets.New(st.UncountedTerminatedPods.Succeeded...)
	uncountedFailed := sets.New(st.UncountedTerminatedPods.Failed...)
	completed := parseIndexes(st.CompletedIndexes, completions)

	// Terminated pods still carrying the finalizer have not been counted: record them as
	// uncounted (stored before their finalizer goes) and, for Indexed Jobs, their index.
	var active, terminating []*corev1.Pod
	var ready int32
	var lastFailure time.Time
	seen := sets.New[types.UID]()
	for _, p := range pods {
		seen.Insert(p.UID)
		done, ok := podTerminated(p)
		if !done && p.DeletionTimestamp != nil {
			terminating = append(terminating, p)
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
		if !ok && finishTime(p).After(lastFailure) {
			lastFailure = finishTime(p)
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
		} else if !uncountedOK.Has(p.UID) {
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

	// Target conditions: once set they stay, and the Job ends when its pods are gone.
	target := func(t batchv1.JobConditionType, reason, msg string) {
		if findCond(st.Conditions, batchv1.JobFailureTarget) != nil || findCond(st.Conditions, batchv1.JobSuccessCriteriaMet) != nil {
			return
		}
		st.Conditions = setCond(st.Conditions, t, corev1.ConditionTrue, reason, msg, now)
	}
	if failed > ptr.Deref(job.Spec.BackoffLimit, 6) {
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
		r.create, r.delete = planIndexed(active, completed, completions, int(ptr.Deref(job.Spec.Parallelism, 1)))
	default:
		want := int(ptr.Deref(job.Spec.Parallelism, 1))
		if job.Spec.Completions != nil {
			want = min(want, int(*job.Spec.Completions-succeeded))
		} else if succeeded > 0 {
			want = 0 // a work-queue Job starts no new pod once one succeeded
		}
		want = max(want, 0)
		if n := want - len(active); n > 0 {
			for range n {
				r.create = append(r.create, -1)
			}
		} else if n < 0 {
			r.delete = newestFirst(active)[:-n]
		}
	}
	// Backoff after failures: hold creations until the delay since the last one passed.
	if len(r.create) > 0 && failed > 0 && !lastFailure.IsZero() {
		delay := c.backoff << min(failed-1, 16)
		if delay > MaxBackoff || delay <= 0 {
			delay = MaxBackoff
		}
		if wait := lastFailure.Add(delay).Sub(now.Time); wait > 0 {
			r.create = nil
			if r.requeueAfter == 0 || wait < r.requeueAfter {
				r.requeueAfter = wait
			}
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
	if ending && len(active) == 0 && len(terminating) == 0 && len(r.delete) == 0 && len(uncountedOK)+len(uncountedFailed) == 0 {
		if c := findCond(st.Conditions, batchv1.JobSuccessCriteriaMet); c != nil && c.Status == corev1.ConditionTrue {
			st.Conditions = setCond(st.Conditions, batchv1.JobComplete, corev1.ConditionTrue, c.Reason, c.Message, now)
			st.CompletionTime = &now
			r.events = append(r.events, event{corev1.EventTypeNormal, "Completed", "Job completed"})
		} else if c := findCond(st.Conditions, batchv1.JobFailureTarget); c != nil {
			st.Conditions = setCond(st.Conditions, batchv1.JobFailed, corev1.ConditionTrue, c.Reason, c.Message, now)
			r.events = append(r.events, event{corev1.EventTypeWarning, c.Reason, c.Message})
		}
		r.requeueAfter = 0
	}
	if ending {
		r.requeueAfter = 0
	}
	r.status = st
	return r
}

// planIndexed returns the indexes to start (lowest missing first) and the active pods to
// delete: duplicates of an index, pods of completed or out-of-range indexes, and the
// highest indexes beyond parallelism.
func planIndexed(active []*corev1.Pod, completed map[int]bool, completions, parallelism int) ([]int, []*corev1.Pod) {
	var del []*corev1.Pod
	running := map[int]*corev1.Pod{}
	for _, p := range newestFirst(active) {
		i := indexOf(p, completions)
		if i < 0 || completed[i] || running[i] != nil {
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
	var create []int
	for i := 0; i < completions && len(running)+len(create) < parallelism; i++ {
		if !completed[i] && running[i] == nil {
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
