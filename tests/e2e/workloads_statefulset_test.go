package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const stsYAML = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      containers:
      - name: sleeper
        image: sleeper:latest
        imagePullPolicy: IfNotPresent
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
`

func testStatefulSet(t *testing.T, e *workloadsEnv) {
	ctx := context.Background()
	sets := e.cs.AppsV1().StatefulSets("default")
	e.kubectl(t, stsYAML, "create", "-f", "-")
	rollout := func(replicas int32) *appsv1.StatefulSet {
		t.Helper()
		e.kubectl(t, "", "rollout", "status", "sts/db", "--timeout=90s")
		var set *appsv1.StatefulSet
		e.poll(t, "the StatefulSet's status", 30*time.Second, func(ctx context.Context) (bool, error) {
			var err error
			set, err = sets.Get(ctx, "db", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := set.Status
			return s.ObservedGeneration == set.Generation && s.Replicas == replicas && s.ReadyReplicas == replicas &&
				s.AvailableReplicas == replicas && s.UpdatedReplicas == replicas && s.CurrentReplicas == replicas &&
				s.CurrentRevision == s.UpdateRevision && len(live(e.pods(t, "app=db"))) == int(replicas), nil
		})
		return set
	}
	set := rollout(2)
	get := func(name string) *corev1.Pod {
		t.Helper()
		p, err := e.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	db0, db1 := get("db-0"), get("db-1")
	if db1.Spec.Hostname != "db-1" || db1.Spec.Subdomain != "db" || db1.Labels[appsv1.PodIndexLabel] != "1" ||
		db1.Labels[appsv1.ControllerRevisionHashLabelKey] != set.Status.UpdateRevision {
		t.Errorf("db-1 identity: hostname %s subdomain %s labels %v", db1.Spec.Hostname, db1.Spec.Subdomain, db1.Labels)
	}
	// OrderedReady: db-1 was created only once db-0 was ready.
	for _, c := range db0.Status.Conditions {
		if c.Type == corev1.PodReady && db1.CreationTimestamp.Before(&c.LastTransitionTime) {
			t.Errorf("db-1 created at %v, before db-0 was ready at %v", db1.CreationTimestamp, c.LastTransitionTime)
		}
	}
	if v := db1.Spec.Volumes; len(v) == 0 || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "data-db-1" {
		t.Errorf("db-1 volumes %+v", v)
	}
	out := e.kubectl(t, "", "get", "sts", "db")
	if !strings.Contains(out, "2/2") {
		t.Errorf("kubectl get sts:\n%s", out)
	}

	e.kubectl(t, "", "scale", "sts", "db", "--replicas=3")
	rollout(3)

	// A rolling update, highest ordinal first, then rollout undo.
	first := set.Status.UpdateRevision
	e.kubectl(t, "", "set", "env", "sts/db", "MODE=v2")
	set = rollout(3)
	if set.Status.UpdateRevision == first {
		t.Fatalf("no new revision: %+v", set.Status)
	}
	if p := get("db-0"); len(p.Spec.Containers[0].Env) != 1 || p.Labels[appsv1.ControllerRevisionHashLabelKey] != set.Status.UpdateRevision {
		t.Errorf("db-0 not updated: %v %v", p.Spec.Containers[0].Env, p.Labels)
	}
	if out := e.kubectl(t, "", "rollout", "history", "sts/db"); !strings.Contains(out, "\n1 ") || !strings.Contains(out, "\n2 ") {
		t.Errorf("kubectl rollout history:\n%s", out)
	}
	e.kubectl(t, "", "rollout", "undo", "sts/db")
	set = rollout(3)
	if set.Status.UpdateRevision != first || len(get("db-2").Spec.Containers[0].Env) != 0 {
		t.Errorf("after undo: status %+v", set.Status)
	}

	// Scaling down removes the highest ordinals and keeps their claims (Retain).
	e.kubectl(t, "", "scale", "sts", "db", "--replicas=1")
	rollout(1)
	if get("db-0").DeletionTimestamp != nil {
		t.Error("db-0 is being deleted")
	}
	for _, c := range []string{"data-db-0", "data-db-1", "data-db-2"} {
		if _, err := e.cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, c, metav1.GetOptions{}); err != nil {
			t.Errorf("claim %s: %v", c, err)
		}
	}
}

const stsDeleteClaimsYAML = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: cache
spec:
  serviceName: cache
  replicas: 2
  podManagementPolicy: Parallel
  persistentVolumeClaimRetentionPolicy:
    whenDeleted: Delete
  selector:
    matchLabels:
      app: cache
  template:
    metadata:
      labels:
        app: cache
    spec:
      containers:
      - name: sleeper
        image: sleeper:latest
        imagePullPolicy: IfNotPresent
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
`

// testStatefulSetDeletesClaims checks whenDeleted: Delete: the claims go with the
// StatefulSet, through the garbage collector.
func testStatefulSetDeletesClaims(t *testing.T, e *workloadsEnv) {
	e.kubectl(t, stsDeleteClaimsYAML, "create", "-f", "-")
	e.kubectl(t, "", "rollout", "status", "sts/cache", "--timeout=90s")
	claims := func(ctx context.Context) (int, error) {
		list, err := e.cs.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{LabelSelector: "app=cache"})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
	if n, err := claims(context.Background()); err != nil || n != 2 {
		t.Fatalf("%d claims (%v), want 2", n, err)
	}
	e.kubectl(t, "", "delete", "sts", "cache")
	e.poll(t, "the claims to be deleted with the StatefulSet", 60*time.Second, func(ctx context.Context) (bool, error) {
		n, err := claims(ctx)
		return n == 0 && len(e.pods(t, "app=cache")) == 0, err
	})
}
