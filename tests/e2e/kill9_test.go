package e2e

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// fleetReplicas is the size of the Deployment TestKill9DuringRollout rolls out.
const fleetReplicas = 50

// TestKill9DuringRollout kills `wasmplane up` with SIGKILL while a 50-pod Deployment of
// long-running WASI programs is coming up — once while the ReplicaSet controller is still
// creating pods, once when some but not all pods run — starts it again on the same data
// dir and port, and checks that the rollout completes: exactly 50 pods of the one
// ReplicaSet, every pod seen before the kill still there, none duplicated (in the API and
// in the runtime), all Running and alive.
func TestKill9DuringRollout(t *testing.T) {
	for _, tc := range []struct {
		name string
		// kill tells, from the pods stored and Running so far, whether to kill now.
		kill func(stored, running int) bool
	}{
		{"while creating pods", func(stored, _ int) bool { return stored > 0 && stored < fleetReplicas }},
		{"while starting pods", func(_, running int) bool { return running > 0 && running < fleetReplicas }},
	} {
		t.Run(tc.name, func(t *testing.T) { testKill9DuringRollout(t, tc.kill) })
	}
}

func testKill9DuringRollout(t *testing.T, kill func(stored, running int) bool) {
	c := newCluster(t)
	ctx := testCtx(t, 3*time.Minute)
	c.importImage(artifacts.workload(t, "counter"), "counter:1")
	const ns = "default"
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](fleetReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fleet"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "fleet"}},
				// counter prints a line a second forever: its log shows it is alive. A
				// short grace period keeps the test's teardown quick.
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{Name: "counter", Image: "counter:1", Args: []string{"1s"}}}},
			},
		},
	}
	// A watch sees each pod as soon as it is stored, so that the kill lands at the
	// intended moment.
	w, err := c.admin.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=fleet"})
	if err != nil {
		t.Fatalf("watching pods: %v", err)
	}
	if _, err := c.admin.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Deployment: %v", err)
	}
	rt := criClient(t, filepath.Join(c.dir, "node", "cri.sock"))
	before := map[string]*corev1.Pod{}
	var rsName string
	running, containersAtKill := 0, -1
	for killed := false; !killed; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the pod watch ended before the kill")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(before, p.Name)
			} else {
				before[p.Name] = p
			}
			running = 0
			for _, p := range before {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			if running >= fleetReplicas {
				t.Fatalf("all %d pods ran before the kill: nothing was interrupted", running)
			}
			if kill(len(before), running) {
				if l, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err == nil {
					containersAtKill = len(l.Containers)
				}
				c.proc.kill9(t)
				killed = true
				if o := metav1.GetControllerOf(p); o != nil {
					rsName = o.Name
				}
			}
		case <-ctx.Done():
			t.Fatal("the rollout never reached the moment to kill")
		}
	}
	w.Stop()
	t.Logf("killed with %d pods stored, %d Running in the API, %d containers in the runtime (ReplicaSet %s)", len(before), running, containersAtKill, rsName)

	start := time.Now()
	c.restart()
	if out, err := c.kubectl(c.adminKubeconfig(), "", "rollout", "status", "deployment/fleet", "--timeout=150s"); err != nil {
		t.Fatalf("the rollout did not complete after the restart: %v\n%s", err, out)
	}
	// Every pod must run; the rollout counts ready pods, wait for the phase as well and
	// watch that the ReplicaSet never exceeds its size.
	var pods []corev1.Pod
	maxSeen := 0
	waitfor.Condition(t, 90*time.Second, fmt.Sprintf("%d Running pods", fleetReplicas), func(ctx context.Context) (bool, error) {
		l, err := c.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=fleet"})
		if err != nil {
			return false, nil
		}
		maxSeen = max(maxSeen, len(l.Items))
		running := 0
		for i := range l.Items {
			if podRunning(&l.Items[i]) {
				running++
			}
		}
		pods = l.Items
		return len(l.Items) == fleetReplicas && running == fleetReplicas, nil
	})
	t.Logf("all %d pods Running %v after the restart", fleetReplicas, time.Since(start).Round(time.Millisecond))

	t.Run("one ReplicaSet, exactly its pods", func(t *testing.T) {
		if maxSeen > fleetReplicas {
			t.Errorf("saw %d pods after the restart, want at most %d", maxSeen, fleetReplicas)
		}
		rss, err := c.admin.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=fleet"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rss.Items) != 1 || rss.Items[0].Name != rsName {
			t.Fatalf("ReplicaSets %v, want only %s", names(rss.Items), rsName)
		}
		// The controllers' statuses follow the pods' by a sync each; on a loaded machine
		// that lag is visible, so they are awaited, not sampled.
		var rsStatus appsv1.ReplicaSetStatus
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			rs, err := c.admin.AppsV1().ReplicaSets(ns).Get(ctx, rsName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			rsStatus = rs.Status
			s := rs.Status
			return s.Replicas == fleetReplicas && s.ReadyReplicas == fleetReplicas && s.AvailableReplicas == fleetReplicas, nil
		}); err != nil {
			t.Errorf("ReplicaSet status never counted %d ready pods: %+v", fleetReplicas, rsStatus)
		}
		seen := map[string]bool{}
		for i, p := range pods {
			if seen[p.Name] {
				t.Errorf("pod %s listed twice", p.Name)
			}
			seen[p.Name] = true
			if o := metav1.GetControllerOf(&pods[i]); o == nil || o.Name != rsName {
				t.Errorf("pod %s controlled by %+v, want %s", p.Name, o, rsName)
			}
			if p.DeletionTimestamp != nil {
				t.Errorf("pod %s is terminating", p.Name)
			}
		}
		for name := range before {
			if !seen[name] {
				t.Errorf("pod %s, stored before the kill, is gone", name)
			}
		}
		var depStatus appsv1.DeploymentStatus
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			dep, err := c.admin.AppsV1().Deployments(ns).Get(ctx, "fleet", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			depStatus = dep.Status
			s := dep.Status
			return s.UpdatedReplicas == fleetReplicas && s.ReadyReplicas == fleetReplicas && s.AvailableReplicas == fleetReplicas && s.Replicas == fleetReplicas, nil
		}); err != nil {
			t.Errorf("Deployment status never counted %d available pods: %+v", fleetReplicas, depStatus)
		}
	})

	t.Run("one sandbox and one running container per pod in the runtime, as the status says", func(t *testing.T) {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := c.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=fleet"})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			problems, err := runtimeProblems(ctx, rt, l.Items)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = strings.Join(problems, "\n")
			return len(problems) == 0, nil
		})
		if err != nil {
			t.Errorf("the runtime does not hold exactly one ready sandbox and one running container per pod:\n%s", last)
		}
	})

	t.Run("every program is alive: its log grows", func(t *testing.T) {
		// The runtime marks containers that died with the process exited; the kubelet
		// must start them again, not trust stale Running statuses.
		restarts := map[int32]int{}
		for _, p := range pods {
			if len(p.Status.ContainerStatuses) == 1 {
				restarts[p.Status.ContainerStatuses[0].RestartCount]++
			}
		}
		t.Logf("restart counts after the kill (count: pods): %v", restarts)
		first := map[string]string{}
		for _, p := range pods {
			first[p.Name] = lastLogLine(ctx, c, ns, p.Name)
		}
		stale := map[string]bool{}
		for name := range first {
			stale[name] = true
		}
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, false, func(ctx context.Context) (bool, error) {
			for name := range stale {
				if l := lastLogLine(ctx, c, ns, name); strings.HasPrefix(l, "count ") && l != first[name] {
					delete(stale, name)
				}
			}
			return len(stale) == 0, nil
		})
		if err != nil {
			t.Errorf("%d pods' logs did not grow within 30s: %v", len(stale), stale)
		}
	})
}

