package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/job"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// exit42Job exits 42, which its podFailurePolicy turns into an immediate Job failure
// although backoffLimit would allow six retries.
const exit42Job = `apiVersion: batch/v1
kind: Job
metadata:
  name: exit42
spec:
  backoffLimit: 6
  podFailurePolicy:
    rules:
    - action: FailJob
      onExitCodes:
        containerName: work
        operator: In
        values: [42]
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: work
        image: toolbox:latest
        imagePullPolicy: IfNotPresent
        command: ["exit", "42"]
`

// disruptedJob ignores failures of pods with the DisruptionTarget condition, so with
// backoffLimit 0 a disrupted pod is replaced instead of failing the Job.
const disruptedJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: disrupted
spec:
  backoffLimit: 0
  podFailurePolicy:
    rules:
    - action: Ignore
      onPodConditions:
      - type: DisruptionTarget
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: work
        image: toolbox:latest
        imagePullPolicy: IfNotPresent
        command: ["sleep", "600"]
`

// perIndexJob's index 2 fails every time (only /0 and /1 exist); with
// backoffLimitPerIndex 1 it runs twice and the Job ends Failed with failedIndexes "2"
// after indexes 0 and 1 succeeded.
const perIndexJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: perindex
spec:
  completionMode: Indexed
  completions: 3
  parallelism: 3
  backoffLimitPerIndex: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: work
        image: toolbox:latest
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "mkdir /0 /1; test -d /$(JOB_COMPLETION_INDEX)"]
`

