package controllers

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDeployment50Available(t *testing.T) {
	e := newEnv(t)
	fakeKubelet(t, e)
	ctx := testCtx(t)
	_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, newDeployment("web", 50, "nginx:1"), metav1.CreateOptions{})
	must(t, err)
	d := waitComplete(t, e, "web", 60*time.Second)
	if d.Status.AvailableReplicas != 50 {
		t.Fatalf("available = %d", d.Status.AvailableReplicas)
	}
	n, err := countPods(ctx, e, "app=web")
	must(t, err)
	if n != 50 {
		t.Fatalf("pods = %d, want 50", n)
	}
	if d.Annotations["deployment.kubernetes.io/revision"] != "1" {
		t.Fatalf("revision annotation = %q", d.Annotations["deployment.kubernetes.io/revision"])
	}
	var cond string
	for _, c := range d.Status.Conditions {
		cond += fmt.Sprintf("%s=%s/%s ", c.Type, c.Status, c.Reason)
	}
	waitfor.Condition(t, 10*time.Second, "Progressing=NewReplicaSetAvailable", func(ctx context.Context) (bool, error) {
		d, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		okP, okA := false, false
		for _, c := range d.Status.Conditions {
			okP = okP || (c.Type == "Progressing" && c.Status == corev1.ConditionTrue && c.Reason == "NewReplicaSetAvailable")
			okA = okA || (c.Type == "Available" && c.Status == corev1.ConditionTrue && c.Reason == "MinimumReplicasAvailable")
		}
		return okP && okA, nil
	})
}
