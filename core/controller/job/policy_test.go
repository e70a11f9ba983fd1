package job

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// exited makes p's container "c" (or the named one) terminated with code.
func exited(p *corev1.Pod, code int32) *corev1.Pod {
	p.Status.ContainerStatuses[0].State.Terminated.ExitCode = code
	return p
}

func withPodCond(p *corev1.Pod, t corev1.PodConditionType) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue})
	return p
}

func withFailures(p *corev1.Pod, counted, ignored string) *corev1.Pod {
	p.Annotations[batchv1.JobIndexFailureCountAnnotation] = counted
	if ignored != "" {
		p.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = ignored
	}
	return p
}

func onNode(p *corev1.Pod) *corev1.Pod {
	p.Spec.NodeName = "n1"
	return p
}

func deleting(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = ptr.To(p.CreationTimestamp)
	return p
}

func exitRule(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, codes ...int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: codes}}
}

func condRule(action batchv1.PodFailurePolicyAction, t corev1.PodConditionType) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{Action: action, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: t, Status: corev1.ConditionTrue}}}
}

func failurePolicy(rules ...batchv1.PodFailurePolicyRule) jobOpt {
	return func(j *batchv1.Job) {
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: rules}
		j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	}
}

func perIndexLimit(limit int32, maxFailed *int32) jobOpt {
	return func(j *batchv1.Job) {
		j.Spec.BackoffLimitPerIndex, j.Spec.MaxFailedIndexes = &limit, maxFailed
		j.Spec.BackoffLimit = ptr.To[int32](1<<31 - 1)
	}
}

func TestJudgeFailure(t *testing.T) {
	const (
		failJob   = batchv1.PodFailurePolicyActionFailJob
		ignore    = batchv1.PodFailurePolicyActionIgnore
		count     = batchv1.PodFailurePolicyActionCount
		failIndex = batchv1.PodFailurePolicyActionFailIndex
		in        = batchv1.PodFailurePolicyOnExitCodesOpIn
		notIn     = batchv1.PodFailurePolicyOnExitCodesOpNotIn
	)
	failedPod := func(code int32) *corev1.Pod { return exited(pod("p", corev1.PodFailed, true, -1, 0), code) }
	for _, tc := range []struct {
		name      string
		rules     []batchv1.PodFailurePolicyRule
		pod       *corev1.Pod
		want      failureVerdict
		wantInMsg string
	}{
		{name: "no policy counts", pod: failedPod(1), want: failureVerdict{count: true}},
		{name: "FailJob on exit code In", rules: []batchv1.PodFailurePolicyRule{exitRule(failJob, in, 42)}, pod: failedPod(42),
			want:      failureVerdict{count: true, action: failJob},
			wantInMsg: "Container c for pod ns/p failed with exit code 42 matching FailJob rule at index 0"},
		{name: "In does not match another code", rules: []batchv1.PodFailurePolicyRule{exitRule(failJob, in, 42)}, pod: failedPod(1),
			want: failureVerdict{count: true}},
		{name: "NotIn matches other codes", rules: []batchv1.PodFailurePolicyRule{exitRule(ignore, notIn, 1, 2)}, pod: failedPod(3),
			want: failureVerdict{action: ignore}},
		{name: "NotIn never matches exit code 0", rules: []batchv1.PodFailurePolicyRule{exitRule(ignore, notIn, 1)},
			pod: withPodCond(failedPod(0), corev1.PodReady), want: failureVerdict{count: true}},
		{name: "first matching rule wins", rules: []batchv1.PodFailurePolicyRule{exitRule(count, in, 5), exitRule(failJob, in, 5)},
			pod: failedPod(5), want: failureVerdict{count: true, action: count}},
		{name: "container name must match", rules: []batchv1.PodFailurePolicyRule{func() batchv1.PodFailurePolicyRule {
			r := exitRule(failJob, in, 42)
			r.OnExitCodes.ContainerName = ptr.To("other")
			return r
		}()}, pod: failedPod(42), want: failureVerdict{count: true}},
		{name: "Ignore on a pod condition", rules: []batchv1.PodFailurePolicyRule{condRule(ignore, corev1.DisruptionTarget)},
			pod: withPodCond(failedPod(137), corev1.DisruptionTarget), want: failureVerdict{action: ignore}},
		{name: "FailJob on a pod condition", rules: []batchv1.PodFailurePolicyRule{condRule(failJob, corev1.DisruptionTarget)},
			pod: withPodCond(failedPod(137), corev1.DisruptionTarget), want: failureVerdict{count: true, action: failJob},
			wantInMsg: "Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0"},
		{name: "FailIndex counts", rules: []batchv1.PodFailurePolicyRule{exitRule(failIndex, in, 3)}, pod: failedPod(3),
			want: failureVerdict{count: true, action: failIndex}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var policy *batchv1.PodFailurePolicy
			if tc.rules != nil {
				policy = &batchv1.PodFailurePolicy{Rules: tc.rules}
			}
			got := judgeFailure(policy, tc.pod)
			if got.count != tc.want.count || got.action != tc.want.action || got.failJobMsg != tc.wantInMsg {
				t.Errorf("verdict = %+v, want %+v with message %q", got, tc.want, tc.wantInMsg)
			}
		})
	}
}