// lastLogLine returns the last line a pod's container wrote, or the error's text.
func lastLogLine(ctx context.Context, c *cluster, ns, pod string) string {
	b, err := c.admin.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{TailLines: ptr.To[int64](1)}).DoRaw(ctx)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(b))
}

// criClient dials the node's CRI socket as the kubelet does.
func criClient(t *testing.T, socket string) runtimeapi.RuntimeServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dialing %s: %v", socket, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

// runtimeProblems compares the runtime's ready sandboxes and running containers with the
// pods the API holds: one ready sandbox and one running container per pod, and the pod's
// status naming that container.
func runtimeProblems(ctx context.Context, rt runtimeapi.RuntimeServiceClient, pods []corev1.Pod) ([]string, error) {
	byUID := map[string]*corev1.Pod{}
	for i := range pods {
		byUID[string(pods[i].UID)] = &pods[i]
	}
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		return nil, fmt.Errorf("ListPodSandbox: %w", err)
	}
	ctrs, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return nil, fmt.Errorf("ListContainers: %w", err)
	}
	var problems []string
	sandboxOf := map[string]string{} // sandbox id -> pod uid
	sandboxes := map[string]int{}
	for _, sb := range sbs.Items {
		uid := sb.GetMetadata().GetUid()
		if byUID[uid] == nil {
			problems = append(problems, fmt.Sprintf("ready sandbox %s of pod uid %s, which the API does not hold", sb.Id, uid))
			continue
		}
		sandboxOf[sb.Id] = uid
		sandboxes[uid]++
	}
	running := map[string][]string{}
	for _, ct := range ctrs.Containers {
		uid, ok := sandboxOf[ct.PodSandboxId]
		if !ok {
			problems = append(problems, fmt.Sprintf("running container %s in sandbox %s, which is not a ready sandbox of a fleet pod", ct.Id, ct.PodSandboxId))
			continue
		}
		running[uid] = append(running[uid], ct.Id)
	}
	for uid, p := range byUID {
		if sandboxes[uid] != 1 || len(running[uid]) != 1 {
			problems = append(problems, fmt.Sprintf("pod %s: %d ready sandboxes, running containers %v", p.Name, sandboxes[uid], running[uid]))
			continue
		}
		var id string
		if cs := p.Status.ContainerStatuses; len(cs) == 1 {
			_, id, _ = strings.Cut(cs[0].ContainerID, "://")
		}
		if id != running[uid][0] {
			problems = append(problems, fmt.Sprintf("pod %s: status names container %q, the runtime runs %s", p.Name, id, running[uid][0]))
		}
	}
	sort.Strings(problems)
	return problems, nil
}

func names(rss []appsv1.ReplicaSet) []string {
	var out []string
	for _, rs := range rss {
		out = append(out, rs.Name)
	}
	return out
}
