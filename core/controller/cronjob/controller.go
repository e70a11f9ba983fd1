// Package cronjob is the batch/v1 CronJob controller: it creates a Job at each scheduled
// time (in the CronJob's time zone), honours the concurrency policy, the starting
// deadline and suspension, keeps status.active, lastScheduleTime and lastSuccessfulTime,
// and prunes finished Jobs past the history limits. It talks to the API only through
// client-go, and tells time by an injectable clock.
package cronjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/wasmplane/wasmplane/core/controller/internal/controllerref"
	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// ScheduledTimestampAnnotation records on each Job the scheduled time it was created for.
const ScheduledTimestampAnnotation = "batch.kubernetes.io/cronjob-scheduled-timestamp"

// maxMissedStarts is how many missed start times make the controller warn, as
// kube-controller-manager's.
const maxMissedStarts = 100

// nextScheduleDelta pads the requeue for the next start so it lands after it.
const nextScheduleDelta = 100 * time.Millisecond

var controllerKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// Options tunes a Controller.
type Options struct {
	// Logger receives logs (nil = discarded).
	Logger *slog.Logger
	// Recorder receives events (SuccessfulCreate, SawCompletedJob, MissSchedule…); nil = none.
	Recorder record.EventRecorder
	// Clock is the time schedules are evaluated against (default the real clock).
	Clock clock.PassiveClock
}

// Controller reconciles CronJobs.
type Controller struct {
	client    kubernetes.Interface
	cjLister  batchlisters.CronJobLister
	jobLister batchlisters.JobLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	log       *slog.Logger
	recorder  record.EventRecorder
	clock     clock.PassiveClock
}

// New returns a CronJob controller fed by factory's CronJob and Job informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	cjInf, jobInf := factory.Batch().V1().CronJobs(), factory.Batch().V1().Jobs()
	c := &Controller{
		client: client, cjLister: cjInf.Lister(), jobLister: jobInf.Lister(),
		synced: []cache.InformerSynced{cjInf.Informer().HasSynced, jobInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "cronjob"}),
		log: opts.Logger.With("controller", "cronjob"), recorder: opts.Recorder, clock: opts.Clock,
	}
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if cj, ok := obj.(*batchv1.CronJob); ok {
			c.queue.Add(cj.Namespace + "/" + cj.Name)
		}
	}
	if _, err := cjInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) }, DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("adding CronJob handler: %w", err)
	}
	jobEvent := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOfNoCopy(j); ref != nil && ref.Kind == controllerKind.Kind && ref.APIVersion == controllerKind.GroupVersion().String() {
			c.queue.Add(j.Namespace + "/" + ref.Name)
		}
	}
	if _, err := jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: jobEvent, UpdateFunc: func(_, cur any) { jobEvent(cur) }, DeleteFunc: jobEvent,
	}); err != nil {
		return nil, fmt.Errorf("adding Job handler: %w", err)
	}
	return c, nil
}

// Run syncs CronJobs with workers goroutines until ctx ends, then waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.RunRequeueing(ctx, c.queue, workers, c.synced, c.sync, c.log, "cronjob")
}

// Schedule parses a CronJob's schedule in its time zone (the server's local zone when
// none is given, as Kubernetes).
func Schedule(cj *batchv1.CronJob) (cron.Schedule, error) {
	spec := cj.Spec.Schedule
	if cj.Spec.TimeZone != nil {
		if _, err := time.LoadLocation(*cj.Spec.TimeZone); err != nil {
			return nil, fmt.Errorf("unknown time zone %q: %w", *cj.Spec.TimeZone, err)
		}
		spec = "CRON_TZ=" + *cj.Spec.TimeZone + " " + spec
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("unparseable schedule %q: %w", cj.Spec.Schedule, err)
	}
	return s, nil
}

