package job

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

type jobOpt func(*batchv1.Job)

func newJob(opts ...jobOpt) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ns", UID: "job-uid"},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](5), Parallelism: ptr.To[int32](2), BackoffLimit: ptr.To[int32](6),
			CompletionMode: ptr.To(batchv1.NonIndexedCompletion), Suspend: ptr.To(false),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "job-uid"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"batch.kubernetes.io/controller-uid": "job-uid"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "c", Image: "hello.wasm"}}},
			},
		},
		Status: batchv1.JobStatus{StartTime: ptr.To(metav1.NewTime(t0.Add(-time.Minute)))},
	}
	for _, o := range opts {
		o(j)
	}
	return j
}

func indexed(completions, parallelism int32) jobOpt {
	return func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.Completions, j.Spec.Parallelism = &completions, &parallelism
	}
}

// pod is a pod of the test Job: phase, whether it still has the tracking finalizer,
// its completion index (-1 none), and how long before t0 it finished.
func pod(name string, phase corev1.PodPhase, finalizer bool, idx int, finishedAgo time.Duration) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"),
			Labels:            map[string]string{"batch.kubernetes.io/controller-uid": "job-uid"},
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "pi", UID: "job-uid",
				Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if finalizer {
		p.Finalizers = []string{TrackingFinalizer}
	}
	if idx >= 0 {
		p.Annotations = map[string]string{CompletionIndexKey: itoa(idx)}
	}
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(t0.Add(-finishedAgo))}}}}
	}
	return p
}

// onFailure makes the Job's pods restart in place, with the given backoffLimit.
func onFailure(limit int32) jobOpt {
	return func(j *batchv1.Job) {
		j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		j.Spec.BackoffLimit = &limit
	}
}

// restarted gives p's container n restarts, as its kubelet reports them.
func restarted(p *corev1.Pod, n int32) *corev1.Pod {
	if len(p.Status.ContainerStatuses) == 0 {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c"}}
	}
	p.Status.ContainerStatuses[0].RestartCount = n
	return p
}

func itoa(i int) string { return string(rune('0' + i)) }

func newController(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset, informers.SharedInformerFactory) {
	t.Helper()
	client := fake.NewClientset(objs...)
	// The fake tracker does not generate names.
	n := 0
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if p := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod); p.Name == "" {
			n++
			p.Name = p.GenerateName + itoa(n)
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: testingclock.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *batchv1.Job:
			_ = factory.Batch().V1().Jobs().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
	}
	return c, client, factory
}

func condOf(st batchv1.JobStatus, t batchv1.JobConditionType) string {
	if c := findCond(st.Conditions, t); c != nil && c.Status == corev1.ConditionTrue {
		return c.Reason
	}
	return ""
}

