package controllers

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func setImage(t *testing.T, e *env, name, image string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":%q}]}}}}`, image)
	_, err := e.client.AppsV1().Deployments(e.ns).Patch(context.Background(), name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	must(t, err)
}

func TestRollingUpdateBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	for _, tc := range []struct {
		name               string
		replicas           int32
		surge, unavailable intstr.IntOrString
		wantSurge, wantMax int32 // maxSurge, maxUnavailable as pod counts
	}{
		{"percent", 20, intstr.FromString("25%"), intstr.FromString("25%"), 5, 5},
		{"ints", 10, intstr.FromInt32(3), intstr.FromInt32(1), 3, 1},
		{"surge-only", 10, intstr.FromInt32(2), intstr.FromInt32(0), 2, 0},
		{"unavailable-only", 10, intstr.FromInt32(0), intstr.FromString("30%"), 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			fakeKubelet(t, e)
			ctx := testCtx(t)
			d := newDeployment("web", tc.replicas, "img:1")
			d.Spec.Strategy.RollingUpdate.MaxSurge = &tc.surge
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &tc.unavailable
			_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{})
			must(t, err)
			waitComplete(t, e, "web", 60*time.Second)
			maxPods, minAvail := int(tc.replicas+tc.wantSurge), int(tc.replicas-tc.wantMax)
			w := watchPods(t, e, "app=web", func(pods map[string]*corev1.Pod) error {
				all, ready := podsByImage(pods)
				total, avail := len(pods), ready["img:1"]+ready["img:2"]
				if total > maxPods {
					return fmt.Errorf("%d pods > %d (%v)", total, maxPods, all)
				}
				if avail < minAvail {
					return fmt.Errorf("%d available < %d (%v ready of %v)", avail, minAvail, ready, all)
				}
				return nil
			})
			setImage(t, e, "web", "img:2")
			waitfor.Condition(t, 60*time.Second, "rollout to img:2", func(ctx context.Context) (bool, error) {
				d, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				s := d.Status
				return d.Spec.Template.Spec.Containers[0].Image == "img:2" && s.ObservedGeneration >= d.Generation &&
					s.UpdatedReplicas == tc.replicas && s.Replicas == tc.replicas && s.AvailableReplicas == tc.replicas, nil
			})
			w.mu.Lock()
			all, _ := podsByImage(w.pods)
			w.mu.Unlock()
			if all["img:1"] != 0 || all["img:2"] != int(tc.replicas) {
				t.Errorf("pods at the end: %v", all)
			}
			w.assertClean(t)
			d2, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "web", metav1.GetOptions{})
			must(t, err)
			if d2.Annotations["deployment.kubernetes.io/revision"] != "2" {
				t.Errorf("revision = %q, want 2", d2.Annotations["deployment.kubernetes.io/revision"])
			}
		})
	}
}

func TestRecreateNeverOverlaps(t *testing.T) {
	e := newEnv(t)
	fakeKubelet(t, e)
	ctx := testCtx(t)
	d := newDeployment("rc", 10, "img:1")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	waitComplete(t, e, "rc", 60*time.Second)
	w := watchPods(t, e, "app=rc", func(pods map[string]*corev1.Pod) error {
		all, _ := podsByImage(pods)
		if all["img:1"] > 0 && all["img:2"] > 0 {
			return fmt.Errorf("old and new pods together: %v", all)
		}
		return nil
	})
	setImage(t, e, "rc", "img:2")
	waitfor.Condition(t, 60*time.Second, "recreate to img:2", func(ctx context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		all, ready := podsByImage(w.pods)
		return all["img:2"] == 10 && ready["img:2"] == 10 && all["img:1"] == 0, nil
	})
	waitComplete(t, e, "rc", 30*time.Second)
	w.assertClean(t)
}

