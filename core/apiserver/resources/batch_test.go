package resources

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func batchTemplate(rp corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: rp, Containers: []corev1.Container{{Name: "c", Image: "hello:latest"}}}}
}

func TestJobDefaultsAndGeneratedSelector(t *testing.T) {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "u-1"}, Spec: batchv1.JobSpec{Template: batchTemplate(corev1.RestartPolicyNever)}}
	defaultJobSpec(&j.Spec)
	generateJobSelector(j)
	s := j.Spec
	if *s.Completions != 1 || *s.Parallelism != 1 || *s.BackoffLimit != 6 || *s.CompletionMode != batchv1.NonIndexedCompletion ||
		*s.Suspend || *s.PodReplacementPolicy != batchv1.TerminatingOrFailed {
		t.Errorf("defaults = %+v", s)
	}
	want := map[string]string{"batch.kubernetes.io/controller-uid": "u-1", "controller-uid": "u-1", "batch.kubernetes.io/job-name": "pi", "job-name": "pi"}
	for k, v := range want {
		if s.Template.Labels[k] != v || j.Labels[k] != v {
			t.Errorf("label %s: template %q job %q, want %q", k, s.Template.Labels[k], j.Labels[k], v)
		}
	}
	if s.Selector.MatchLabels["batch.kubernetes.io/controller-uid"] != "u-1" || len(s.Selector.MatchLabels) != 1 {
		t.Errorf("selector = %v", s.Selector)
	}
	if errs := validateJobSpec(&j.Spec, fieldPathSpec(), true); len(errs) != 0 {
		t.Errorf("defaulted Job invalid: %v", errs)
	}
	// Parallelism alone leaves completions unset (a work-queue Job).
	w := batchv1.JobSpec{Parallelism: ptr.To[int32](3), Template: batchTemplate(corev1.RestartPolicyNever)}
	defaultJobSpec(&w)
	if w.Completions != nil || *w.Parallelism != 3 {
		t.Errorf("work queue defaults: completions %v parallelism %d", w.Completions, *w.Parallelism)
	}
	// A per-index backoff lifts the global limit.
	p := batchv1.JobSpec{BackoffLimitPerIndex: ptr.To[int32](1), Template: batchTemplate(corev1.RestartPolicyNever)}
	defaultJobSpec(&p)
	if *p.BackoffLimit != 1<<31-1 {
		t.Errorf("backoffLimit with backoffLimitPerIndex = %d", *p.BackoffLimit)
	}
}

func TestValidateJob(t *testing.T) {
	valid := func() *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "u"}, Spec: batchv1.JobSpec{Template: batchTemplate(corev1.RestartPolicyOnFailure)}}
		defaultJobSpec(&j.Spec)
		generateJobSelector(j)
		return j
	}
	for _, tc := range []struct {
		name   string
		mutate func(*batchv1.Job)
		want   string // "" = valid
	}{
		{"valid", func(*batchv1.Job) {}, ""},
		{"restartPolicy Always", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways }, "spec.template.spec.restartPolicy"},
		{"negative parallelism", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](-1) }, "spec.parallelism"},
		{"negative backoffLimit", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](-1) }, "spec.backoffLimit"},
		{"zero deadline", func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](0) }, "spec.activeDeadlineSeconds"},
		{"indexed without completions", func(j *batchv1.Job) {
			j.Spec.CompletionMode, j.Spec.Completions = ptr.To(batchv1.IndexedCompletion), nil
		}, "spec.completions"},
		{"unknown completion mode", func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.CompletionMode("Sometimes")) }, "spec.completionMode"},
		{"selector not matching template", func(j *batchv1.Job) {
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}
		}, "spec.template.metadata.labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := valid()
			tc.mutate(j)
			errs := validateJobSpec(&j.Spec, fieldPathSpec(), true)
			if tc.want == "" && len(errs) > 0 || tc.want != "" && (len(errs) == 0 || !strings.HasPrefix(errs[0].Field, tc.want)) {
				t.Errorf("errors = %v, want one on %q", errs, tc.want)
			}
		})
	}
}