func TestReconcile(t *testing.T) {
	for _, tc := range []struct {
		name         string
		job          *batchv1.Job
		pods         []*corev1.Pod
		wantCreate   []int
		wantDelete   []string
		wantRelease  []string
		wantActive   int32
		wantOK       int32 // status.succeeded
		wantFailed   int32
		wantUncOK    int
		wantUncFail  int
		wantIndexes  string
		wantConds    map[batchv1.JobConditionType]string // type → reason ("" = absent)
		wantComplete bool
		wantRequeue  bool
	}{
		{name: "new job starts parallelism pods", job: newJob(func(j *batchv1.Job) { j.Status = batchv1.JobStatus{} }),
			wantCreate: []int{-1, -1}, wantActive: 2},
		{name: "succeeded pod becomes uncounted, its finalizer released, one more pod",
			job:         newJob(func(j *batchv1.Job) { j.Status.Succeeded = 3 }),
			pods:        []*corev1.Pod{pod("a", corev1.PodSucceeded, true, -1, 0), pod("b", corev1.PodRunning, true, -1, 0)},
			wantRelease: []string{"a"}, wantActive: 1, wantOK: 3, wantUncOK: 1},
		{name: "released uncounted pod is counted",
			job: newJob(func(j *batchv1.Job) {
				j.Status.Succeeded = 3
				j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"a-uid"}}
			}),
			pods:       []*corev1.Pod{pod("a", corev1.PodSucceeded, false, -1, 0), pod("b", corev1.PodRunning, true, -1, 0)},
			wantActive: 1, wantOK: 4},
		{name: "completions reached: SuccessCriteriaMet then Complete",
			job:  newJob(func(j *batchv1.Job) { j.Status.Succeeded = 5 }),
			pods: []*corev1.Pod{pod("a", corev1.PodSucceeded, false, -1, 0)}, wantOK: 5,
			wantConds:    map[batchv1.JobConditionType]string{batchv1.JobSuccessCriteriaMet: reasonCompletionsReached, batchv1.JobComplete: reasonCompletionsReached},
			wantComplete: true},
		{name: "last success still uncounted: criteria met, not complete",
			job:         newJob(func(j *batchv1.Job) { j.Status.Succeeded = 4 }),
			pods:        []*corev1.Pod{pod("a", corev1.PodSucceeded, true, -1, 0)},
			wantRelease: []string{"a"}, wantOK: 4, wantUncOK: 1,
			wantConds: map[batchv1.JobConditionType]string{batchv1.JobSuccessCriteriaMet: reasonCompletionsReached, batchv1.JobComplete: ""}},
		{name: "backoff limit exceeded: failure target, active pods deleted",
			job:        newJob(func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](1); j.Status.Failed = 1 }),
			pods:       []*corev1.Pod{pod("f", corev1.PodFailed, true, -1, time.Second), pod("r", corev1.PodRunning, true, -1, 0)},
			wantDelete: []string{"r"}, wantRelease: []string{"f"}, wantFailed: 1, wantUncFail: 1,
			wantConds: map[batchv1.JobConditionType]string{batchv1.JobFailureTarget: reasonBackoffLimit, batchv1.JobFailed: ""}},
		{name: "OnFailure: container restarts reaching backoffLimit fail the Job",
			job:        newJob(onFailure(2)),
			pods:       []*corev1.Pod{restarted(pod("r", corev1.PodRunning, true, -1, 0), 1), restarted(pod("s", corev1.PodPending, true, -1, 0), 1)},
			wantDelete: []string{"r", "s"},
			wantConds:  map[batchv1.JobConditionType]string{batchv1.JobFailureTarget: reasonBackoffLimit, batchv1.JobFailed: ""}},
		{name: "OnFailure: restarts below backoffLimit keep the Job running",
			job:        newJob(onFailure(3)),
			pods:       []*corev1.Pod{restarted(pod("r", corev1.PodRunning, true, -1, 0), 1), restarted(pod("s", corev1.PodRunning, true, -1, 0), 1)},
			wantActive: 2},
		{name: "OnFailure with backoffLimit 0: one restart fails the Job",
			job:        newJob(onFailure(0)),
			pods:       []*corev1.Pod{restarted(pod("r", corev1.PodRunning, true, -1, 0), 1)},
			wantDelete: []string{"r"},
			wantConds:  map[batchv1.JobConditionType]string{batchv1.JobFailureTarget: reasonBackoffLimit}},
		{name: "OnFailure: restarts of finished pods are not counted",
			job:         newJob(onFailure(1), func(j *batchv1.Job) { j.Status.Succeeded = 1 }),
			pods:        []*corev1.Pod{restarted(pod("a", corev1.PodSucceeded, true, -1, 0), 3), pod("r", corev1.PodRunning, true, -1, 0)},
			wantRelease: []string{"a"}, wantActive: 2, wantCreate: []int{-1}, wantOK: 1, wantUncOK: 1},
		{name: "Never: restart counts are not the Job's concern",
			job:        newJob(func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](1) }),
			pods:       []*corev1.Pod{restarted(pod("r", corev1.PodRunning, true, -1, 0), 5), pod("s", corev1.PodRunning, true, -1, 0)},
			wantActive: 2},
		{name: "failure target and no pods left: Failed",
			job: newJob(func(j *batchv1.Job) {
				j.Spec.BackoffLimit = ptr.To[int32](1)
				j.Status.Failed = 2
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reasonBackoffLimit}}
			}),
			wantFailed: 2,
			wantConds:  map[batchv1.JobConditionType]string{batchv1.JobFailed: reasonBackoffLimit}},
		{name: "failure within limit waits out the backoff",
			job:        newJob(func(j *batchv1.Job) { j.Status.Failed = 1 }),
			pods:       []*corev1.Pod{pod("f", corev1.PodFailed, false, -1, time.Second), pod("r", corev1.PodRunning, true, -1, 0)},
			wantActive: 1, wantFailed: 1, wantRequeue: true},
		{name: "failure within limit after the backoff: pod recreated",
			job:        newJob(func(j *batchv1.Job) { j.Status.Failed = 1 }),
			pods:       []*corev1.Pod{pod("f", corev1.PodFailed, false, -1, time.Minute), pod("r", corev1.PodRunning, true, -1, 0)},
			wantCreate: []int{-1}, wantActive: 2, wantFailed: 1},
		{name: "active deadline exceeded",
			job:        newJob(func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) }),
			pods:       []*corev1.Pod{pod("r", corev1.PodRunning, true, -1, 0)},
			wantDelete: []string{"r"},
			wantConds:  map[batchv1.JobConditionType]string{batchv1.JobFailureTarget: reasonDeadline}},
		{name: "active deadline ahead: requeued for it",
			job:        newJob(func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](300) }),
			pods:       []*corev1.Pod{pod("r", corev1.PodRunning, true, -1, 0), pod("s", corev1.PodRunning, true, -1, 0)},
			wantActive: 2, wantRequeue: true},
		{name: "suspended: pods deleted, Suspended condition",
			job:        newJob(func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }),
			pods:       []*corev1.Pod{pod("r", corev1.PodRunning, true, -1, 0)},
			wantDelete: []string{"r"},
			wantConds:  map[batchv1.JobConditionType]string{batchv1.JobSuspended: reasonSuspended}},
		{name: "suspended: pods it deleted are released uncounted",
			job: newJob(func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }),
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := pod("r", corev1.PodRunning, true, -1, 0)
				p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
				return p
			}()},
			wantRelease: []string{"r"},
			wantConds:   map[batchv1.JobConditionType]string{batchv1.JobSuspended: reasonSuspended}},
		{name: "deleted pod of a running Job counts as failed",
			job: newJob(),
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := pod("r", corev1.PodRunning, true, -1, 0)
				p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
				return p
			}()},
			wantCreate: []int{-1, -1}, wantRelease: []string{"r"}, wantActive: 2, wantUncFail: 1},
		{name: "indexed: completed index recorded, missing indexes started lowest first",
			job:        newJob(indexed(4, 2)),
			pods:       []*corev1.Pod{pod("i0", corev1.PodSucceeded, true, 0, 0)},
			wantCreate: []int{1, 2}, wantRelease: []string{"i0"}, wantActive: 2, wantOK: 1, wantUncOK: 1, wantIndexes: "0"},
		{name: "indexed: failed index is retried, running index kept",
			job: newJob(indexed(3, 3), func(j *batchv1.Job) {
				j.Status.CompletedIndexes, j.Status.Succeeded, j.Status.Failed = "0", 1, 1
			}),
			pods: []*corev1.Pod{pod("i0", corev1.PodSucceeded, false, 0, 0), pod("i1", corev1.PodFailed, false, 1, time.Minute),
				pod("i2", corev1.PodRunning, true, 2, 0)},
			wantCreate: []int{1}, wantActive: 2, wantOK: 1, wantFailed: 1, wantIndexes: "0"},
		{name: "indexed: duplicate pod of an index deleted",
			job:        newJob(indexed(2, 2)),
			pods:       []*corev1.Pod{pod("a0", corev1.PodRunning, true, 0, 0), pod("b0", corev1.PodRunning, true, 0, 0)},
			wantCreate: []int{1}, wantDelete: []string{"b0"}, wantActive: 2},
		{name: "indexed: all indexes done",
			job:    newJob(indexed(3, 2), func(j *batchv1.Job) { j.Status.CompletedIndexes, j.Status.Succeeded = "0-2", 3 }),
			wantOK: 3, wantIndexes: "0-2",
			wantConds:    map[batchv1.JobConditionType]string{batchv1.JobComplete: reasonCompletionsReached},
			wantComplete: true},
		{name: "work queue job (no completions) ends after a success once others stop",
			job:          newJob(func(j *batchv1.Job) { j.Spec.Completions = nil; j.Status.Succeeded = 1 }),
			pods:         []*corev1.Pod{pod("a", corev1.PodSucceeded, false, -1, 0)},
			wantOK:       1,
			wantConds:    map[batchv1.JobConditionType]string{batchv1.JobComplete: reasonCompletionsReached},
			wantComplete: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := newController(t)
			r := c.reconcile(tc.job, tc.pods)
			if !slices.Equal(r.create, tc.wantCreate) {
				t.Errorf("create = %v, want %v", r.create, tc.wantCreate)
			}
			if got := names(r.delete); !slices.Equal(got, tc.wantDelete) {
				t.Errorf("delete = %v, want %v", got, tc.wantDelete)
			}
			if got := names(r.release); !slices.Equal(got, tc.wantRelease) {
				t.Errorf("release = %v, want %v", got, tc.wantRelease)
			}
			st := r.status
			if st.Active != tc.wantActive || st.Succeeded != tc.wantOK || st.Failed != tc.wantFailed {
				t.Errorf("active/succeeded/failed = %d/%d/%d, want %d/%d/%d", st.Active, st.Succeeded, st.Failed, tc.wantActive, tc.wantOK, tc.wantFailed)
			}
			if u := st.UncountedTerminatedPods; len(u.Succeeded) != tc.wantUncOK || len(u.Failed) != tc.wantUncFail {
				t.Errorf("uncounted = %+v, want %d succeeded %d failed", u, tc.wantUncOK, tc.wantUncFail)
			}
			if st.CompletedIndexes != tc.wantIndexes {
				t.Errorf("completedIndexes = %q, want %q", st.CompletedIndexes, tc.wantIndexes)
			}
			for typ, reason := range tc.wantConds {
				if got := condOf(st, typ); got != reason {
					t.Errorf("condition %s reason = %q, want %q", typ, got, reason)
				}
			}
			if (st.CompletionTime != nil) != tc.wantComplete {
				t.Errorf("completionTime = %v, want set=%v", st.CompletionTime, tc.wantComplete)
			}
			if (r.requeueAfter > 0) != tc.wantRequeue {
				t.Errorf("requeueAfter = %v, want set=%v", r.requeueAfter, tc.wantRequeue)
			}
			if st.StartTime == nil && !ptr.Deref(tc.job.Spec.Suspend, false) {
				t.Error("startTime not set")
			}
		})
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestSyncWritesStatusBeforeReleasing checks the order of the API calls (no finalizer
// goes before the status that records its pod) and the pods an Indexed Job creates.
func TestSyncWritesStatusBeforeReleasing(t *testing.T) {
	job := newJob(indexed(3, 2))
	c, client, factory := newController(t, job, pod("i0", corev1.PodSucceeded, true, 0, 0))
	if _, err := c.sync(context.Background(), "ns/pi"); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	var created []*corev1.Pod
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		verbs = append(verbs, a.GetVerb()+":"+a.GetResource().Resource+"/"+a.GetSubresource())
		if ca, ok := a.(clienttesting.CreateAction); ok && a.GetVerb() == "create" {
			created = append(created, ca.GetObject().(*corev1.Pod))
		}
	}
	// The status first; then, as this sync both creates and releases, the creations and
	// the release at the same time.
	if len(verbs) == 0 || verbs[0] != "update:jobs/status" {
		t.Fatalf("calls = %v, want the status update first", verbs)
	}
	rest := slices.Sorted(slices.Values(verbs[1:]))
	if want := []string{"create:pods/", "create:pods/", "patch:pods/"}; !slices.Equal(rest, want) {
		t.Fatalf("calls after the status = %v, want %v in any order", rest, want)
	}
	for i, p := range created {
		idx := itoa(i + 1)
		if p.Annotations[CompletionIndexKey] != idx || p.Labels[CompletionIndexKey] != idx || p.Spec.Hostname != "pi-"+idx {
			t.Errorf("pod %d: annotations %v labels %v hostname %q", i, p.Annotations, p.Labels, p.Spec.Hostname)
		}
		if !slices.Contains(p.Finalizers, TrackingFinalizer) || p.OwnerReferences[0].UID != job.UID {
			t.Errorf("pod %d: finalizers %v owners %v", i, p.Finalizers, p.OwnerReferences)
		}
		env := p.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != CompletionIndexEnv || env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("pod %d env = %+v", i, env)
		}
	}
	got, err := client.BatchV1().Jobs("ns").Get(context.Background(), "pi", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The pods were not created yet when the status was written: not counted active.
	if got.Status.CompletedIndexes != "0" || len(got.Status.UncountedTerminatedPods.Succeeded) != 1 || got.Status.Active != 0 {
		t.Errorf("status = %+v", got.Status)
	}
	// Once their creation is observed, the next sync counts them and the released pod.
	for _, p := range created {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
		c.expectations.CreationObserved("ns/pi")
	}
	if err := factory.Batch().V1().Jobs().Informer().GetIndexer().Update(got); err != nil {
		t.Fatal(err)
	}
	released, err := client.CoreV1().Pods("ns").Get(context.Background(), "i0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := factory.Core().V1().Pods().Informer().GetIndexer().Update(released); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sync(context.Background(), "ns/pi"); err != nil {
		t.Fatal(err)
	}
	if got, err = client.BatchV1().Jobs("ns").Get(context.Background(), "pi", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got.Status.Active != 2 || got.Status.CompletedIndexes != "0" || len(got.Status.UncountedTerminatedPods.Succeeded) != 0 {
		t.Errorf("status after the next sync = %+v", got.Status)
	}
	p, err := client.CoreV1().Pods("ns").Get(context.Background(), "i0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Finalizers) != 0 {
		t.Errorf("finalizers of the counted pod = %v", p.Finalizers)
	}
}

// TestSyncCreatesBeforeStatus: with nothing to release, the pods are created before the
// status that counts them active, as kube-controller-manager orders it.
func TestSyncCreatesBeforeStatus(t *testing.T) {
	c, client, _ := newController(t, newJob(func(j *batchv1.Job) { j.Status = batchv1.JobStatus{} }))
	if _, err := c.sync(context.Background(), "ns/pi"); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, a := range client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			verbs = append(verbs, a.GetVerb()+":"+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	if want := []string{"create:pods/", "create:pods/", "update:jobs/status"}; !slices.Equal(verbs, want) {
		t.Fatalf("calls = %v, want %v", verbs, want)
	}
	got, err := client.BatchV1().Jobs("ns").Get(context.Background(), "pi", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Active != 2 {
		t.Errorf("active = %d, want 2", got.Status.Active)
	}
}

// TestReleasedPodNotPatchedTwice: a sync that reads a pod from a cache that does not
// show its finalizer removal yet counts the pod and does not patch it again; once the
// cache shows the removal, nothing is expected any more.
func TestReleasedPodNotPatchedTwice(t *testing.T) {
	// 1 counted, a succeeded, r running: nothing to create.
	job := newJob(func(j *batchv1.Job) {
		j.Spec.Completions = ptr.To[int32](3)
		j.Status.Succeeded = 1
		j.Status.Active = 1
	})
	done := pod("a", corev1.PodSucceeded, true, -1, 0)
	c, client, factory := newController(t, job, done, pod("r", corev1.PodRunning, true, -1, 0))
	jobs := factory.Batch().V1().Jobs().Informer().GetIndexer()
	calls := func() []string {
		var out []string
		for _, a := range client.Actions() {
			if a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
				out = append(out, a.GetVerb()+":"+a.GetResource().Resource+"/"+a.GetSubresource())
			}
		}
		client.ClearActions()
		return out
	}
	for _, step := range []struct {
		name      string
		wantCalls []string
		wantOK    int32
		wantUnc   int
	}{
		{"first sync: uncounted, then released", []string{"update:jobs/status", "patch:pods/"}, 1, 1},
		{"cache behind the removal: counted, no second patch", []string{"update:jobs/status"}, 2, 0},
	} {
		if _, err := c.sync(context.Background(), "ns/pi"); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := calls(); !slices.Equal(got, step.wantCalls) {
			t.Errorf("%s: calls = %v, want %v", step.name, got, step.wantCalls)
		}
		got, err := client.BatchV1().Jobs("ns").Get(context.Background(), "pi", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Succeeded != step.wantOK || len(got.Status.UncountedTerminatedPods.Succeeded) != step.wantUnc {
			t.Errorf("%s: succeeded %d, uncounted %v", step.name, got.Status.Succeeded, got.Status.UncountedTerminatedPods.Succeeded)
		}
		// The Job cache follows the status writes; the pod cache stays behind.
		if err := jobs.Update(got); err != nil {
			t.Fatal(err)
		}
	}
	// The pod event showing the removal clears the expectation.
	released := done.DeepCopy()
	released.Finalizers = nil
	c.podEvent(released, false, false)
	if n := len(c.removals.byJob); n != 0 {
		t.Errorf("expected removals left after the pod event: %v", c.removals.byJob)
	}
}

func TestIndexes(t *testing.T) {
	for _, tc := range []struct {
		in          string
		completions int
		want        string
	}{
		{"", 5, ""},
		{"0", 5, "0"},
		{"0,1", 5, "0,1"},
		{"0-1,3", 5, "0,1,3"},
		{"0-2,4", 5, "0-2,4"},
		{"3,1,2,7", 5, "1-3"},
		{"0-9", 3, "0-2"},
		{"x,2", 5, "2"},
	} {
		if got := formatIndexes(parseIndexes(tc.in, tc.completions)); got != tc.want {
			t.Errorf("%q with %d completions = %q, want %q", tc.in, tc.completions, got, tc.want)
		}
	}
}

func TestStaleJob(t *testing.T) {
	c := &Controller{written: map[string]uint64{}}
	job := func(rv string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", ResourceVersion: rv}}
	}
	c.wrote("ns/j", job("10"))
	for _, tc := range []struct {
		rv    string
		stale bool
	}{{"9", true}, {"10", false}, {"11", false}, {"", false}} {
		if got := c.stale("ns/j", job(tc.rv)); got != tc.stale {
			t.Errorf("resourceVersion %q: stale %v, want %v", tc.rv, got, tc.stale)
		}
	}
	c.forgetWritten("ns/j")
	if c.stale("ns/j", job("9")) {
		t.Error("a forgotten Job is still stale")
	}
}

// TestSyncLeavesJobsManagedElsewhere: a Job whose spec.managedBy names another
// controller gets no pods and no status from this one; naming the built-in controller
// is the same as leaving the field unset.
func TestSyncLeavesJobsManagedElsewhere(t *testing.T) {
	for _, tc := range []struct {
		managedBy string
		writes    bool
	}{{"example.com/custom-job-controller", false}, {batchv1.JobControllerName, true}} {
		t.Run(tc.managedBy, func(t *testing.T) {
			job := newJob(indexed(3, 2))
			job.Spec.ManagedBy = ptr.To(tc.managedBy)
			c, client, _ := newController(t, job)
			if _, err := c.sync(context.Background(), "ns/pi"); err != nil {
				t.Fatal(err)
			}
			var writes []string
			for _, a := range client.Actions() {
				if a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
					writes = append(writes, a.GetVerb()+":"+a.GetResource().Resource)
				}
			}
			if got := len(writes) > 0; got != tc.writes {
				t.Errorf("writes %v; want some: %v", writes, tc.writes)
			}
		})
	}
}