// leaderJob succeeds as soon as index 0 did; the other indexes would sleep for ten
// minutes and are terminated.
const leaderJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: leader
spec:
  completionMode: Indexed
  completions: 3
  parallelism: 3
  successPolicy:
    rules:
    - succeededIndexes: "0"
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: work
        image: toolbox:latest
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "mkdir /0; test -d /$(JOB_COMPLETION_INDEX) || sleep 600"]
`

func condIndex(j *batchv1.Job, t batchv1.JobConditionType) int {
	for i, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return i
		}
	}
	return -1
}

// policyTests runs the podFailurePolicy, backoffLimitPerIndex and successPolicy cases as
// parallel subtests of TestJobs, sharing its server.
func policyTests(t *testing.T, e *jobsEnv) {
	t.Run("podFailurePolicy FailJob on exit code 42 fails at once", func(t *testing.T) {
		t.Parallel()
		e.mustKubectl(t, exit42Job, "create", "-f", "-")
		e.mustKubectl(t, "", "wait", "--for=condition=Failed", "job/exit42", "--timeout=90s")
		j := e.waitJob(t, "exit42", batchv1.JobFailed, time.Second)
		ft, failed := condIndex(j, batchv1.JobFailureTarget), condIndex(j, batchv1.JobFailed)
		if ft < 0 || failed < ft || !hasCond(j, batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy) {
			t.Errorf("conditions = %+v, want FailureTarget then Failed with reason PodFailurePolicy", j.Status.Conditions)
		}
		pods := e.podsOf(t, j)
		if len(pods) != 1 || j.Status.Failed != 1 {
			t.Fatalf("%d pods, failed %d; want one pod, no retry", len(pods), j.Status.Failed)
		}
		want := "Container work for pod default/" + pods[0].Name + " failed with exit code 42 matching FailJob rule at index 0"
		if msg := j.Status.Conditions[failed].Message; msg != want {
			t.Errorf("message = %q, want %q", msg, want)
		}
	})
	t.Run("podFailurePolicy Ignore on DisruptionTarget: an evicted pod is replaced uncounted", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		e.mustKubectl(t, disruptedJob, "create", "-f", "-")
		var first *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			pods, err := e.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=disrupted"})
			if err != nil || len(pods.Items) == 0 || pods.Items[0].Status.Phase != corev1.PodRunning {
				return false, nil //nolint:nilerr // not there yet
			}
			first = &pods.Items[0]
			return true, nil
		})
		if err != nil {
			t.Fatalf("waiting for the pod to run: %v", err)
		}
		// The eviction API marks the pod DisruptionTarget before it deletes it.
		if err := e.cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: first.Name, Namespace: "default"}}); err != nil {
			t.Fatalf("evicting %s: %v", first.Name, err)
		}
		// The disrupted pod fails, its failure is ignored: it is released and replaced,
		// and the Job with backoffLimit 0 goes on.
		var j *batchv1.Job
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			if _, err := e.cs.CoreV1().Pods("default").Get(ctx, first.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
			pods, err := e.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=disrupted"})
			if err != nil || len(pods.Items) != 1 {
				return false, nil //nolint:nilerr // the replacement is not there yet
			}
			j, err = e.cs.BatchV1().Jobs("default").Get(ctx, "disrupted", metav1.GetOptions{})
			return err == nil && j.Status.Active == 1, nil
		})
		if err != nil {
			t.Fatalf("waiting for the replacement: %v; job %+v", err, j)
		}
		if j.Status.Failed != 0 || condIndex(j, batchv1.JobFailureTarget) >= 0 || condIndex(j, batchv1.JobFailed) >= 0 {
			t.Errorf("status = %+v, want the ignored failure not counted", j.Status)
		}
		e.mustKubectl(t, "", "delete", "job", "disrupted", "--wait=false")
	})
	t.Run("backoffLimitPerIndex fails index 2 only", func(t *testing.T) {
		t.Parallel()
		e.mustKubectl(t, perIndexJob, "create", "-f", "-")
		j := e.waitJob(t, "perindex", batchv1.JobFailed, 90*time.Second)
		if !hasCond(j, batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes) || !hasCond(j, batchv1.JobFailed, batchv1.JobReasonFailedIndexes) {
			t.Errorf("conditions = %+v, want FailureTarget and Failed with FailedIndexes", j.Status.Conditions)
		}
		if ptr.Deref(j.Status.FailedIndexes, "<nil>") != "2" || j.Status.CompletedIndexes != "0,1" || j.Status.Succeeded != 2 || j.Status.Failed != 2 {
			t.Errorf("failedIndexes %v completedIndexes %q succeeded %d failed %d", ptr.Deref(j.Status.FailedIndexes, "<nil>"),
				j.Status.CompletedIndexes, j.Status.Succeeded, j.Status.Failed)
		}
		counts := map[string][]string{}
		for _, p := range e.podsOf(t, j) {
			ix := p.Annotations[job.CompletionIndexKey]
			counts[ix] = append(counts[ix], p.Annotations[batchv1.JobIndexFailureCountAnnotation])
		}
		if strings.Join(counts["0"], ",") != "0" || strings.Join(counts["1"], ",") != "0" || len(counts["2"]) != 2 ||
			!strings.Contains(strings.Join(counts["2"], ","), "0") || !strings.Contains(strings.Join(counts["2"], ","), "1") {
			t.Errorf("failure counts per index = %v, want index 2 tried twice (0 then 1), the others once", counts)
		}
		if out := e.mustKubectl(t, "", "get", "job", "perindex", "-o", "jsonpath={.status.failedIndexes}"); out != "2" {
			t.Errorf("kubectl failedIndexes = %q", out)
		}
	})
	t.Run("successPolicy completes on index 0", func(t *testing.T) {
		t.Parallel()
		e.mustKubectl(t, leaderJob, "create", "-f", "-")
		e.mustKubectl(t, "", "wait", "--for=condition=Complete", "job/leader", "--timeout=90s")
		j := e.waitJob(t, "leader", batchv1.JobComplete, time.Second)
		met, done := condIndex(j, batchv1.JobSuccessCriteriaMet), condIndex(j, batchv1.JobComplete)
		if met < 0 || done < met || !hasCond(j, batchv1.JobComplete, batchv1.JobReasonSuccessPolicy) ||
			j.Status.Conditions[done].Message != "Matched rules at index 0" {
			t.Errorf("conditions = %+v, want SuccessCriteriaMet then Complete with SuccessPolicy", j.Status.Conditions)
		}
		if j.Status.CompletedIndexes != "0" || j.Status.Active != 0 || ptr.Deref(j.Status.Terminating, -1) != 0 || j.Status.CompletionTime == nil {
			t.Errorf("status = %+v", j.Status)
		}
		for _, p := range e.podsOf(t, j) {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				t.Errorf("pod %s still %s after the Job completed", p.Name, p.Status.Phase)
			}
		}
	})
	t.Run("invalid policies are rejected with field causes", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ old, new, want string }{
			{"values: [42]", "values: [42, 7]", "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value"},
			{"operator: In", "operator: Maybe", `spec.podFailurePolicy.rules[0].onExitCodes.operator: Unsupported value: "Maybe"`},
			{"action: FailJob", "action: FailIndex", "requires the backoffLimitPerIndex to be set"},
			{"restartPolicy: Never", "restartPolicy: OnFailure", `only "Never" is supported when podFailurePolicy is specified`},
		} {
			manifest := strings.Replace(strings.Replace(exit42Job, tc.old, tc.new, 1), "name: exit42", "name: bad", 1)
			_, stderr, err := e.kubectl(t, manifest, "create", "-f", "-")
			if err == nil || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "is invalid") {
				t.Errorf("%s: err %v, stderr %q, want %q", tc.new, err, stderr, tc.want)
			}
		}
	})
}
