// The Job tests run batch/v1 Jobs and CronJobs end to end: the real server with its
// controllers and scheduler, a kubelet on the built-in WASI runtime running the example
// workloads, and the real kubectl creating and reading the objects. CronJob scheduling
// itself (times, concurrency, history) is covered by the controller's unit tests on a
// fake clock; here a CronJob is created, shown and run by hand with --from.

package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/job"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

type jobsEnv struct {
	s  *testserver.Server
	cs kubernetes.Interface
}

// setup starts the whole control plane and one WASI node with the example workloads.
func jobsSetup(t *testing.T) *jobsEnv {
	t.Helper()
	s := testserver.Start(t)
	testserver.StartWASINode(t, s, modules, "hello", "toolbox")
	return &jobsEnv{s: s, cs: s.Clientset(t, false)}
}

// kubectl runs the real kubectl with stdin and returns stdout, stderr and the error.
func (e *jobsEnv) kubectl(t *testing.T, stdin string, args ...string) (string, string, error) {
	return e.s.Kubectl(t, kubectlBin, "default", stdin, args...)
}

func (e *jobsEnv) mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return e.s.MustKubectl(t, kubectlBin, "default", stdin, args...)
}

// waitJob waits until the Job has a true condition of type cond.
func (e *jobsEnv) waitJob(t *testing.T, name string, cond batchv1.JobConditionType, timeout time.Duration) *batchv1.Job {
	t.Helper()
	var j *batchv1.Job
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if j, err = e.cs.BatchV1().Jobs("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, nil //nolint:nilerr // not created yet
		}
		for _, c := range j.Status.Conditions {
			if c.Type == cond && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for Job %s to be %s: %v; status %+v", name, cond, err, j.Status)
	}
	return j
}

func (e *jobsEnv) podsOf(t *testing.T, j *batchv1.Job) []corev1.Pod {
	t.Helper()
	pods, err := e.cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + j.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if slices.Contains(p.Finalizers, job.TrackingFinalizer) {
			t.Errorf("pod %s of the finished Job %s still has the tracking finalizer", p.Name, j.Name)
		}
	}
	return pods.Items
}

func hasCond(j *batchv1.Job, t batchv1.JobConditionType, reason string) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

const fiveJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: five
spec:
  completions: 5
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: hello
        image: hello:latest
        imagePullPolicy: IfNotPresent
`

// indexedJob's index 1 exits 1 every time: it is retried once after the backoff, then
// the Job fails with BackoffLimitExceeded while index 0 completed.
const indexedJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: indexed
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: work
        image: toolbox:latest
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "echo index $(JOB_COMPLETION_INDEX); exit $(JOB_COMPLETION_INDEX)"]
`

