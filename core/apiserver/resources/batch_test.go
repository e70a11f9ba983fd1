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
