package replication

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func newRC(name string, replicas int32) *corev1.ReplicationController {
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-" + types.UID(name), Generation: 3},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: ptr.To(replicas), MinReadySeconds: 5,
			Selector: map[string]string{"app": name},
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "tier": "x"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "hello:latest"}}},
			},
		},
	}
}

func TestConversionRoundTrip(t *testing.T) {
	withStatus := newRC("b", 2)
	withStatus.Status = corev1.ReplicationControllerStatus{
		Replicas: 2, FullyLabeledReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, ObservedGeneration: 2,
		Conditions: []corev1.ReplicationControllerCondition{{
			Type: corev1.ReplicationControllerReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota",
		}},
	}
	for _, tc := range []struct {
		name string
		rc   *corev1.ReplicationController
	}{
		{"spec only", newRC("a", 3)},
		{"status and condition", withStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := toReplicaSet(tc.rc)
			if rs.UID != tc.rc.UID || rs.Generation != tc.rc.Generation || *rs.Spec.Replicas != *tc.rc.Spec.Replicas {
				t.Errorf("metadata or replicas lost: %+v", rs.ObjectMeta)
			}
			if !reflect.DeepEqual(rs.Spec.Selector.MatchLabels, tc.rc.Spec.Selector) {
				t.Errorf("selector = %v", rs.Spec.Selector)
			}
			if len(rs.Status.Conditions) != len(tc.rc.Status.Conditions) ||
				(len(rs.Status.Conditions) > 0 && rs.Status.Conditions[0].Type != appsv1.ReplicaSetReplicaFailure) {
				t.Errorf("conditions = %+v", rs.Status.Conditions)
			}
			back := fromReplicaSet(rs)
			back.TypeMeta = tc.rc.TypeMeta
			if !reflect.DeepEqual(back, tc.rc) {
				t.Errorf("round trip changed the object:\n got %+v\nwant %+v", back, tc.rc)
			}
			// The view must not alias the cached object.
			rs.Spec.Template.Labels["tier"] = "changed"
			if tc.rc.Spec.Template.Labels["tier"] != "x" {
				t.Error("toReplicaSet shares the template with the cached object")
			}
		})
	}
}

func TestConvertEvents(t *testing.T) {
	rc := newRC("a", 1)
	for _, tc := range []struct {
		name string
		in   any
		want func(any) bool
	}{
		{"object", rc, func(o any) bool { rs, ok := o.(*appsv1.ReplicaSet); return ok && rs.Name == "a" }},
		{"tombstone", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: rc}, func(o any) bool {
			tomb, ok := o.(cache.DeletedFinalStateUnknown)
			if !ok || tomb.Key != "ns/a" {
				return false
			}
			rs, ok := tomb.Obj.(*appsv1.ReplicaSet)
			return ok && rs.Name == "a"
		}},
		{"other", "x", func(o any) bool { return o == "x" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := convert(tc.in); !tc.want(got) {
				t.Errorf("convert(%T) = %T", tc.in, got)
			}
		})
	}
}

// TestControllerCreatesPodsAndStatus runs the controller on a fake client: pods it
// creates are owned by the ReplicationController, the status goes to the
// ReplicationController, and a refused creation sets ReplicaFailure, cleared once the
// ReplicationController is scaled down to what the quota allows.
func TestControllerCreatesPodsAndStatus(t *testing.T) {
	rc := newRC("web", 3)
	client := fake.NewClientset(rc)
	var n atomic.Int32
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if n.Load() >= 2 {
			return true, nil, fmt.Errorf("exceeded quota: pods=2")
		}
		pod.Name = fmt.Sprintf("%s%d", pod.GenerateName, n.Add(1))
		return false, nil, nil
	})
	// The fake tracker stores a status update as a whole object; the API server keeps the
	// spec. Without this, a status write from a sync that started before the test scaled
	// the controller down could put back the old spec.
	client.PrependReactor("update", "replicationcontrollers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		in := a.(k8stesting.UpdateAction).GetObject().(*corev1.ReplicationController)
		cur, err := client.Tracker().Get(a.GetResource(), in.Namespace, in.Name)
		if err != nil {
			return true, nil, err
		}
		out := cur.(*corev1.ReplicationController).DeepCopy()
		out.Status = in.Status
		return true, out, client.Tracker().Update(a.GetResource(), out, in.Namespace)
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 1) }()
	defer func() { cancel(); <-done; factory.Shutdown() }()

	waitRC := func(what string, cond func(*corev1.ReplicationController) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := client.CoreV1().ReplicationControllers("ns").Get(ctx, "web", metav1.GetOptions{})
			return err == nil && cond(got), nil
		})
		if err != nil {
			got, _ := client.CoreV1().ReplicationControllers("ns").Get(ctx, "web", metav1.GetOptions{})
			t.Fatalf("%s: %v; status %+v", what, err, got.Status)
		}
	}
	waitRC("ReplicaFailure set", func(rc *corev1.ReplicationController) bool {
		return rc.Status.Replicas == 2 && rc.Status.ObservedGeneration == 3 && len(rc.Status.Conditions) == 1 &&
			rc.Status.Conditions[0].Type == corev1.ReplicationControllerReplicaFailure && rc.Status.Conditions[0].Reason == "FailedCreate"
	})
	pods, err := client.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || ref.Name != "web" || ref.UID != rc.UID {
			t.Errorf("pod %s controller = %+v", p.Name, ref)
		}
	}
	scaled, err := client.CoreV1().ReplicationControllers("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scaled.Spec.Replicas = ptr.To[int32](2)
	scaled.Generation = 4
	if _, err := client.CoreV1().ReplicationControllers("ns").Update(ctx, scaled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRC("ReplicaFailure cleared", func(rc *corev1.ReplicationController) bool {
		return rc.Status.Replicas == 2 && rc.Status.ObservedGeneration == 4 && len(rc.Status.Conditions) == 0 &&
			rc.Status.FullyLabeledReplicas == 2
	})
}
