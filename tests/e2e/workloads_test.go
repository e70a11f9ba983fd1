// The workload tests run ReplicationControllers, DaemonSets and StatefulSets end to
// end: the real server with its controllers and scheduler, two kubelets on the built-in
// WASI runtime running the example workloads, and the real kubectl driving rollouts.

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

type workloadsEnv struct {
	s  *testserver.Server
	cs kubernetes.Interface
}

// setup starts the control plane and two WASI nodes holding the sleeper workload, and
// waits until both nodes are ready.
func workloadsSetup(t *testing.T) *workloadsEnv {
	t.Helper()
	s := testserver.Start(t)
	for _, n := range []string{"node-1", "node-2"} {
		testserver.StartNamedWASINode(t, s, n, modules, "sleeper")
	}
	e := &workloadsEnv{s: s, cs: s.Clientset(t, false)}
	e.poll(t, "both nodes ready", 60*time.Second, func(ctx context.Context) (bool, error) {
		n, err := testserver.ReadyNodes(ctx, e.cs)
		return n == 2, err
	})
	return e
}

func (e *workloadsEnv) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return e.s.MustKubectl(t, kubectlBin, "default", stdin, args...)
}

// poll waits for cond, failing the test with what after timeout.
func (e *workloadsEnv) poll(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// pods lists the pods in default whose labels match selector.
func (e *workloadsEnv) pods(t *testing.T, selector string) []corev1.Pod {
	t.Helper()
	list, err := e.cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func live(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func TestWorkloads(t *testing.T) {
	e := workloadsSetup(t)
	t.Run("ReplicationController", func(t *testing.T) { t.Parallel(); testReplicationController(t, e) })
	t.Run("DaemonSet", func(t *testing.T) { t.Parallel(); testDaemonSet(t, e) })
	t.Run("StatefulSet", func(t *testing.T) { t.Parallel(); testStatefulSet(t, e) })
	t.Run("StatefulSetDeletesClaims", func(t *testing.T) { t.Parallel(); testStatefulSetDeletesClaims(t, e) })
}

const rcYAML = `apiVersion: v1
kind: ReplicationController
metadata:
  name: web
spec:
  replicas: 2
  selector:
    app: rc-web
  template:
    metadata:
      labels:
        app: rc-web
    spec:
      containers:
      - name: sleeper
        image: sleeper:latest
        imagePullPolicy: IfNotPresent
`

func testReplicationController(t *testing.T, e *workloadsEnv) {
	ctx := context.Background()
	rcs := e.cs.CoreV1().ReplicationControllers("default")
	e.kubectl(t, rcYAML, "create", "-f", "-")
	waitReady := func(n int32) {
		t.Helper()
		e.poll(t, "the ReplicationController's pods to be ready", 60*time.Second, func(ctx context.Context) (bool, error) {
			rc, err := rcs.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := rc.Status
			return s.ObservedGeneration == rc.Generation && s.Replicas == n && s.ReadyReplicas == n && s.AvailableReplicas == n &&
				s.FullyLabeledReplicas == n && len(live(e.pods(t, "app=rc-web"))) == int(n), nil
		})
	}
	waitReady(2)
	e.kubectl(t, "", "scale", "rc", "web", "--replicas=3")
	waitReady(3)
	// The scale subresource, as an autoscaler reads and writes it.
	scale, err := rcs.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil || scale.Spec.Replicas != 3 || scale.Status.Replicas != 3 || scale.Status.Selector != "app=rc-web" {
		t.Fatalf("GetScale = %+v, %v", scale, err)
	}
	scale.Spec.Replicas = 1
	if _, err := rcs.UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(1)
	// A pod whose labels stop matching is released, and replaced.
	pod := live(e.pods(t, "app=rc-web"))[0]
	e.kubectl(t, "", "label", "pod", pod.Name, "app=released", "--overwrite")
	e.poll(t, "the relabelled pod to be released", 30*time.Second, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && metav1.GetControllerOf(p) == nil, nil
	})
	waitReady(1)
	if out := e.kubectl(t, "", "get", "rc", "web"); !strings.Contains(out, "DESIRED") || !strings.Contains(out, "READY") {
		t.Errorf("kubectl get rc:\n%s", out)
	}
}