// mostRecentSchedule returns the latest start time in (earliest, now] and how many
// start times fell in that window; nil when none did. Past maxMissedStarts the count is
// estimated from the first interval rather than walked, as Kubernetes does.
func mostRecentSchedule(cj *batchv1.CronJob, sched cron.Schedule, now time.Time) (*time.Time, int) {
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if sds := cj.Spec.StartingDeadlineSeconds; sds != nil {
		if deadline := now.Add(-time.Duration(*sds) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	var last *time.Time
	missed := 0
	for t := sched.Next(earliest); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		last = &t
		if missed++; missed <= maxMissedStarts {
			continue
		}
		first := sched.Next(earliest)
		interval := sched.Next(first).Sub(first)
		missed = int(now.Sub(first)/interval) + 1
		// Find the latest start by walking ever longer stretches back from now.
		for back := interval; ; back *= 2 {
			from := now.Add(-back)
			if !from.After(t) {
				from = t
			}
			for u := sched.Next(from); !u.IsZero() && !u.After(now); u = sched.Next(u) {
				last = &u
			}
			if last.After(t) || from.Equal(t) {
				return last, missed
			}
		}
	}
	return last, missed
}

// JobName is the name of the Job a CronJob starts for scheduled: the CronJob's name and
// the scheduled time in minutes since the epoch, as Kubernetes names it.
func JobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

func jobFinished(j *batchv1.Job) (bool, batchv1.JobConditionType) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

// sync reconciles one CronJob and returns when it wants to look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil //nolint:nilerr // a malformed key can never succeed
	}
	cached, err := c.cjLister.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading CronJob %s: %w", key, err)
	}
	cj := cached.DeepCopy()
	all, err := c.jobLister.Jobs(ns).List(labels.Everything())
	if err != nil {
		return 0, fmt.Errorf("listing Jobs: %w", err)
	}
	var jobs []*batchv1.Job
	for _, j := range all {
		if ref := metav1.GetControllerOfNoCopy(j); ref != nil && ref.UID == cj.UID {
			jobs = append(jobs, j)
		}
	}
	after, syncErr := c.syncCronJob(ctx, cj, jobs)
	if !apiequality.Semantic.DeepEqual(cached.Status, cj.Status) {
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil {
			return 0, errors.Join(syncErr, fmt.Errorf("updating status of CronJob %s: %w", key, err))
		}
	}
	if err := c.cleanupFinished(ctx, cj, jobs); err != nil {
		syncErr = errors.Join(syncErr, err)
	}
	return after, syncErr
}

// syncCronJob updates cj's status in place from its Jobs, starts the Job due now if
// any, and returns the delay to the next start time.
func (c *Controller) syncCronJob(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) (time.Duration, error) {
	now := c.clock.Now()
	byUID := map[string]*batchv1.Job{}
	for _, j := range jobs {
		byUID[string(j.UID)] = j
		if done, typ := jobFinished(j); done {
			if typ == batchv1.JobComplete && j.Status.CompletionTime != nil &&
				(cj.Status.LastSuccessfulTime == nil || j.Status.CompletionTime.After(cj.Status.LastSuccessfulTime.Time)) {
				cj.Status.LastSuccessfulTime = j.Status.CompletionTime.DeepCopy()
			}
			continue
		}
		if !slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == j.UID }) {
			cj.Status.Active = append(cj.Status.Active, jobRef(j))
		}
	}
	// Drop finished or vanished Jobs from the active list.
	cj.Status.Active = slices.DeleteFunc(cj.Status.Active, func(r corev1.ObjectReference) bool {
		j := byUID[string(r.UID)]
		if j == nil {
			// The cache may not hold a Job created a moment ago: ask the server, as
			// kube-controller-manager does, before calling it missing.
			live, err := c.client.BatchV1().Jobs(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err) || err == nil && live.UID != r.UID:
				c.recorder.Eventf(cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", r.Name)
				return true
			case err != nil:
				return false // unknown: kept until a later sync can tell
			}
			j = live
		}
		if done, typ := jobFinished(j); done {
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, typ)
			return true
		}
		return false
	})
	if len(cj.Status.Active) == 0 {
		cj.Status.Active = nil
	}
	if cj.DeletionTimestamp != nil {
		return 0, nil
	}
	sched, err := Schedule(cj)
	if err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return 0, nil // nothing to retry until the spec changes
	}
	next := func() time.Duration { return sched.Next(now).Sub(now) + nextScheduleDelta }
	if ptr.Deref(cj.Spec.Suspend, false) {
		return 0, nil
	}
	scheduled, missed := mostRecentSchedule(cj, sched, now)
	if missed > maxMissedStarts {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "TooManyMissedTimes",
			"too many missed start times: %d. Set or decrease .spec.startingDeadlineSeconds or check clock skew", missed)
		c.log.Warn("too many missed start times", "cronjob", cj.Namespace+"/"+cj.Name, "missed", missed)
	}
	if scheduled == nil {
		return next(), nil
	}
	if sds := cj.Spec.StartingDeadlineSeconds; sds != nil && scheduled.Add(time.Duration(*sds)*time.Second).Before(now) {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return next(), nil
	}
	name := JobName(cj, *scheduled)
	if slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.Name == name }) {
		return next(), nil
	}
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.ForbidConcurrent:
		if len(cj.Status.Active) > 0 {
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
			return next(), nil
		}
	case batchv1.ReplaceConcurrent:
		for _, r := range cj.Status.Active {
			err := c.client.BatchV1().Jobs(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{
				PropagationPolicy: ptr.To(metav1.DeletePropagationBackground), Preconditions: &metav1.Preconditions{UID: &r.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
				return 0, fmt.Errorf("replacing Job %s: %w", r.Name, err)
			}
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", r.Name)
		}
		cj.Status.Active = nil
	}
	job, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, jobFromTemplate(cj, name, *scheduled), metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		// Created by an earlier sync whose status write was lost: adopt it if it is ours.
		existing, gerr := c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			return 0, fmt.Errorf("reading existing Job %s: %w", name, gerr)
		}
		if ref := metav1.GetControllerOfNoCopy(existing); ref == nil || ref.UID != cj.UID {
			return next(), nil
		}
		job = existing
	case err != nil:
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return 0, fmt.Errorf("creating Job %s: %w", name, err)
	default:
		c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", job.Name)
	}
	if done, _ := jobFinished(job); !done {
		cj.Status.Active = append(cj.Status.Active, jobRef(job))
	}
	cj.Status.LastScheduleTime = &metav1.Time{Time: *scheduled}
	return next(), nil
}

