package cronjob

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var day = time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)

func at(h, m int) time.Time {
	return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

func newCronJob(opts ...func(*batchv1.CronJob)) *batchv1.CronJob {
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tick", Namespace: "ns", UID: "cj-uid", CreationTimestamp: metav1.NewTime(at(10, 0))},
		Spec: batchv1.CronJobSpec{
			Schedule: "*/5 * * * *", TimeZone: ptr.To("UTC"), ConcurrencyPolicy: batchv1.AllowConcurrent, Suspend: ptr.To(false),
			SuccessfulJobsHistoryLimit: ptr.To[int32](3), FailedJobsHistoryLimit: ptr.To[int32](1),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "hello.wasm"}}}}}},
		},
	}
	for _, o := range opts {
		o(cj)
	}
	return cj
}

// ownedJob is a Job of the test CronJob; cond is "" (running), Complete or Failed.
func ownedJob(name string, started time.Time, cond batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), CreationTimestamp: metav1.NewTime(started),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "tick", UID: "cj-uid", Controller: ptr.To(true)}}},
		Status: batchv1.JobStatus{StartTime: ptr.To(metav1.NewTime(started))},
	}
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue}}
		if cond == batchv1.JobComplete {
			j.Status.CompletionTime = ptr.To(metav1.NewTime(started.Add(time.Minute)))
		}
	}
	return j
}

func active(jobs ...*batchv1.Job) func(*batchv1.CronJob) {
	return func(cj *batchv1.CronJob) {
		for _, j := range jobs {
			cj.Status.Active = append(cj.Status.Active, jobRef(j))
		}
	}
}

func TestSync(t *testing.T) {
	running := ownedJob("tick-old", at(10, 0), "")
	for _, tc := range []struct {
		name        string
		cj          *batchv1.CronJob
		jobs        []*batchv1.Job
		serverOnly  []*batchv1.Job // on the server, not yet in the cache
		now         time.Time
		wantCreate  string // name of the Job created, "" none
		wantDeleted []string
		wantActive  []string
		wantLast    time.Time
		wantNext    time.Duration // 0 = not checked
		wantEvent   string
	}{
		{name: "due: job named by scheduled minutes", cj: newCronJob(), now: at(10, 7),
			wantCreate: JobName(newCronJob(), at(10, 5)), wantActive: []string{JobName(newCronJob(), at(10, 5))},
			wantLast: at(10, 5), wantNext: 3*time.Minute + nextScheduleDelta, wantEvent: "SuccessfulCreate"},
		{name: "not yet due", cj: newCronJob(), now: at(10, 3), wantNext: 2*time.Minute + nextScheduleDelta},
		{name: "already ran for this time", cj: newCronJob(func(cj *batchv1.CronJob) { cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(at(10, 5))) }),
			now: at(10, 7)},
		{name: "allow runs beside an active job", cj: newCronJob(active(running)), jobs: []*batchv1.Job{running}, now: at(10, 5),
			wantCreate: "tick-" + itoa(at(10, 5)), wantActive: []string{"tick-old", "tick-" + itoa(at(10, 5))}, wantLast: at(10, 5)},
		{name: "forbid skips while active", now: at(10, 5), jobs: []*batchv1.Job{running},
			cj:         newCronJob(active(running), func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent }),
			wantActive: []string{"tick-old"}, wantEvent: "JobAlreadyActive"},
		{name: "replace deletes the active job", now: at(10, 5), jobs: []*batchv1.Job{running},
			cj:         newCronJob(active(running), func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent }),
			wantCreate: "tick-" + itoa(at(10, 5)), wantDeleted: []string{"tick-old"}, wantActive: []string{"tick-" + itoa(at(10, 5))}, wantLast: at(10, 5)},
		{name: "starting deadline passed: the start is skipped", now: at(10, 7),
			cj:       newCronJob(func(cj *batchv1.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr.To[int64](60) }),
			wantNext: 3*time.Minute + nextScheduleDelta},
		{name: "within starting deadline", now: at(10, 7),
			cj:         newCronJob(func(cj *batchv1.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr.To[int64](300) }),
			wantCreate: "tick-" + itoa(at(10, 5)), wantActive: []string{"tick-" + itoa(at(10, 5))}, wantLast: at(10, 5)},
		{name: "suspended", now: at(10, 7), cj: newCronJob(func(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr.To(true) })},
		{name: "finished job leaves active, sets lastSuccessfulTime", now: at(10, 3),
			cj:   newCronJob(active(ownedJob("tick-done", at(10, 0), batchv1.JobComplete))),
			jobs: []*batchv1.Job{ownedJob("tick-done", at(10, 0), batchv1.JobComplete)}, wantEvent: "SawCompletedJob"},
		{name: "missing job leaves active with an event", now: at(10, 3), cj: newCronJob(active(running)), wantEvent: "MissingJob"},
		{name: "job not yet in the cache stays active", now: at(10, 3), cj: newCronJob(active(running)),
			serverOnly: []*batchv1.Job{running}, wantActive: []string{"tick-old"}},
		{name: "history limits prune the oldest finished jobs", now: at(10, 3), cj: newCronJob(),
			jobs: []*batchv1.Job{ownedJob("ok1", at(9, 1), batchv1.JobComplete), ownedJob("ok2", at(9, 2), batchv1.JobComplete),
				ownedJob("ok3", at(9, 3), batchv1.JobComplete), ownedJob("ok4", at(9, 4), batchv1.JobComplete),
				ownedJob("ok5", at(9, 5), batchv1.JobComplete), ownedJob("bad1", at(9, 1), batchv1.JobFailed),
				ownedJob("bad2", at(9, 2), batchv1.JobFailed)},
			wantDeleted: []string{"ok1", "ok2", "bad1"}},
		{name: "too many missed starts: warn, run the latest", now: at(10, 0).Add(30 * 24 * time.Hour),
			cj:         newCronJob(func(cj *batchv1.CronJob) { cj.Spec.Schedule = "* * * * *" }),
			wantCreate: "tick-" + itoa(at(10, 0).Add(30*24*time.Hour)), wantActive: []string{"tick-" + itoa(at(10, 0).Add(30*24*time.Hour))},
			wantLast: at(10, 0).Add(30 * 24 * time.Hour), wantEvent: "TooManyMissedTimes"},
		{name: "time zone: 09:00 in Tokyo is 00:00 UTC", now: at(24, 30),
			cj: newCronJob(func(cj *batchv1.CronJob) {
				cj.Spec.Schedule, cj.Spec.TimeZone = "0 9 * * *", ptr.To("Asia/Tokyo")
			}),
			wantCreate: "tick-" + itoa(at(24, 0)), wantActive: []string{"tick-" + itoa(at(24, 0))}, wantLast: at(24, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{tc.cj}
			for _, j := range append(tc.jobs, tc.serverOnly...) {
				objs = append(objs, j)
			}
			client := fake.NewClientset(objs...)
			factory := informers.NewSharedInformerFactory(client, 0)
			rec := record.NewFakeRecorder(100)
			c, err := New(client, factory, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Recorder: rec, Clock: testingclock.NewFakePassiveClock(tc.now)})
			if err != nil {
				t.Fatal(err)
			}
			_ = factory.Batch().V1().CronJobs().Informer().GetIndexer().Add(tc.cj)
			for _, j := range tc.jobs {
				_ = factory.Batch().V1().Jobs().Informer().GetIndexer().Add(j)
			}
			next, err := c.sync(context.Background(), "ns/tick")
			if err != nil {
				t.Fatal(err)
			}
			var created string
			var deleted []string
			for _, a := range client.Actions() {
				switch {
				case a.GetVerb() == "create" && a.GetResource().Resource == "jobs":
					j := a.(interface{ GetObject() runtime.Object }).GetObject().(*batchv1.Job)
					created = j.Name
					if j.Annotations[ScheduledTimestampAnnotation] == "" || j.OwnerReferences[0].UID != "cj-uid" {
						t.Errorf("created job meta = %+v", j.ObjectMeta)
					}
				case a.GetVerb() == "delete" && a.GetResource().Resource == "jobs":
					deleted = append(deleted, a.(interface{ GetName() string }).GetName())
				}
			}
			if created != tc.wantCreate {
				t.Errorf("created %q, want %q", created, tc.wantCreate)
			}
			if !slices.Equal(deleted, tc.wantDeleted) {
				t.Errorf("deleted %v, want %v", deleted, tc.wantDeleted)
			}
			got, err := client.BatchV1().CronJobs("ns").Get(context.Background(), "tick", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var act []string
			for _, r := range got.Status.Active {
				act = append(act, r.Name)
			}
			if !slices.Equal(act, tc.wantActive) {
				t.Errorf("active = %v, want %v", act, tc.wantActive)
			}
			if !tc.wantLast.IsZero() && (got.Status.LastScheduleTime == nil || !got.Status.LastScheduleTime.Time.Equal(tc.wantLast)) {
				t.Errorf("lastScheduleTime = %v, want %v", got.Status.LastScheduleTime, tc.wantLast)
			}
			if tc.name == "finished job leaves active, sets lastSuccessfulTime" && got.Status.LastSuccessfulTime == nil {
				t.Error("lastSuccessfulTime not set")
			}
			if tc.wantNext != 0 && next != tc.wantNext {
				t.Errorf("next sync in %v, want %v", next, tc.wantNext)
			}
			close(rec.Events)
			var events []string
			for e := range rec.Events {
				events = append(events, e)
			}
			if tc.wantEvent != "" && !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, " "+tc.wantEvent+" ") }) {
				t.Errorf("events %v lack %s", events, tc.wantEvent)
			}
		})
	}
}