func TestPauseResume(t *testing.T) {
	e := newEnv(t)
	fakeKubelet(t, e)
	ctx := testCtx(t)
	_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, newDeployment("p", 4, "img:1"), metav1.CreateOptions{})
	must(t, err)
	waitComplete(t, e, "p", 60*time.Second)
	_, err = e.client.AppsV1().Deployments(e.ns).Patch(ctx, "p", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{})
	must(t, err)
	setImage(t, e, "p", "img:2")
	// Paused: the controller observes the new generation but creates no new ReplicaSet.
	waitfor.Condition(t, 20*time.Second, "paused condition observed", func(ctx context.Context) (bool, error) {
		d, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "DeploymentPaused" {
				return d.Status.ObservedGeneration >= d.Generation, nil
			}
		}
		return false, nil
	})
	rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(rss.Items) != 1 {
		t.Fatalf("paused deployment has %d ReplicaSets, want 1", len(rss.Items))
	}
	pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=p"})
	must(t, err)
	for _, p := range pods.Items {
		if p.Spec.Containers[0].Image != "img:1" {
			t.Fatalf("pod %s has image %s while paused", p.Name, p.Spec.Containers[0].Image)
		}
	}
	_, err = e.client.AppsV1().Deployments(e.ns).Patch(ctx, "p", types.MergePatchType, []byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{})
	must(t, err)
	waitfor.Condition(t, 60*time.Second, "rollout after resume", func(ctx context.Context) (bool, error) {
		pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=p"})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != "img:2" {
				return false, nil
			}
			n++
		}
		return n == 4, nil
	})
	waitComplete(t, e, "p", 30*time.Second)
}

func TestScaleMidRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	e := newEnv(t)
	fakeKubelet(t, e)
	ctx := testCtx(t)
	_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, newDeployment("s", 10, "img:1"), metav1.CreateOptions{})
	must(t, err)
	waitComplete(t, e, "s", 60*time.Second)
	setImage(t, e, "s", "img:2")
	scale := func(n int32) { scaleDeployment(t, e, "s", n) }
	scale(100)
	setImage(t, e, "s", "img:3")
	d := waitComplete(t, e, "s", 90*time.Second)
	if n, err := countPods(ctx, e, "app=s"); err != nil || n != 100 {
		t.Fatalf("pods = %d (%v), want 100", n, err)
	}
	if d.Spec.Template.Spec.Containers[0].Image != "img:3" {
		t.Fatal("wrong template")
	}
	setImage(t, e, "s", "img:4")
	scale(0)
	waitfor.Condition(t, 60*time.Second, "scaled to zero", func(ctx context.Context) (bool, error) {
		n, err := countPods(ctx, e, "app=s")
		if err != nil || n != 0 {
			return false, err
		}
		d, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "s", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == 0, nil
	})
	rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	for _, rs := range rss.Items {
		if *rs.Spec.Replicas != 0 {
			t.Errorf("ReplicaSet %s still wants %d", rs.Name, *rs.Spec.Replicas)
		}
	}
}

func TestRevisionHistoryAndUndo(t *testing.T) {
	e := newEnv(t)
	fakeKubelet(t, e)
	ctx := testCtx(t)
	d := newDeployment("h", 2, "img:0")
	limit := int32(2)
	d.Spec.RevisionHistoryLimit = &limit
	_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	waitComplete(t, e, "h", 60*time.Second)
	for i := 1; i <= 4; i++ {
		setImage(t, e, "h", fmt.Sprintf("img:%d", i))
		waitComplete(t, e, "h", 60*time.Second)
	}
	// Revisions 1..5 were made; history keeps the current one plus two old ones.
	waitfor.Condition(t, 30*time.Second, "history trimmed to 2", func(ctx context.Context) (bool, error) {
		rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(rss.Items) == 3, err
	})
	rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	var revs []string
	byRev := map[string]appsv1.ReplicaSet{}
	for _, rs := range rss.Items {
		revs = append(revs, rs.Annotations["deployment.kubernetes.io/revision"])
		byRev[rs.Annotations["deployment.kubernetes.io/revision"]] = rs
	}
	sort.Strings(revs)
	if fmt.Sprint(revs) != "[3 4 5]" {
		t.Fatalf("revisions kept = %v, want [3 4 5]", revs)
	}
	// kubectl rollout undo, as kubectl does it: copy revision 4's template into the Deployment.
	undo(t, e, "h", byRev["4"])
	waitfor.Condition(t, 60*time.Second, "undo to img:3 as revision 6", func(ctx context.Context) (bool, error) {
		d, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "h", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rs, err := e.client.AppsV1().ReplicaSets(e.ns).Get(ctx, byRev["4"].Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Annotations["deployment.kubernetes.io/revision"] == "6" &&
			rs.Annotations["deployment.kubernetes.io/revision"] == "6" &&
			rs.Annotations["deployment.kubernetes.io/revision-history"] == "4" &&
			d.Spec.Template.Spec.Containers[0].Image == "img:3", nil
	})
	waitComplete(t, e, "h", 60*time.Second)
	pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=h"})
	must(t, err)
	for _, p := range pods.Items {
		if p.Spec.Containers[0].Image != "img:3" {
			t.Fatalf("pod %s runs %s after undo", p.Name, p.Spec.Containers[0].Image)
		}
	}
}