func jobRef(j *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Job", Namespace: j.Namespace, Name: j.Name, UID: j.UID,
		APIVersion: batchv1.SchemeGroupVersion.String(), ResourceVersion: j.ResourceVersion}
}

// jobFromTemplate builds the Job cj starts for scheduled.
func jobFromTemplate(cj *batchv1.CronJob, name string, scheduled time.Time) *batchv1.Job {
	t := cj.Spec.JobTemplate.DeepCopy()
	annotations := t.Annotations
	if annotations == nil {
		annotations = map[string]string{}
	}
	loc := time.Local
	if cj.Spec.TimeZone != nil {
		if l, err := time.LoadLocation(*cj.Spec.TimeZone); err == nil {
			loc = l
		}
	}
	annotations[ScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: cj.Namespace, Labels: t.Labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*controllerref.NewControllerRef(cj, controllerKind)},
		},
		Spec: t.Spec,
	}
}

// cleanupFinished deletes the oldest finished Jobs beyond the history limits.
func (c *Controller) cleanupFinished(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) error {
	if cj.Spec.SuccessfulJobsHistoryLimit == nil && cj.Spec.FailedJobsHistoryLimit == nil {
		return nil
	}
	var ok, failed []*batchv1.Job
	for _, j := range jobs {
		if j.DeletionTimestamp != nil {
			continue
		}
		switch done, typ := jobFinished(j); {
		case done && typ == batchv1.JobComplete:
			ok = append(ok, j)
		case done:
			failed = append(failed, j)
		}
	}
	var errs []error
	for _, g := range []struct {
		jobs  []*batchv1.Job
		limit *int32
	}{{ok, cj.Spec.SuccessfulJobsHistoryLimit}, {failed, cj.Spec.FailedJobsHistoryLimit}} {
		if g.limit == nil || len(g.jobs) <= int(*g.limit) {
			continue
		}
		slices.SortStableFunc(g.jobs, olderFirst)
		for _, j := range g.jobs[:len(g.jobs)-int(*g.limit)] {
			err := c.client.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{
				PropagationPolicy: ptr.To(metav1.DeletePropagationBackground), Preconditions: &metav1.Preconditions{UID: &j.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting old Job %s: %w", j.Name, err))
				continue
			}
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", j.Name)
		}
	}
	return errors.Join(errs...)
}

// olderFirst orders Jobs by start time; a Job that never started sorts last, then by name.
func olderFirst(a, b *batchv1.Job) int {
	switch {
	case a.Status.StartTime == nil && b.Status.StartTime == nil:
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	case a.Status.StartTime == nil:
		return 1
	case b.Status.StartTime == nil:
		return -1
	}
	if n := a.Status.StartTime.Compare(b.Status.StartTime.Time); n != 0 {
		return n
	}
	return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
}