func itoa(t time.Time) string { return strings.TrimPrefix(JobName(&batchv1.CronJob{}, t), "-") }

func TestMostRecentSchedule(t *testing.T) {
	for _, tc := range []struct {
		schedule   string
		created    time.Time
		now        time.Time
		wantLast   time.Time // zero = none
		wantMissed int
	}{
		{"*/5 * * * *", at(10, 0), at(10, 4), time.Time{}, 0},
		{"*/5 * * * *", at(10, 0), at(10, 5), at(10, 5), 1},
		{"*/5 * * * *", at(10, 0), at(10, 31), at(10, 30), 6},
		{"0 9 * * 1-5", at(0, 0), at(24*3, 0), at(24*2+9, 0), 1}, // Saturday to Tuesday 00:00: Monday only
		{"* * * * *", at(0, 0), at(24*10, 0), at(24*10, 0), 24 * 60 * 10},
	} {
		cj := newCronJob(func(cj *batchv1.CronJob) {
			cj.Spec.Schedule, cj.CreationTimestamp = tc.schedule, metav1.NewTime(tc.created)
		})
		s, err := Schedule(cj)
		if err != nil {
			t.Fatal(err)
		}
		last, missed := mostRecentSchedule(cj, s, tc.now)
		if (last == nil) != tc.wantLast.IsZero() || (last != nil && !last.Equal(tc.wantLast)) {
			t.Errorf("%s from %v to %v: last = %v, want %v", tc.schedule, tc.created, tc.now, last, tc.wantLast)
		}
		if tc.wantMissed <= maxMissedStarts && missed != tc.wantMissed || tc.wantMissed > maxMissedStarts && missed <= maxMissedStarts {
			t.Errorf("%s: missed = %d, want %d", tc.schedule, missed, tc.wantMissed)
		}
	}
}
