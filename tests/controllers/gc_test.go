package controllers

import (
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestCascadingDeletion(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t)
			fakeKubelet(t, e)
			ctx := testCtx(t)
			_, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, newDeployment("gc", 5, "img:1"), metav1.CreateOptions{})
			must(t, err)
			d := waitComplete(t, e, "gc", 60*time.Second)
			// A ConfigMap owned by the Deployment: the collector is generic, not apps-only.
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gc-cfg", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID}}}}
			_, err = e.client.CoreV1().ConfigMaps(e.ns).Create(ctx, cm, metav1.CreateOptions{})
			must(t, err)
			must(t, e.client.AppsV1().Deployments(e.ns).Delete(ctx, "gc", metav1.DeleteOptions{PropagationPolicy: &policy}))
			if policy == metav1.DeletePropagationForeground {
				// The owner stays, marked, until its blocking dependents are gone.
				cur, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "gc", metav1.GetOptions{})
				if err == nil && (cur.DeletionTimestamp == nil || !slices.Contains(cur.Finalizers, metav1.FinalizerDeleteDependents)) {
					t.Fatalf("foreground owner not marked: %v %v", cur.DeletionTimestamp, cur.Finalizers)
				}
			}
			waitfor.Condition(t, 30*time.Second, "deployment gone", func(ctx context.Context) (bool, error) {
				_, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "gc", metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if policy == metav1.DeletePropagationOrphan {
				waitfor.Condition(t, 30*time.Second, "dependents orphaned", func(ctx context.Context) (bool, error) {
					rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
					if err != nil || len(rss.Items) != 1 {
						return false, err
					}
					c, err := e.client.CoreV1().ConfigMaps(e.ns).Get(ctx, "gc-cfg", metav1.GetOptions{})
					if err != nil {
						return false, err
					}
					return len(rss.Items[0].OwnerReferences) == 0 && len(c.OwnerReferences) == 0, nil
				})
				// The pods stay with their (now orphaned) ReplicaSet.
				waitfor.Condition(t, 10*time.Second, "pods kept", func(ctx context.Context) (bool, error) {
					n, err := countPods(ctx, e, "app=gc")
					return n == 5, err
				})
				return
			}
			waitfor.Condition(t, 30*time.Second, "dependents deleted", func(ctx context.Context) (bool, error) {
				rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
				if err != nil || len(rss.Items) != 0 {
					return false, err
				}
				n, err := countPods(ctx, e, "app=gc")
				if err != nil || n != 0 {
					return false, err
				}
				_, err = e.client.CoreV1().ConfigMaps(e.ns).Get(ctx, "gc-cfg", metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		})
	}
}

// TestForegroundDeletionCircle deletes one of three objects that own each other in a circle
// (a blocking reference each), in the foreground: all three must go, as in Kubernetes.
func TestForegroundDeletionCircle(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	cms := e.client.CoreV1().ConfigMaps(e.ns)
	var made []*corev1.ConfigMap
	for _, name := range []string{"c1", "c2", "c3"} {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		must(t, err)
		made = append(made, cm)
	}
	// c1 is owned by c3, c2 by c1, c3 by c2.
	for i, cm := range made {
		owner := made[(i+2)%3]
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
			Controller: new(true), BlockOwnerDeletion: new(true)}}
		_, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		must(t, err)
	}
	fg := metav1.DeletePropagationForeground
	must(t, cms.Delete(ctx, "c1", metav1.DeleteOptions{PropagationPolicy: &fg, Preconditions: metav1.NewUIDPreconditions(string(made[0].UID))}))
	waitfor.Condition(t, 60*time.Second, "all three gone", func(ctx context.Context) (bool, error) {
		l, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, cm := range l.Items {
			if cm.Name == "c1" || cm.Name == "c2" || cm.Name == "c3" {
				return false, nil
			}
		}
		return true, nil
	})
}

// TestReplicationControllerOrphansByDefault deletes a ReplicationController with no
// propagation policy: as in Kubernetes (core/v1 keeps orphaning as its default for
// backward compatibility), its pods stay, without their owner reference.
func TestReplicationControllerOrphansByDefault(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	labels := map[string]string{"app": "rc-orphan"}
	rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc-orphan"}, Spec: corev1.ReplicationControllerSpec{
		Replicas: ptr.To[int32](2), Selector: labels,
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}}}}}
	rc, err := e.client.CoreV1().ReplicationControllers(e.ns).Create(ctx, rc, metav1.CreateOptions{})
	must(t, err)
	waitfor.Condition(t, 30*time.Second, "two pods", func(ctx context.Context) (bool, error) {
		n, err := countPods(ctx, e, "app=rc-orphan")
		return n == 2, err
	})
	must(t, e.client.CoreV1().ReplicationControllers(e.ns).Delete(ctx, rc.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(rc.UID))}))
	waitfor.Condition(t, 30*time.Second, "rc gone, pods orphaned", func(ctx context.Context) (bool, error) {
		if _, err := e.client.CoreV1().ReplicationControllers(e.ns).Get(ctx, rc.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=rc-orphan"})
		if err != nil || len(pods.Items) != 2 {
			return false, err
		}
		for _, p := range pods.Items {
			if len(p.OwnerReferences) != 0 || p.DeletionTimestamp != nil {
				return false, nil
			}
		}
		return true, nil
	})
}
