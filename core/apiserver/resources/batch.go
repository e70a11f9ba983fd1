package resources

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// The labels kube-apiserver puts on a Job's generated selector and pod template.
const (
	jobControllerUIDLabel       = "batch.kubernetes.io/controller-uid"
	jobNameLabel                = "batch.kubernetes.io/job-name"
	legacyJobControllerUIDLabel = "controller-uid"
	legacyJobNameLabel          = "job-name"
)

// maxCronJobNameLength leaves room for the 11-character suffix the CronJob controller
// appends when it names a Job, as Kubernetes' validation does.
const maxCronJobNameLength = 52

// Batch returns the batch/v1 resources.
func Batch() []Definition {
	gv := batchv1.SchemeGroupVersion
	return []Definition{
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "jobs", SingularName: "job", Kind: "Job", ListKind: "JobList",
			Categories: []string{"all"}, Namespaced: true, TracksGeneration: true,
			NewFunc:     func() runtime.Object { return &batchv1.Job{} },
			NewListFunc: func() runtime.Object { return &batchv1.JobList{} },
			Strategy: &strategy{
				defaults: func(obj runtime.Object) { defaultJobSpec(&obj.(*batchv1.Job).Spec) },
				prepareCreate: func(obj runtime.Object) {
					j := obj.(*batchv1.Job)
					j.Status = batchv1.JobStatus{}
					generateJobSelector(j)
				},
				prepareUpdate: func(obj, old runtime.Object) { obj.(*batchv1.Job).Status = old.(*batchv1.Job).Status },
				validate: func(obj runtime.Object) field.ErrorList {
					return validateJobSpec(&obj.(*batchv1.Job).Spec, field.NewPath("spec"), true)
				},
				validateOnUpdate: true,
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateJobSpecUpdate(&obj.(*batchv1.Job).Spec, &old.(*batchv1.Job).Spec, field.NewPath("spec"))
				},
			},
			StatusStrategy: statusOnly(),
			Printer:        jobPrinter(),
		}, Subresources: func(s *endpoints.Scope) []endpoints.Subresource {
			return []endpoints.Subresource{endpoints.StatusSubresource(s, statusOnly())}
		}},
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "cronjobs", SingularName: "cronjob", Kind: "CronJob", ListKind: "CronJobList",
			ShortNames: []string{"cj"}, Categories: []string{"all"}, Namespaced: true, TracksGeneration: true,
			NewFunc:     func() runtime.Object { return &batchv1.CronJob{} },
			NewListFunc: func() runtime.Object { return &batchv1.CronJobList{} },
			Strategy: &strategy{
				defaults:      func(obj runtime.Object) { defaultCronJob(obj.(*batchv1.CronJob)) },
				prepareCreate: func(obj runtime.Object) { obj.(*batchv1.CronJob).Status = batchv1.CronJobStatus{} },
				prepareUpdate: func(obj, old runtime.Object) { obj.(*batchv1.CronJob).Status = old.(*batchv1.CronJob).Status },
				validate: func(obj runtime.Object) field.ErrorList {
					return validateCronJob(obj.(*batchv1.CronJob))
				},
				validateOnUpdate: true,
			},
			StatusStrategy: statusOnly(),
			Printer:        cronJobPrinter(),
		}, Subresources: func(s *endpoints.Scope) []endpoints.Subresource {
			return []endpoints.Subresource{endpoints.StatusSubresource(s, statusOnly())}
		}},
	}
}