func TestMatchSuccessPolicy(t *testing.T) {
	rule := func(indexes *string, count *int32) batchv1.SuccessPolicyRule {
		return batchv1.SuccessPolicyRule{SucceededIndexes: indexes, SucceededCount: count}
	}
	for _, tc := range []struct {
		name      string
		rules     []batchv1.SuccessPolicyRule
		completed string
		wantMsg   string
	}{
		{name: "indexes all done", rules: []batchv1.SuccessPolicyRule{rule(ptr.To("0,2"), nil)}, completed: "0,2", wantMsg: "Matched rules at index 0"},
		{name: "indexes partly done", rules: []batchv1.SuccessPolicyRule{rule(ptr.To("0-2"), nil)}, completed: "0,2"},
		{name: "count of named indexes", rules: []batchv1.SuccessPolicyRule{rule(ptr.To("1-3"), ptr.To[int32](2))}, completed: "0,2,3",
			wantMsg: "Matched rules at index 0"},
		{name: "count of any index, second rule", rules: []batchv1.SuccessPolicyRule{rule(ptr.To("4"), nil), rule(nil, ptr.To[int32](2))},
			completed: "0,1", wantMsg: "Matched rules at index 1"},
		{name: "count not reached", rules: []batchv1.SuccessPolicyRule{rule(nil, ptr.To[int32](3))}, completed: "0,1"},
		{name: "nothing completed", rules: []batchv1.SuccessPolicyRule{rule(nil, ptr.To[int32](0))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, ok := matchSuccessPolicy(&batchv1.SuccessPolicy{Rules: tc.rules}, parseIndexes(tc.completed, 5), 5)
			if msg != tc.wantMsg || ok != (tc.wantMsg != "") {
				t.Errorf("match = %q %v, want %q", msg, ok, tc.wantMsg)
			}
		})
	}
}