func TestValidateJobUpdate(t *testing.T) {
	old := batchv1.JobSpec{Completions: ptr.To[int32](3), Parallelism: ptr.To[int32](3), CompletionMode: ptr.To(batchv1.IndexedCompletion),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, Template: batchTemplate(corev1.RestartPolicyNever)}
	for _, tc := range []struct {
		name   string
		mutate func(*batchv1.JobSpec)
		want   string
	}{
		{"parallelism may change", func(s *batchv1.JobSpec) { s.Parallelism = ptr.To[int32](1) }, ""},
		{"suspend may change", func(s *batchv1.JobSpec) { s.Suspend = ptr.To(true) }, ""},
		{"indexed completions follow parallelism", func(s *batchv1.JobSpec) { s.Completions, s.Parallelism = ptr.To[int32](5), ptr.To[int32](5) }, ""},
		{"completions alone are immutable", func(s *batchv1.JobSpec) { s.Completions = ptr.To[int32](4) }, "spec.completions"},
		{"selector immutable", func(s *batchv1.JobSpec) { s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "c"}} }, "spec.selector"},
		{"template immutable", func(s *batchv1.JobSpec) { s.Template.Spec.Containers[0].Image = "other" }, "spec.template"},
		{"completion mode immutable", func(s *batchv1.JobSpec) { s.CompletionMode = ptr.To(batchv1.NonIndexedCompletion) }, "spec.completionMode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := *old.DeepCopy()
			tc.mutate(&cur)
			errs := validateJobSpecUpdate(&cur, &old, fieldPathSpec())
			if tc.want == "" && len(errs) > 0 || tc.want != "" && (len(errs) == 0 || errs[0].Field != tc.want) {
				t.Errorf("errors = %v, want one on %q", errs, tc.want)
			}
		})
	}
}

func TestValidateCronJob(t *testing.T) {
	valid := func() *batchv1.CronJob {
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "tick"}, Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: batchTemplate(corev1.RestartPolicyNever)}}}}
		defaultCronJob(cj)
		return cj
	}
	if cj := valid(); cj.Spec.ConcurrencyPolicy != batchv1.AllowConcurrent || *cj.Spec.SuccessfulJobsHistoryLimit != 3 || *cj.Spec.FailedJobsHistoryLimit != 1 || *cj.Spec.Suspend {
		t.Errorf("defaults = %+v", cj.Spec)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*batchv1.CronJob)
		want   string
	}{
		{"valid", func(*batchv1.CronJob) {}, ""},
		{"valid time zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr.To("Europe/Paris") }, ""},
		{"macro schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "@hourly" }, ""},
		{"bad schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "every minute" }, "spec.schedule"},
		{"empty schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "" }, "spec.schedule"},
		{"unknown time zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr.To("Mars/Olympus") }, "spec.timeZone"},
		{"TZ in schedule and timeZone", func(cj *batchv1.CronJob) {
			cj.Spec.Schedule, cj.Spec.TimeZone = "TZ=UTC * * * * *", ptr.To("UTC")
		}, "spec.schedule"},
		{"bad concurrency policy", func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = "Sometimes" }, "spec.concurrencyPolicy"},
		{"negative history", func(cj *batchv1.CronJob) { cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](-1) }, "spec.failedJobsHistoryLimit"},
		{"long name", func(cj *batchv1.CronJob) { cj.Name = strings.Repeat("a", 53) }, "metadata.name"},
		{"job template restartPolicy", func(cj *batchv1.CronJob) {
			cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}, "spec.jobTemplate.spec.template.spec.restartPolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := valid()
			tc.mutate(cj)
			errs := validateCronJob(cj)
			if tc.want == "" && len(errs) > 0 || tc.want != "" && (len(errs) == 0 || errs[0].Field != tc.want) {
				t.Errorf("errors = %v, want one on %q", errs, tc.want)
			}
		})
	}
}

func TestJobPrinter(t *testing.T) {
	for _, tc := range []struct {
		job                 batchv1.Job
		status, completions string
	}{
		{batchv1.Job{Spec: batchv1.JobSpec{Completions: ptr.To[int32](5)}, Status: batchv1.JobStatus{Succeeded: 2}}, "Running", "2/5"},
		{batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](3)}}, "Running", "0/1 of 3"},
		{batchv1.Job{Spec: batchv1.JobSpec{Completions: ptr.To[int32](1)}, Status: batchv1.JobStatus{Succeeded: 1,
			Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}, "Complete", "1/1"},
		{batchv1.Job{Spec: batchv1.JobSpec{Completions: ptr.To[int32](1)}, Status: batchv1.JobStatus{
			Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}}}, "Suspended", "0/1"},
		{batchv1.Job{Spec: batchv1.JobSpec{Completions: ptr.To[int32](1)}, Status: batchv1.JobStatus{
			Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue}}}}, "FailureTarget", "0/1"},
	} {
		if s, c := jobStatusWord(&tc.job), jobCompletions(&tc.job); s != tc.status || c != tc.completions {
			t.Errorf("status %q completions %q, want %q %q", s, c, tc.status, tc.completions)
		}
	}
}