// defaultJobSpec applies Kubernetes' batch/v1 Job defaults.
func defaultJobSpec(spec *batchv1.JobSpec) {
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = ptr.To[int32](1)
	}
	if spec.Parallelism == nil {
		spec.Parallelism = ptr.To[int32](1)
	}
	if spec.BackoffLimit == nil {
		if spec.BackoffLimitPerIndex != nil {
			spec.BackoffLimit = ptr.To[int32](1<<31 - 1)
		} else {
			spec.BackoffLimit = ptr.To[int32](6)
		}
	}
	if spec.CompletionMode == nil {
		spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if spec.Suspend == nil {
		spec.Suspend = ptr.To(false)
	}
	if spec.PodReplacementPolicy == nil {
		if spec.PodFailurePolicy != nil {
			spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		} else {
			spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
		}
	}
	defaultJobPolicies(spec)
	defaultPodSpec(&spec.Template.Spec)
}

// generateJobSelector gives a Job without a manual selector the selector and template
// labels kube-apiserver generates from its UID; the Job's own labels default to its
// template's, as in Kubernetes.
func generateJobSelector(j *batchv1.Job) {
	if !ptr.Deref(j.Spec.ManualSelector, false) {
		uid := string(j.UID)
		if j.Spec.Template.Labels == nil {
			j.Spec.Template.Labels = map[string]string{}
		}
		for k, v := range map[string]string{jobControllerUIDLabel: uid, legacyJobControllerUIDLabel: uid, jobNameLabel: j.Name, legacyJobNameLabel: j.Name} {
			if _, ok := j.Spec.Template.Labels[k]; !ok {
				j.Spec.Template.Labels[k] = v
			}
		}
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{jobControllerUIDLabel: uid}}
	}
	if len(j.Labels) == 0 {
		j.Labels = make(map[string]string, len(j.Spec.Template.Labels))
		for k, v := range j.Spec.Template.Labels {
			j.Labels[k] = v
		}
	}
}