// TestReconcilePolicies covers podFailurePolicy, backoffLimitPerIndex and successPolicy
// through reconcile.
func TestReconcilePolicies(t *testing.T) {
	exit42 := failurePolicy(exitRule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 42))
	ignoreDisruption := failurePolicy(condRule(batchv1.PodFailurePolicyActionIgnore, corev1.DisruptionTarget))
	for _, tc := range []struct {
		name          string
		job           *batchv1.Job
		pods          []*corev1.Pod
		wantCreate    []int
		wantDelete    []string
		wantRelease   []string
		wantUncFail   int
		wantFailed    int32
		wantFailedIdx *string
		wantConds     map[batchv1.JobConditionType]string // type → reason ("" = absent)
		wantMsg       string                              // of FailureTarget or SuccessCriteriaMet
		wantCounts    map[int][2]int32
		wantRequeue   bool
	}{
		{name: "FailJob exit code: FailureTarget first, running pods deleted, not yet Failed",
			job:        newJob(exit42),
			pods:       []*corev1.Pod{exited(pod("f", corev1.PodFailed, true, -1, time.Second), 42), pod("r", corev1.PodRunning, true, -1, 0)},
			wantDelete: []string{"r"}, wantRelease: []string{"f"}, wantUncFail: 1,
			wantConds: map[batchv1.JobConditionType]string{batchv1.JobFailureTarget: batchv1.JobReasonPodFailurePolicy, batchv1.JobFailed: ""},
			wantMsg:   "Container c for pod ns/f failed with exit code 42 matching FailJob rule at index 0"},
		{name: "FailJob target and pods gone: Failed with the policy's reason",
			job: newJob(exit42, func(j *batchv1.Job) {
				j.Status.Failed = 1
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue,
					Reason: batchv1.JobReasonPodFailurePolicy, Message: "m"}}
			}),
			pods:       []*corev1.Pod{exited(pod("f", corev1.PodFailed, false, -1, time.Second), 42)},
			wantFailed: 1,
			wantConds:  map[batchv1.JobConditionType]string{batchv1.JobFailed: batchv1.JobReasonPodFailurePolicy}},
		{name: "other exit code counts toward backoffLimit",
			job:  newJob(exit42, func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](0) }),
			pods: []*corev1.Pod{exited(pod("f", corev1.PodFailed, true, -1, time.Second), 1)}, wantRelease: []string{"f"}, wantUncFail: 1,
			wantConds: map[batchv1.JobConditionType]string{batchv1.JobFailureTarget: reasonBackoffLimit}},
		{name: "Ignore rule: released uncounted, replaced at once, no backoff limit",
			job:         newJob(ignoreDisruption, func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](0) }),
			pods:        []*corev1.Pod{withPodCond(exited(pod("f", corev1.PodFailed, true, -1, time.Second), 137), corev1.DisruptionTarget)},
			wantRelease: []string{"f"}, wantCreate: []int{-1, -1},
			wantConds: map[batchv1.JobConditionType]string{batchv1.JobFailureTarget: ""}},
		{name: "policy: a terminating pod is neither counted nor replaced until it failed",
			job:        newJob(ignoreDisruption, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](1) }),
			pods:       []*corev1.Pod{onNode(deleting(pod("t", corev1.PodRunning, true, -1, 0)))},
			wantCreate: nil},
		{name: "policy: a deleted pod that was never scheduled counts as failed at once",
			job:         newJob(ignoreDisruption, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](1) }),
			pods:        []*corev1.Pod{deleting(pod("t", corev1.PodPending, true, -1, 0))},
			wantRelease: []string{"t"}, wantUncFail: 1},
		{name: "per index: a failure below the limit is held and the index retried with its count",
			job:        newJob(indexed(3, 3), perIndexLimit(1, nil), func(j *batchv1.Job) { j.Status.FailedIndexes = ptr.To("") }),
			pods:       []*corev1.Pod{withFailures(pod("i1", corev1.PodFailed, true, 1, time.Minute), "0", ""), pod("i0", corev1.PodRunning, true, 0, 0), pod("i2", corev1.PodRunning, true, 2, 0)},
			wantCreate: []int{1}, wantCounts: map[int][2]int32{1: {1, 0}}, wantFailedIdx: ptr.To("")},
		{name: "per index: the replacement waits out the index's backoff",
			job:           newJob(indexed(3, 3), perIndexLimit(1, nil)),
			pods:          []*corev1.Pod{withFailures(pod("i1", corev1.PodFailed, true, 1, time.Second), "0", ""), pod("i0", corev1.PodRunning, true, 0, 0), pod("i2", corev1.PodRunning, true, 2, 0)},
			wantFailedIdx: ptr.To(""), wantRequeue: true},
		{name: "per index: the held pod is released once its replacement runs",
			job: newJob(indexed(3, 3), perIndexLimit(1, nil)),
			pods: []*corev1.Pod{withFailures(pod("i1", corev1.PodFailed, true, 1, time.Minute), "0", ""), withFailures(pod("i1b", corev1.PodRunning, true, 1, 0), "1", ""),
				pod("i0", corev1.PodRunning, true, 0, 0), pod("i2", corev1.PodRunning, true, 2, 0)},
			wantRelease: []string{"i1"}, wantUncFail: 1, wantFailedIdx: ptr.To("")},
		{name: "per index: limit reached, index failed, not retried; the others go on",
			job:         newJob(indexed(3, 3), perIndexLimit(1, nil)),
			pods:        []*corev1.Pod{withFailures(pod("i1", corev1.PodFailed, true, 1, time.Minute), "1", ""), pod("i0", corev1.PodRunning, true, 0, 0), pod("i2", corev1.PodRunning, true, 2, 0)},
			wantRelease: []string{"i1"}, wantUncFail: 1, wantFailedIdx: ptr.To("1"),
			wantConds: map[batchv1.JobConditionType]string{batchv1.JobFailureTarget: ""}},
		{name: "per index: all indexes finished with one failed: FailedIndexes",
			job: newJob(indexed(3, 3), perIndexLimit(1, nil), func(j *batchv1.Job) {
				j.Status.CompletedIndexes, j.Status.Succeeded, j.Status.Failed, j.Status.FailedIndexes = "0,1", 2, 2, ptr.To("2")
			}),
			wantFailed: 2, wantFailedIdx: ptr.To("2"),
			wantConds: map[batchv1.JobConditionType]string{batchv1.JobFailureTarget: batchv1.JobReasonFailedIndexes, batchv1.JobFailed: batchv1.JobReasonFailedIndexes},
			wantMsg:   msgFailedIndexes},
		{name: "per index: maxFailedIndexes exceeded fails at once",
			job:         newJob(indexed(4, 4), perIndexLimit(0, ptr.To[int32](0))),
			pods:        []*corev1.Pod{withFailures(pod("i1", corev1.PodFailed, true, 1, time.Minute), "0", ""), pod("i0", corev1.PodRunning, true, 0, 0)},
			wantRelease: []string{"i1"}, wantUncFail: 1, wantDelete: []string{"i0"}, wantFailedIdx: ptr.To("1"),
			wantConds: map[batchv1.JobConditionType]string{batchv1.JobFailureTarget: batchv1.JobReasonMaxFailedIndexesExceeded}},
		{name: "per index: FailIndex rule fails the index below its limit and deletes nothing else",
			job: newJob(indexed(3, 3), perIndexLimit(5, nil), failurePolicy(
				exitRule(batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyOnExitCodesOpIn, 3))),
			pods:        []*corev1.Pod{withFailures(exited(pod("i2", corev1.PodFailed, true, 2, time.Minute), 3), "0", ""), pod("i0", corev1.PodRunning, true, 0, 0), pod("i1", corev1.PodRunning, true, 1, 0)},
			wantRelease: []string{"i2"}, wantUncFail: 1, wantFailedIdx: ptr.To("2")},
		{name: "per index: an ignored failure is retried with the ignored counter",
			job: newJob(indexed(2, 2), perIndexLimit(0, nil), failurePolicy(
				exitRule(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, 7))),
			pods:       []*corev1.Pod{withFailures(exited(pod("i1", corev1.PodFailed, true, 1, time.Hour), 7), "0", ""), pod("i0", corev1.PodRunning, true, 0, 0)},
			wantCreate: []int{1}, wantCounts: map[int][2]int32{1: {0, 1}}, wantFailedIdx: ptr.To("")},
		{name: "success policy met: SuccessCriteriaMet, remaining pods deleted",
			job: newJob(indexed(3, 3), func(j *batchv1.Job) {
				j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
			}),
			pods:        []*corev1.Pod{pod("i0", corev1.PodSucceeded, true, 0, 0), pod("i1", corev1.PodRunning, true, 1, 0), pod("i2", corev1.PodRunning, true, 2, 0)},
			wantRelease: []string{"i0"}, wantDelete: []string{"i1", "i2"},
			wantConds: map[batchv1.JobConditionType]string{batchv1.JobSuccessCriteriaMet: batchv1.JobReasonSuccessPolicy, batchv1.JobComplete: ""},
			wantMsg:   "Matched rules at index 0"},
		{name: "success policy met and pods gone: Complete with SuccessPolicy",
			job: newJob(indexed(3, 3), func(j *batchv1.Job) {
				j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
				j.Status.CompletedIndexes, j.Status.Succeeded, j.Status.Failed = "0", 1, 2
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue,
					Reason: batchv1.JobReasonSuccessPolicy, Message: "Matched rules at index 0"}}
			}),
			wantFailed: 2,
			wantConds:  map[batchv1.JobConditionType]string{batchv1.JobComplete: batchv1.JobReasonSuccessPolicy},
			wantMsg:    "Matched rules at index 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := newController(t)
			r := c.reconcile(tc.job, tc.pods)
			if !slices.Equal(r.create, tc.wantCreate) {
				t.Errorf("create = %v, want %v", r.create, tc.wantCreate)
			}
			gotDel := names(r.delete)
			slices.Sort(gotDel)
			if !slices.Equal(gotDel, tc.wantDelete) {
				t.Errorf("delete = %v, want %v", gotDel, tc.wantDelete)
			}
			if got := names(r.release); !slices.Equal(got, tc.wantRelease) {
				t.Errorf("release = %v, want %v", got, tc.wantRelease)
			}
			st := r.status
			if len(st.UncountedTerminatedPods.Failed) != tc.wantUncFail || st.Failed != tc.wantFailed {
				t.Errorf("uncounted failed %v, failed %d; want %d, %d", st.UncountedTerminatedPods.Failed, st.Failed, tc.wantUncFail, tc.wantFailed)
			}
			if !ptr.Equal(st.FailedIndexes, tc.wantFailedIdx) {
				t.Errorf("failedIndexes = %v, want %v", ptr.Deref(st.FailedIndexes, "<nil>"), ptr.Deref(tc.wantFailedIdx, "<nil>"))
			}
			for typ, reason := range tc.wantConds {
				if got := condOf(st, typ); got != reason {
					t.Errorf("condition %s reason = %q, want %q", typ, got, reason)
				}
			}
			if tc.wantMsg != "" {
				var msgs []string
				for _, c := range st.Conditions {
					msgs = append(msgs, c.Message)
				}
				if !slices.Contains(msgs, tc.wantMsg) {
					t.Errorf("condition messages %q lack %q", strings.Join(msgs, "; "), tc.wantMsg)
				}
			}
			for ix, want := range tc.wantCounts {
				if got, ok := r.failureCounts[ix]; !ok || got != want {
					t.Errorf("failure counts of index %d = %v, want %v", ix, got, want)
				}
			}
			if (r.requeueAfter > 0) != tc.wantRequeue {
				t.Errorf("requeueAfter = %v, want set=%v", r.requeueAfter, tc.wantRequeue)
			}
		})
	}
}
