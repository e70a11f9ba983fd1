package simnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/simnode"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestPodsRunOrComplete binds pods to simulated nodes and expects the status a kubelet
// would write: a Job-like pod succeeds, a long-running one runs ready with an IP, and a
// pod of a node not simulated stays pending.
func TestPodsRunOrComplete(t *testing.T) {
	s := testserver.StartAPI(t)
	cs := s.Clientset(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := simnode.Start(ctx, cs, 2, testserver.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := c.AddNodes(ctx, simnode.Names("sim", 0, 2), 10); err != nil {
		t.Fatal(err)
	}
	if n, err := testserver.ReadyNodes(ctx, cs); err != nil || n != 2 {
		t.Fatalf("ready nodes = %d, %v; want 2", n, err)
	}
	if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "sim-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("lease of sim-1: %v", err)
	}
	// The API server alone creates no ServiceAccounts.
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, node string
		restart    corev1.RestartPolicy
		phase      corev1.PodPhase
		ready      bool
	}{
		{"completes", "sim-0", corev1.RestartPolicyNever, corev1.PodSucceeded, false},
		{"retries-completes", "sim-1", corev1.RestartPolicyOnFailure, corev1.PodSucceeded, false},
		{"serves", "sim-1", corev1.RestartPolicyAlways, corev1.PodRunning, true},
		{"elsewhere", "real-node", corev1.RestartPolicyAlways, corev1.PodPending, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: corev1.PodSpec{NodeName: tc.node, RestartPolicy: tc.restart,
				Containers: []corev1.Container{{Name: "c", Image: "sleeper:latest"}}}}
			if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// A pending pod is watched for a second: long enough for the agent, which
			// answered the others within milliseconds, to have acted on it if it would.
			timeout := 10 * time.Second
			if tc.phase == corev1.PodPending {
				timeout = time.Second
			}
			var got *corev1.Pod
			err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
				got, err = cs.CoreV1().Pods("default").Get(ctx, tc.name, metav1.GetOptions{})
				return err == nil && got.Status.Phase == tc.phase && tc.phase != corev1.PodPending, err
			})
			if tc.phase == corev1.PodPending {
				// Nothing may write the status of a node's pods the agent does not simulate.
				if got.Status.Phase != "" && got.Status.Phase != corev1.PodPending {
					t.Fatalf("phase = %s, want Pending", got.Status.Phase)
				}
				return
			}
			if err != nil {
				t.Fatalf("phase = %s, want %s: %v", got.Status.Phase, tc.phase, err)
			}
			ready := false
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.PodReady {
					ready = c.Status == corev1.ConditionTrue
				}
			}
			if ready != tc.ready || got.Status.PodIP == "" || len(got.Status.ContainerStatuses) != 1 {
				t.Fatalf("ready = %v (want %v), podIP %q, container statuses %+v", ready, tc.ready, got.Status.PodIP, got.Status.ContainerStatuses)
			}
		})
	}
}