// validateJobSpec checks a Job's spec; withSelector is false for a CronJob's job
// template, whose selector the controller fills in.
func validateJobSpec(spec *batchv1.JobSpec, path *field.Path, withSelector bool) field.ErrorList {
	var errs field.ErrorList
	nonNegative := func(v *int32, name string) {
		if v != nil && *v < 0 {
			errs = append(errs, field.Invalid(path.Child(name), *v, "must be greater than or equal to 0"))
		}
	}
	nonNegative(spec.Parallelism, "parallelism")
	nonNegative(spec.Completions, "completions")
	nonNegative(spec.BackoffLimit, "backoffLimit")
	nonNegative(spec.TTLSecondsAfterFinished, "ttlSecondsAfterFinished")
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *spec.ActiveDeadlineSeconds, "must be greater than 0"))
	}
	if m := spec.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
		errs = append(errs, field.NotSupported(path.Child("completionMode"), *m, []string{string(batchv1.NonIndexedCompletion), string(batchv1.IndexedCompletion)}))
	}
	if ptr.Deref(spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion && spec.Completions == nil {
		errs = append(errs, field.Required(path.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
	}
	if p := spec.PodReplacementPolicy; p != nil && *p != batchv1.TerminatingOrFailed && *p != batchv1.Failed {
		errs = append(errs, field.NotSupported(path.Child("podReplacementPolicy"), *p, []string{string(batchv1.TerminatingOrFailed), string(batchv1.Failed)}))
	}
	errs = append(errs, validateJobPolicies(spec, path)...)
	if withSelector {
		errs = append(errs, validateSelectorMatches(spec.Selector, spec.Template.Labels, path)...)
	}
	errs = append(errs, validateTemplatePodSpec(&spec.Template.Spec, path.Child("template", "spec"))...)
	if rp := spec.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyNever && rp != corev1.RestartPolicyOnFailure {
		errs = append(errs, field.NotSupported(path.Child("template", "spec", "restartPolicy"), rp,
			[]string{string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	return errs
}

// validateJobSpecUpdate enforces what may not change once a Job exists. Kubernetes lets a
// suspended Job that never started change its template's scheduling directives; here the
// template is immutable outright.
func validateJobSpecUpdate(spec, old *batchv1.JobSpec, path *field.Path) field.ErrorList {
	errs := apimachineryvalidation.ValidateImmutableField(spec.Selector, old.Selector, path.Child("selector"))
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(spec.CompletionMode, old.CompletionMode, path.Child("completionMode"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(spec.PodFailurePolicy, old.PodFailurePolicy, path.Child("podFailurePolicy"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(spec.BackoffLimitPerIndex, old.BackoffLimitPerIndex, path.Child("backoffLimitPerIndex"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(spec.SuccessPolicy, old.SuccessPolicy, path.Child("successPolicy"))...)
	if !apiequality.Semantic.DeepEqual(spec.Template, old.Template) {
		errs = append(errs, field.Invalid(path.Child("template"), "", "field is immutable"))
	}
	if !apiequality.Semantic.DeepEqual(spec.Completions, old.Completions) {
		// Indexed Jobs are elastic: completions may follow parallelism.
		elastic := ptr.Deref(spec.CompletionMode, "") == batchv1.IndexedCompletion && spec.Completions != nil &&
			spec.Parallelism != nil && *spec.Completions == *spec.Parallelism
		if !elastic {
			errs = append(errs, field.Invalid(path.Child("completions"), spec.Completions, "field is immutable"))
		}
	}
	return errs
}

// defaultCronJob applies Kubernetes' batch/v1 CronJob defaults.
func defaultCronJob(cj *batchv1.CronJob) {
	if cj.Spec.ConcurrencyPolicy == "" {
		cj.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if cj.Spec.Suspend == nil {
		cj.Spec.Suspend = ptr.To(false)
	}
	if cj.Spec.SuccessfulJobsHistoryLimit == nil {
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	}
	if cj.Spec.FailedJobsHistoryLimit == nil {
		cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](1)
	}
	defaultPodSpec(&cj.Spec.JobTemplate.Spec.Template.Spec)
}

func validateCronJob(cj *batchv1.CronJob) field.ErrorList {
	var errs field.ErrorList
	if len(cj.Name) > maxCronJobNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), cj.Name, fmt.Sprintf("must be no more than %d characters", maxCronJobNameLength)))
	}
	spec := field.NewPath("spec")
	errs = append(errs, validateCronSchedule(cj.Spec.Schedule, cj.Spec.TimeZone, spec)...)
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	default:
		errs = append(errs, field.NotSupported(spec.Child("concurrencyPolicy"), cj.Spec.ConcurrencyPolicy,
			[]string{string(batchv1.AllowConcurrent), string(batchv1.ForbidConcurrent), string(batchv1.ReplaceConcurrent)}))
	}
	for name, v := range map[string]*int64{"startingDeadlineSeconds": cj.Spec.StartingDeadlineSeconds} {
		if v != nil && *v < 0 {
			errs = append(errs, field.Invalid(spec.Child(name), *v, "must be greater than or equal to 0"))
		}
	}
	for name, v := range map[string]*int32{"successfulJobsHistoryLimit": cj.Spec.SuccessfulJobsHistoryLimit, "failedJobsHistoryLimit": cj.Spec.FailedJobsHistoryLimit} {
		if v != nil && *v < 0 {
			errs = append(errs, field.Invalid(spec.Child(name), *v, "must be greater than or equal to 0"))
		}
	}
	errs = append(errs, validateJobSpec(&cj.Spec.JobTemplate.Spec, spec.Child("jobTemplate", "spec"), false)...)
	return errs
}

// validateCronSchedule checks a schedule the way the CronJob controller will parse it,
// and that the time zone is one the server knows.
func validateCronSchedule(schedule string, tz *string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if schedule == "" {
		errs = append(errs, field.Required(path.Child("schedule"), ""))
	} else if _, err := cron.ParseStandard(schedule); err != nil {
		errs = append(errs, field.Invalid(path.Child("schedule"), schedule, err.Error()))
	} else if tz != nil && (strings.Contains(schedule, "TZ=") || strings.Contains(schedule, "CRON_TZ=")) {
		errs = append(errs, field.Invalid(path.Child("schedule"), schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
	}
	if tz != nil {
		if *tz == "" || strings.EqualFold(*tz, "local") {
			errs = append(errs, field.Invalid(path.Child("timeZone"), *tz, "unknown time zone "+*tz))
		} else if _, err := time.LoadLocation(*tz); err != nil {
			errs = append(errs, field.Invalid(path.Child("timeZone"), *tz, err.Error()))
		}
	}
	return errs
}

func hasJobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobStatusWord is the Status column of `kubectl get jobs`, in kubectl's precedence.
func jobStatusWord(j *batchv1.Job) string {
	switch {
	case hasJobCondition(j, batchv1.JobComplete):
		return "Complete"
	case hasJobCondition(j, batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case hasJobCondition(j, batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	case hasJobCondition(j, batchv1.JobSuspended):
		return "Suspended"
	case hasJobCondition(j, batchv1.JobFailureTarget):
		return "FailureTarget"
	}
	return "Running"
}

func jobCompletions(j *batchv1.Job) string {
	if j.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	}
	if p := ptr.Deref(j.Spec.Parallelism, 0); p > 1 {
		return fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, p)
	}
	return fmt.Sprintf("%d/1", j.Status.Succeeded)
}

func jobDuration(j *batchv1.Job, now time.Time) string {
	switch {
	case j.Status.StartTime == nil:
		return ""
	case j.Status.CompletionTime == nil:
		return duration.HumanDuration(now.Sub(j.Status.StartTime.Time))
	}
	return duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
}

func jobPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: append([]registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Status", Type: "string", Description: "Status of the job."},
			{Name: "Completions", Type: "string", Description: "The completion status of the job."},
			{Name: "Duration", Type: "string", Description: "Time required to complete the job."},
			endpoints.AgeColumn,
		}, wideWorkloadColumns...),
		Row: func(obj runtime.Object) []any {
			j := obj.(*batchv1.Job)
			now := time.Now()
			c, i := containersAndImages(&j.Spec.Template.Spec)
			return []any{j.Name, jobStatusWord(j), jobCompletions(j), jobDuration(j, now), endpoints.Age(j.CreationTimestamp, now), c, i, selectorString(j.Spec.Selector)}
		},
	}
}

func cronJobPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: append([]registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Schedule", Type: "string", Description: batchv1.CronJobSpec{}.SwaggerDoc()["schedule"]},
			{Name: "Timezone", Type: "string", Description: batchv1.CronJobSpec{}.SwaggerDoc()["timeZone"]},
			{Name: "Suspend", Type: "boolean", Description: batchv1.CronJobSpec{}.SwaggerDoc()["suspend"]},
			{Name: "Active", Type: "integer", Description: batchv1.CronJobStatus{}.SwaggerDoc()["active"]},
			{Name: "Last Schedule", Type: "string", Description: batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]},
			endpoints.AgeColumn,
		}, wideWorkloadColumns...),
		Row: func(obj runtime.Object) []any {
			cj := obj.(*batchv1.CronJob)
			now := time.Now()
			last := "<none>"
			if cj.Status.LastScheduleTime != nil {
				last = endpoints.Age(*cj.Status.LastScheduleTime, now)
			}
			c, i := containersAndImages(&cj.Spec.JobTemplate.Spec.Template.Spec)
			// kubectl shows Suspend as "True"/"False": Kubernetes' printer sends a string.
			suspend := "False"
			if ptr.Deref(cj.Spec.Suspend, false) {
				suspend = "True"
			}
			return []any{cj.Name, cj.Spec.Schedule, ptr.Deref(cj.Spec.TimeZone, "<none>"), suspend,
				int64(len(cj.Status.Active)), last, endpoints.Age(cj.CreationTimestamp, now), c, i, selectorString(cj.Spec.JobTemplate.Spec.Selector)}
		},
	}
}
