package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/peers"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const kcmJobYAML = `apiVersion: batch/v1
kind: Job
metadata:
  name: kcm-job
spec:
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: sleeper
        image: sleeper:latest
        imagePullPolicy: IfNotPresent
        args: ["1"]
`

const kcmStatefulSetYAML = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: kcm-sts
spec:
  serviceName: kcm-sts
  replicas: 1
  selector:
    matchLabels:
      app: kcm-sts
  template:
    metadata:
      labels:
        app: kcm-sts
    spec:
      containers:
      - name: sleeper
        image: sleeper:latest
        imagePullPolicy: IfNotPresent
`

// TestKubeControllerManagerRunsJobsAndStatefulSets: with `--controllers=*,-job,-statefulset`
// wasmplane leaves Jobs and StatefulSets to the real kube-controller-manager v1.37.2,
// which runs them against wasmplane's API server: a Job completes and a StatefulSet
// scales to 3, with the events of kube-controller-manager's controllers and none of
// wasmplane's.
func TestKubeControllerManagerRunsJobsAndStatefulSets(t *testing.T) {
	dir := peers.DefaultDir()
	if !peers.Available(dir, "kube-controller-manager") {
		t.Skipf("no kube-controller-manager in %s (set WASMPLANE_PEERS to the directory /work/shared/tools/k8s-peers/build.sh fills)", dir)
	}
	s := testserver.Start(t, func(c *server.Config) {
		c.Controllers.Selection = server.ControllerSelection{"*", "-job", "-statefulset"}
	})
	testserver.StartNamedWASINode(t, s, "node-1", modules, "sleeper")
	e := &workloadsEnv{s: s, cs: s.Clientset(t, false)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pki := filepath.Join(s.DataDir, "pki")
	kcm, err := peers.StartControllerManager(ctx, dir, t.TempDir(), peers.ControllerManagerOptions{
		Kubeconfig: s.KubeconfigPath(), ServiceAccountKey: filepath.Join(pki, "sa.key"), RootCA: filepath.Join(pki, "ca.crt"),
		Controllers: "job-controller,statefulset-controller"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kcm.Stop)

	e.kubectl(t, kcmJobYAML, "create", "-f", "-")
	e.kubectl(t, kcmStatefulSetYAML, "create", "-f", "-")
	e.poll(t, "kcm-job to complete", 2*time.Minute, func(ctx context.Context) (bool, error) {
		j, err := e.cs.BatchV1().Jobs("default").Get(ctx, "kcm-job", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return j.Status.Succeeded == 2, nil
			}
		}
		return false, nil
	})
	e.kubectl(t, "", "scale", "statefulset", "kcm-sts", "--replicas=3")
	e.poll(t, "kcm-sts to have 3 ready replicas", 2*time.Minute, func(ctx context.Context) (bool, error) {
		ss, err := e.cs.AppsV1().StatefulSets("default").Get(ctx, "kcm-sts", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ss.Status.ReadyReplicas == 3 && ss.Status.ObservedGeneration == ss.Generation, nil
	})
	for i := range 3 {
		if _, err := e.cs.CoreV1().Pods("default").Get(ctx, fmt.Sprintf("kcm-sts-%d", i), metav1.GetOptions{}); err != nil {
			t.Errorf("StatefulSet pod kcm-sts-%d: %v", i, err)
		}
	}
	// Who created the pods: kube-controller-manager's controllers record their own names
	// as the events' source, wasmplane's "controller-manager".
	evs, err := e.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for kind, name := range map[string]string{"Job": "kcm-job", "StatefulSet": "kcm-sts"} {
		sources := map[string]int{}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name && ev.Reason == "SuccessfulCreate" {
				sources[ev.Source.Component]++
			}
		}
		want := map[string]string{"Job": "job-controller", "StatefulSet": "statefulset-controller"}[kind]
		if sources[want] == 0 || len(sources) != 1 {
			t.Errorf("SuccessfulCreate events of %s %s by source: %v, want only %s", kind, name, sources, want)
		}
	}
}