// restartingJob's container exits 1 and is restarted in its pod (OnFailure): its first
// restart reaches the backoffLimit, so the Job fails with one pod and no replacement.
const restartingJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: restarting
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: OnFailure
      containers:
      - name: work
        image: toolbox:latest
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "echo failing; exit 1"]
`

func TestJobs(t *testing.T) {
	e := jobsSetup(t)
	t.Run("kubectl create job runs to Complete", func(t *testing.T) {
		t.Parallel()
		e.mustKubectl(t, "", "create", "job", "once", "--image=hello:latest")
		j := e.waitJob(t, "once", batchv1.JobComplete, 90*time.Second)
		if j.Status.Succeeded != 1 || j.Status.CompletionTime == nil || !hasCond(j, batchv1.JobSuccessCriteriaMet, "CompletionsReached") {
			t.Errorf("status = %+v", j.Status)
		}
		if j.Labels["batch.kubernetes.io/job-name"] != "once" || j.Spec.Selector.MatchLabels["batch.kubernetes.io/controller-uid"] != string(j.UID) ||
			*j.Spec.BackoffLimit != 6 || *j.Spec.CompletionMode != batchv1.NonIndexedCompletion {
			t.Errorf("defaults: labels %v selector %v spec %+v", j.Labels, j.Spec.Selector, j.Spec)
		}
		if out := e.mustKubectl(t, "", "logs", "job/once"); !strings.Contains(out, "hello from wasmplane") {
			t.Errorf("kubectl logs job/once = %q", out)
		}
	})
	t.Run("completions 5 parallelism 2", func(t *testing.T) {
		t.Parallel()
		// Parallelism caps the unfinished pods while the Job runs. They are counted from
		// a pod watch started before the Job: on a fast machine the whole Job runs
		// within a poll interval, so polling the Job's status can see no active pod.
		w, err := e.cs.CoreV1().Pods("default").Watch(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=five"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		e.mustKubectl(t, fiveJob, "create", "-f", "-")
		unfinished := map[string]bool{}
		most := 0
		err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 120*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := drainPodEvents(w, func(typ watch.EventType, p *corev1.Pod) {
				done := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
				if typ == watch.Deleted || done {
					delete(unfinished, p.Name)
				} else {
					unfinished[p.Name] = true
				}
				most = max(most, len(unfinished))
			}); err != nil {
				return false, err
			}
			j, err := e.cs.BatchV1().Jobs("default").Get(ctx, "five", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return hasCond(j, batchv1.JobComplete, "CompletionsReached"), nil
		})
		if err != nil {
			t.Fatalf("waiting for five to complete: %v", err)
		}
		j := e.waitJob(t, "five", batchv1.JobComplete, time.Second)
		if j.Status.Succeeded != 5 || j.Status.Failed != 0 || j.Status.Active != 0 || most > 2 || most == 0 {
			t.Errorf("succeeded %d failed %d active %d, most active %d", j.Status.Succeeded, j.Status.Failed, j.Status.Active, most)
		}
		if u := j.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
			t.Errorf("uncounted pods left: %+v", u)
		}
		if pods := e.podsOf(t, j); len(pods) != 5 {
			t.Errorf("%d pods, want 5", len(pods))
		}
		out := e.mustKubectl(t, "", "get", "job", "five")
		if !strings.Contains(out, "STATUS") || !strings.Contains(out, "COMPLETIONS") || !strings.Contains(out, "Complete") || !strings.Contains(out, "5/5") {
			t.Errorf("kubectl get job five:\n%s", out)
		}
	})
	t.Run("indexed job retries a failed index then fails", func(t *testing.T) {
		t.Parallel()
		e.mustKubectl(t, indexedJob, "create", "-f", "-")
		j := e.waitJob(t, "indexed", batchv1.JobFailed, 120*time.Second)
		if !hasCond(j, batchv1.JobFailed, "BackoffLimitExceeded") || !hasCond(j, batchv1.JobFailureTarget, "BackoffLimitExceeded") {
			t.Errorf("conditions = %+v", j.Status.Conditions)
		}
		if j.Status.CompletedIndexes != "0" || j.Status.Succeeded != 1 || j.Status.Failed != 2 {
			t.Errorf("completedIndexes %q succeeded %d failed %d", j.Status.CompletedIndexes, j.Status.Succeeded, j.Status.Failed)
		}
		perIndex := map[string]int{}
		for _, p := range e.podsOf(t, j) {
			perIndex[p.Annotations[job.CompletionIndexKey]]++
			if p.Labels[job.CompletionIndexKey] != p.Annotations[job.CompletionIndexKey] {
				t.Errorf("pod %s: label %v annotation %v", p.Name, p.Labels, p.Annotations)
			}
			if p.Annotations[job.CompletionIndexKey] == "0" {
				logs, err := e.cs.CoreV1().Pods("default").GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
				if err != nil || !strings.Contains(string(logs), "index 0") {
					t.Errorf("logs of %s: %q %v", p.Name, logs, err)
				}
			}
		}
		if perIndex["0"] != 1 || perIndex["1"] != 2 {
			t.Errorf("pods per index = %v, want index 0 once and index 1 twice", perIndex)
		}
		if out := e.mustKubectl(t, "", "get", "jobs", "indexed"); !strings.Contains(out, "Failed") || !strings.Contains(out, "1/2") {
			t.Errorf("kubectl get jobs indexed:\n%s", out)
		}
	})
	t.Run("OnFailure restarts count toward backoffLimit", func(t *testing.T) {
		t.Parallel()
		// The restarts are read from a watch started before the Job: its failure deletes
		// the pod, which on a fast machine happens within a poll interval of its start.
		w, err := e.cs.CoreV1().Pods("default").Watch(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=restarting"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		e.mustKubectl(t, restartingJob, "create", "-f", "-")
		var restarts int32
		seen := map[string]bool{}
		failed := false
		err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 120*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := drainPodEvents(w, func(_ watch.EventType, p *corev1.Pod) {
				seen[p.Name] = true
				for _, cs := range p.Status.ContainerStatuses {
					restarts = max(restarts, cs.RestartCount)
				}
			}); err != nil {
				return false, err
			}
			if !failed {
				j, err := e.cs.BatchV1().Jobs("default").Get(ctx, "restarting", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				failed = hasCond(j, batchv1.JobFailed, "BackoffLimitExceeded")
			}
			// The restart was written before the failure it caused, so its event comes.
			return failed && restarts >= 1, nil
		})
		if err != nil {
			t.Fatalf("waiting for restarting to fail with BackoffLimitExceeded after a restart (failed %v, pods %v, most restarts %d): %v", failed, seen, restarts, err)
		}
		j := e.waitJob(t, "restarting", batchv1.JobFailed, time.Second)
		if !hasCond(j, batchv1.JobFailureTarget, "BackoffLimitExceeded") || j.Status.Succeeded != 0 || j.Status.Active != 0 {
			t.Errorf("status = %+v", j.Status)
		}
		// One pod whose container restarted in place: the restart reached the limit
		// (the pod deleted by the Job's failure then counts as failed, as in Kubernetes).
		if len(seen) != 1 || restarts < 1 {
			t.Errorf("pods %v, most restarts %d; want one pod, restarted", seen, restarts)
		}
	})
	t.Run("cronjob created, shown and run by hand", func(t *testing.T) {
		t.Parallel()
		e.mustKubectl(t, "", "create", "cronjob", "tick", "--image=hello:latest", "--schedule=0 0 1 1 *")
		out := e.mustKubectl(t, "", "get", "cronjobs")
		for _, col := range []string{"SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "0 0 1 1 *", "<none>", "False"} {
			if !strings.Contains(out, col) {
				t.Errorf("kubectl get cronjobs lacks %q:\n%s", col, out)
			}
		}
		e.mustKubectl(t, "", "create", "job", "tick-manual", "--from=cronjob/tick")
		j := e.waitJob(t, "tick-manual", batchv1.JobComplete, 90*time.Second)
		if j.Status.Succeeded != 1 {
			t.Errorf("status = %+v", j.Status)
		}
	})
	policyTests(t, e)
	t.Run("invalid objects are rejected with field causes", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			args  []string
			stdin string
			want  string
		}{
			{[]string{"create", "cronjob", "bad", "--image=hello:latest", "--schedule=not a schedule"}, "", "spec.schedule: Invalid value"},
			{[]string{"create", "-f", "-"}, strings.Replace(strings.Replace(fiveJob, "restartPolicy: Never", "restartPolicy: Always", 1), "name: five", "name: always", 1),
				`spec.template.spec.restartPolicy: Unsupported value: "Always"`},
			{[]string{"create", "-f", "-"}, `apiVersion: batch/v1
kind: CronJob
metadata:
  name: zone
spec:
  schedule: "* * * * *"
  timeZone: Mars/Olympus
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: c
            image: hello:latest
`, "spec.timeZone: Invalid value"},
		} {
			_, stderr, err := e.kubectl(t, tc.stdin, tc.args...)
			if err == nil || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "is invalid") {
				t.Errorf("kubectl %v: err %v, stderr %q, want %q", tc.args, err, stderr, tc.want)
			}
		}
	})
}

// drainPodEvents hands each pod event already delivered on w to each, without waiting
// for more; it fails when the watch has ended.
func drainPodEvents(w watch.Interface, each func(watch.EventType, *corev1.Pod)) error {
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the pod watch ended")
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod {
				each(ev.Type, p)
			}
		default:
			return nil
		}
	}
}
