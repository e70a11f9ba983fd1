package controllers

import (
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A pod relabelled out of a ReplicaSet's selector is released and replaced; an orphan that
// matches is adopted (and the surplus deleted).
func TestReplicaSetAdoptionAndRelease(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	n := int32(3)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ad"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ad"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "ad"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}},
	}
	created, err := e.client.AppsV1().ReplicaSets(e.ns).Create(ctx, rs, metav1.CreateOptions{})
	must(t, err)
	owned := func(ctx context.Context, selector string) (in, out int, err error) {
		pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return 0, 0, err
		}
		for _, p := range pods.Items {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == created.UID {
				in++
			} else {
				out++
			}
		}
		return in, out, nil
	}
	waitfor.Condition(t, 20*time.Second, "3 owned pods", func(ctx context.Context) (bool, error) {
		in, _, err := owned(ctx, "app=ad")
		return in == 3, err
	})
	pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=ad"})
	must(t, err)
	victim := pods.Items[0].Name
	_, err = e.client.CoreV1().Pods(e.ns).Patch(ctx, victim, types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"gone"}}}`), metav1.PatchOptions{})
	must(t, err)
	waitfor.Condition(t, 20*time.Second, "released and replaced", func(ctx context.Context) (bool, error) {
		in, _, err := owned(ctx, "app=ad")
		if err != nil || in != 3 {
			return false, err
		}
		inGone, outGone, err := owned(ctx, "app=gone")
		return inGone == 0 && outGone == 1, err
	})
	_, err = e.client.CoreV1().Pods(e.ns).Patch(ctx, victim, types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"ad"}}}`), metav1.PatchOptions{})
	must(t, err)
	waitfor.Condition(t, 20*time.Second, "orphan adopted, surplus deleted", func(ctx context.Context) (bool, error) {
		in, out, err := owned(ctx, "app=ad")
		if err != nil || in != 3 || out != 0 {
			return false, err
		}
		cur, err := e.client.AppsV1().ReplicaSets(e.ns).Get(ctx, "ad", metav1.GetOptions{})
		return err == nil && cur.Status.Replicas == 3 && cur.Status.FullyLabeledReplicas == 3, err
	})
}
