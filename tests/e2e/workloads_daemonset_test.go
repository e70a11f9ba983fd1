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

const dsYAML = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels:
      app: agent
  template:
    metadata:
      labels:
        app: agent
    spec:
      containers:
      - name: sleeper
        image: sleeper:latest
        imagePullPolicy: IfNotPresent
`

func testDaemonSet(t *testing.T, e *workloadsEnv) {
	ctx := context.Background()
	e.kubectl(t, dsYAML, "create", "-f", "-")
	rollout := func() *appsv1.DaemonSet {
		t.Helper()
		e.kubectl(t, "", "rollout", "status", "ds/agent", "--timeout=90s")
		ds, err := e.cs.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	ds := rollout()
	if s := ds.Status; s.DesiredNumberScheduled != 2 || s.CurrentNumberScheduled != 2 || s.NumberReady != 2 ||
		s.NumberAvailable != 2 || s.UpdatedNumberScheduled != 2 || s.NumberMisscheduled != 0 || s.ObservedGeneration != ds.Generation {
		t.Fatalf("status = %+v", s)
	}
	// One pod per node, placed by node affinity and bound by the scheduler, with the
	// daemon tolerations.
	nodes := map[string]bool{}
	var firstHash string
	for _, p := range live(e.pods(t, "app=agent")) {
		nodes[p.Spec.NodeName] = true
		firstHash = p.Labels[appsv1.ControllerRevisionHashLabelKey]
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || terms[0].MatchFields[0].Values[0] != p.Spec.NodeName {
			t.Errorf("pod %s on %s has node affinity %+v", p.Name, p.Spec.NodeName, terms)
		}
		if !tolerates(p.Spec.Tolerations, corev1.TaintNodeUnreachable) || !tolerates(p.Spec.Tolerations, corev1.TaintNodeUnschedulable) {
			t.Errorf("pod %s lacks the daemon tolerations: %+v", p.Name, p.Spec.Tolerations)
		}
	}
	if !nodes["node-1"] || !nodes["node-2"] || len(nodes) != 2 {
		t.Fatalf("pods on nodes %v, want one on each of node-1 and node-2", nodes)
	}
	out := e.kubectl(t, "", "get", "ds", "agent")
	if !strings.Contains(out, "UP-TO-DATE") || !strings.Contains(out, "NODE SELECTOR") {
		t.Errorf("kubectl get ds:\n%s", out)
	}

	// A rolling update to a second revision, then back with rollout undo.
	e.kubectl(t, "", "set", "env", "ds/agent", "MODE=v2")
	rollout()
	pods := live(e.pods(t, "app=agent"))
	for _, p := range pods {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] == firstHash || len(p.Spec.Containers[0].Env) != 1 {
			t.Errorf("pod %s was not updated: hash %s env %v", p.Name, p.Labels[appsv1.ControllerRevisionHashLabelKey], p.Spec.Containers[0].Env)
		}
	}
	if out := e.kubectl(t, "", "rollout", "history", "ds/agent"); !strings.Contains(out, "\n1 ") || !strings.Contains(out, "\n2 ") {
		t.Errorf("kubectl rollout history:\n%s", out)
	}
	e.kubectl(t, "", "rollout", "undo", "ds/agent")
	ds = rollout()
	if len(ds.Spec.Template.Spec.Containers[0].Env) != 0 {
		t.Errorf("undo left the template at %+v", ds.Spec.Template.Spec.Containers[0])
	}
	for _, p := range live(e.pods(t, "app=agent")) {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != firstHash {
			t.Errorf("after undo pod %s has hash %s, want the first revision's %s", p.Name, p.Labels[appsv1.ControllerRevisionHashLabelKey], firstHash)
		}
	}
	revs, err := e.cs.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
	if err != nil {
		t.Fatal(err)
	}
	numbers := map[string]int64{}
	for _, r := range revs.Items {
		numbers[r.Labels[appsv1.ControllerRevisionHashLabelKey]] = r.Revision
	}
	if len(numbers) != 2 || numbers[firstHash] != 3 {
		t.Errorf("revisions by hash %v: want two, the first template renumbered 3", numbers)
	}

	// A node selector only node-1 matches: the pod on node-2 goes.
	if _, err := e.cs.CoreV1().Nodes().Patch(ctx, "node-1", "application/strategic-merge-patch+json",
		[]byte(`{"metadata":{"labels":{"role":"agent"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kubectl(t, "", "patch", "ds", "agent", "-p", `{"spec":{"template":{"spec":{"nodeSelector":{"role":"agent"}}}}}`)
	e.poll(t, "the DaemonSet to leave node-2", 60*time.Second, func(ctx context.Context) (bool, error) {
		ds, err := e.cs.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods := e.pods(t, "app=agent")
		s := ds.Status
		return s.ObservedGeneration == ds.Generation && s.DesiredNumberScheduled == 1 && s.NumberAvailable == 1 &&
			s.UpdatedNumberScheduled == 1 && len(pods) == 1 && pods[0].Spec.NodeName == "node-1", nil
	})
}

func tolerates(ts []corev1.Toleration, key string) bool {
	for _, t := range ts {
		if t.Key == key && t.Operator == corev1.TolerationOpExists {
			return true
		}
	}
	return false
}
