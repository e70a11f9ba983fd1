package controllers

import (
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func condition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// With no kubelet the pods never become ready: the rollout times out.
func TestProgressDeadlineExceeded(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	e := newEnv(t)
	ctx := testCtx(t)
	d := newDeployment("stuck", 2, "img:1")
	deadline := int32(2)
	d.Spec.ProgressDeadlineSeconds = &deadline
	_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	waitfor.Condition(t, 30*time.Second, "ProgressDeadlineExceeded", func(ctx context.Context) (bool, error) {
		d, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "stuck", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := condition(d, appsv1.DeploymentProgressing)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded", nil
	})
	d, err = e.client.AppsV1().Deployments(e.ns).Get(ctx, "stuck", metav1.GetOptions{})
	must(t, err)
	if c := condition(d, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "MinimumReplicasUnavailable" {
		t.Fatalf("Available condition = %+v", c)
	}
	if d.Status.UnavailableReplicas != 2 {
		t.Fatalf("unavailableReplicas = %d, want 2", d.Status.UnavailableReplicas)
	}
}

// Pods ready for less than minReadySeconds are ready but not available.
func TestMinReadySeconds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	e := newEnv(t)
	fakeKubelet(t, e)
	ctx := testCtx(t)
	d := newDeployment("mr", 3, "img:1")
	d.Spec.MinReadySeconds = 2
	_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	waitfor.Condition(t, 30*time.Second, "3 ready", func(ctx context.Context) (bool, error) {
		d, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "mr", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 3, err
	})
	d, err = e.client.AppsV1().Deployments(e.ns).Get(ctx, "mr", metav1.GetOptions{})
	must(t, err)
	if d.Status.AvailableReplicas == 3 {
		t.Fatal("available before minReadySeconds")
	}
	// Available 2 s after ready, with room for the controllers' resyncs.
	waitComplete(t, e, "mr", 10*time.Second)
	rs, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	if rs.Items[0].Spec.MinReadySeconds != 2 || rs.Items[0].Status.AvailableReplicas != 3 {
		t.Fatalf("ReplicaSet minReadySeconds %d available %d", rs.Items[0].Spec.MinReadySeconds, rs.Items[0].Status.AvailableReplicas)
	}
}

// Deleting a namespace removes its Deployments, ReplicaSets and pods, then the namespace.
func TestNamespaceDeletionEmptiesIt(t *testing.T) {
	e := newEnv(t)
	fakeKubelet(t, e)
	ctx := testCtx(t)
	_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, newDeployment("nsd", 5, "img:1"), metav1.CreateOptions{})
	must(t, err)
	waitComplete(t, e, "nsd", 30*time.Second)
	must(t, e.client.CoreV1().Namespaces().Delete(ctx, e.ns, metav1.DeleteOptions{}))
	waitfor.Condition(t, 60*time.Second, "namespace gone", func(ctx context.Context) (bool, error) {
		_, err := e.client.CoreV1().Namespaces().Get(ctx, e.ns, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
}