func fieldPathSpec() *field.Path { return field.NewPath("spec") }

func TestValidateJobPolicies(t *testing.T) {
	exitCodes := func(op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) []batchv1.PodFailurePolicyRule {
		return []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values}}}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*batchv1.JobSpec)
		field  string // "" = valid
		detail string
	}{
		{"valid policies", func(s *batchv1.JobSpec) {
			s.BackoffLimitPerIndex, s.MaxFailedIndexes = ptr.To[int32](1), ptr.To[int32](2)
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: append(exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1, 42),
				batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}},
				batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionFailIndex, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: ptr.To("c"), Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0}}})}
			s.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0,2-3"), SucceededCount: ptr.To[int32](2)}}}
		}, "", ""},
		{"failure policy needs restartPolicy Never", func(s *batchv1.JobSpec) {
			s.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}
		}, "spec.template.spec.restartPolicy", `only "Never" is supported`},
		{"unknown action", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}
			s.PodFailurePolicy.Rules[0].Action = "Retry"
		}, "spec.podFailurePolicy.rules[0].action", "Unsupported value"},
		{"FailIndex without backoffLimitPerIndex", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}
			s.PodFailurePolicy.Rules[0].Action = batchv1.PodFailurePolicyActionFailIndex
		}, "spec.podFailurePolicy.rules[0].action", "requires the backoffLimitPerIndex to be set"},
		{"unknown operator", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: exitCodes("Maybe", 1)}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.operator", "Unsupported value"},
		{"unsorted values", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 5, 2)}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.values", "must be ordered"},
		{"duplicate values", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 2, 2)}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.values[1]", "Duplicate value"},
		{"0 with In", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 0, 1)}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.values[0]", "must not be 0 for the In operator"},
		{"no values", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn)}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.values", "at least one value is required"},
		{"unknown container", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}
			s.PodFailurePolicy.Rules[0].OnExitCodes.ContainerName = ptr.To("nope")
		}, "spec.podFailurePolicy.rules[0].onExitCodes.containerName", "must be one of the container"},
		{"rule with neither requirement", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore}}}
		}, "spec.podFailurePolicy.rules[0]", "specifying one of OnExitCodes and OnPodConditions is required"},
		{"more than 20 rules", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{}
			for range 21 {
				s.PodFailurePolicy.Rules = append(s.PodFailurePolicy.Rules, exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)...)
			}
		}, "spec.podFailurePolicy.rules", "Too many"},
		{"bad condition status", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: "Perhaps"}}}}}
		}, "spec.podFailurePolicy.rules[0].onPodConditions[0].status", "Unsupported value"},
		{"replacement policy must be Failed", func(s *batchv1.JobSpec) {
			s.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}
			s.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
		}, "spec.podReplacementPolicy", "Unsupported value"},
		{"backoffLimitPerIndex needs Indexed", func(s *batchv1.JobSpec) {
			s.CompletionMode, s.BackoffLimitPerIndex = ptr.To(batchv1.NonIndexedCompletion), ptr.To[int32](1)
		}, "spec.backoffLimitPerIndex", "requires indexed completion mode"},
		{"maxFailedIndexes needs backoffLimitPerIndex", func(s *batchv1.JobSpec) { s.MaxFailedIndexes = ptr.To[int32](1) },
			"spec.backoffLimitPerIndex", "when maxFailedIndexes is specified"},
		{"maxFailedIndexes above completions", func(s *batchv1.JobSpec) {
			s.BackoffLimitPerIndex, s.MaxFailedIndexes = ptr.To[int32](1), ptr.To[int32](5)
		}, "spec.maxFailedIndexes", "must be less than or equal to completions"},
		{"success policy needs Indexed", func(s *batchv1.JobSpec) {
			s.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
			s.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](1)}}}
		}, "spec.successPolicy", "requires indexed completion mode"},
		{"success policy without rules", func(s *batchv1.JobSpec) { s.SuccessPolicy = &batchv1.SuccessPolicy{} },
			"spec.successPolicy.rules", "at least one rules must be specified"},
		{"empty success rule", func(s *batchv1.JobSpec) {
			s.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{}}}
		}, "spec.successPolicy.rules[0]", "at least one of succeededCount or succeededIndexes"},
		{"succeededIndexes out of range", func(s *batchv1.JobSpec) {
			s.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("1-4")}}}
		}, "spec.successPolicy.rules[0].succeededIndexes", "error parsing succeededIndexes"},
		{"succeededIndexes not increasing", func(s *batchv1.JobSpec) {
			s.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("2,1")}}}
		}, "spec.successPolicy.rules[0].succeededIndexes", "non-increasing order"},
		{"succeededCount above its indexes", func(s *batchv1.JobSpec) {
			s.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0,1"), SucceededCount: ptr.To[int32](3)}}}
		}, "spec.successPolicy.rules[0].succeededCount", "the number of indexes in the specified succeededIndexes field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "u"}, Spec: batchv1.JobSpec{
				CompletionMode: ptr.To(batchv1.IndexedCompletion), Completions: ptr.To[int32](4), Template: batchTemplate(corev1.RestartPolicyNever)}}
			tc.mutate(&j.Spec)
			defaultJobSpec(&j.Spec)
			generateJobSelector(j)
			errs := validateJobSpec(&j.Spec, fieldPathSpec(), true)
			if tc.field == "" {
				if len(errs) > 0 {
					t.Errorf("errors = %v, want none", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == tc.field && strings.Contains(e.Error(), tc.detail) {
					return
				}
			}
			t.Errorf("errors = %v, want one on %s saying %q", errs, tc.field, tc.detail)
		})
	}
	// The policies are immutable once the Job exists.
	old := batchv1.JobSpec{CompletionMode: ptr.To(batchv1.IndexedCompletion), Completions: ptr.To[int32](4), BackoffLimitPerIndex: ptr.To[int32](1),
		Template: batchTemplate(corev1.RestartPolicyNever)}
	cur := *old.DeepCopy()
	cur.BackoffLimitPerIndex = ptr.To[int32](2)
	cur.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](1)}}}
	errs := validateJobSpecUpdate(&cur, &old, fieldPathSpec())
	if len(errs) != 2 || errs[0].Field != "spec.backoffLimitPerIndex" || errs[1].Field != "spec.successPolicy" {
		t.Errorf("update errors = %v, want backoffLimitPerIndex and successPolicy immutable", errs)
	}
}
