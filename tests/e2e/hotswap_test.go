package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// waveReplicas is the size of the Deployment TestHotSwapDuringRollout rolls.
const waveReplicas = 30

// TestHotSwapDuringRollout replaces the validate plugin's module and config again and
// again while a 30-pod rolling update is under way, and meanwhile sends pod creates (dry
// run, so that admission runs in full and nothing is stored) that the plugin must admit or
// deny exactly as before: no request fails because of a swap, the ReplicaSets never
// report a FailedCreate, and the rollout completes.
func TestHotSwapDuringRollout(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t, 3*time.Minute)
	admin := c.adminKubeconfig()
	const ns = "swap"
	c.createNamespaces(ns)
	c.importImage(artifacts.workload(t, "counter"), "counter:1")
	// Two builds of require-labels (stripped and not): the same behaviour, two digests.
	modules := []string{artifacts.plugin(t, requireLabels, false), artifacts.plugin(t, requireLabels, true)}
	// Two configs that the template satisfies and that both deny a pod without "team".
	configs := []string{c.writeFile("team.json", `{"labels":["team"]}`), c.writeFile("team-app.json", `{"labels":["team","app"]}`)}
	version := func(i int) []string {
		return []string{"--module", modules[i%2], "--config", configs[(i/2)%2], "--hooks", "validate", "--rules", "pods:CREATE"}
	}
	c.mustPluginApply(admin, "require-team", ns, version(0)...)

	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "wave"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](waveReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "wave"}},
			// Small steps, each waiting a second of readiness: pods are created
			// throughout the rollout, not in one burst.
			MinReadySeconds: 1,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(3)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "wave", "team": "blue"}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{Name: "counter", Image: "counter:1", Args: []string{"1s"}}}},
			},
		},
	}
	if _, err := c.admin.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Deployment: %v", err)
	}
	waitRolledOut(t, c, ns, "wave", 1)

	// Every goroutine below ends before the test does: the deferred calls stop the
	// hammer and the watch (LIFO), then wait.
	var wg sync.WaitGroup
	defer wg.Wait()
	// Watch the ReplicaSets for a ReplicaFailure condition during the swaps.
	rsWatch, err := c.admin.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rsWatch.Stop()
	var mu sync.Mutex
	var rsFailures []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev := range rsWatch.ResultChan() {
			rs, ok := ev.Object.(*appsv1.ReplicaSet)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			for _, cond := range rs.Status.Conditions {
				if cond.Type == appsv1.ReplicaSetReplicaFailure && cond.Status == corev1.ConditionTrue {
					mu.Lock()
					rsFailures = append(rsFailures, rs.Name+": "+cond.Reason+": "+cond.Message)
					mu.Unlock()
				}
			}
		}
	}()

	// Admission traffic of our own: allowed and denied pods, checked one by one.
	hctx, stopHammer := context.WithCancel(ctx)
	defer stopHammer()
	h := &hammer{}
	for worker := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.run(hctx, c, ns, worker)
		}()
	}

	// The rolling update: a new template, 30 new pods in small steps.
	dep, err := c.admin.AppsV1().Deployments(ns).Get(ctx, "wave", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Annotations = map[string]string{"wave": "2"}
	dep, err = c.admin.AppsV1().Deployments(ns).Update(ctx, dep, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("starting the rolling update: %v", err)
	}
	swaps, lastGen := 0, int64(0)
	var swapErrs, conflicts []error
	var updatedAtSwaps []int32
	loadedGens := map[int64]bool{}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 150*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := c.admin.AppsV1().Deployments(ns).Get(ctx, "wave", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if rolledOut(cur, dep.Generation) {
			return true, nil
		}
		// Which generations the server reports loaded: the swaps take effect mid-rollout.
		if obj, err := c.pluginResource(ns).Get(ctx, "require-team", metav1.GetOptions{}); err == nil {
			phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
			observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
			if phase == "Loaded" {
				loadedGens[observed] = true
			}
		}
		swaps++
		gen, err := c.pluginApply(admin, "require-team", ns, version(swaps)...)
		// The server writes the plugin's status after every load; `plugin apply` reads
		// the object and updates it with that resourceVersion, so a status write in
		// between makes it fail with a Conflict. A user would run it again: so do we,
		// and report the conflicts below.
		for try := 0; err != nil && strings.Contains(err.Error(), "the object has been modified") && try < 5; try++ {
			conflicts = append(conflicts, err)
			gen, err = c.pluginApply(admin, "require-team", ns, version(swaps)...)
		}
		if err != nil {
			swapErrs = append(swapErrs, err)
			return false, nil
		}
		lastGen = gen
		if cur.Status.ObservedGeneration >= dep.Generation {
			updatedAtSwaps = append(updatedAtSwaps, cur.Status.UpdatedReplicas)
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the rolling update did not complete: %v", err)
	}
	c.waitPluginLoaded("require-team", ns, lastGen)
	stopHammer()
	rsWatch.Stop()
	wg.Wait()
	allowed, denied, failures := h.results()
	t.Logf("%d swaps during the rollout (updated replicas at each, once observed: %v); %d generations seen loaded; %d allowed and %d denied as intended by the plugin, %d unexpected",
		swaps, updatedAtSwaps, len(loadedGens), allowed, denied, len(failures))

	if len(swapErrs) > 0 {
		t.Errorf("plugin apply failed %d times: %v", len(swapErrs), swapErrs)
	}
	if len(conflicts) > 0 {
		t.Errorf("`wasmplane plugin apply` failed %d times in %d runs with a Conflict against the server's own status writes (kubectl apply would not): %v",
			len(conflicts), swaps+len(conflicts), conflicts[0])
	}
	if mid := countBelow(updatedAtSwaps, waveReplicas); mid < 2 {
		t.Errorf("swaps at updated replicas %v: want at least two mid-rollout", updatedAtSwaps)
	}
	if len(loadedGens) < 3 {
		t.Errorf("the server reported only generations %v loaded during the rollout: the swaps did not take effect mid-rollout", loadedGens)
	}
	if allowed == 0 || denied == 0 {
		t.Errorf("admission traffic: %d allowed, %d denied: want both", allowed, denied)
	}
	for _, f := range failures {
		t.Errorf("request failed during the swaps: %s", f)
	}
	for _, f := range rsFailures {
		t.Errorf("ReplicaSet reported a failure during the swaps: %s", f)
	}
	events, err := c.admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == "FailedCreate" {
			t.Errorf("FailedCreate event on %s/%s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
	// The plugin runs the last version applied.
	final := mustRead(t, modules[swaps%2])
	sum := sha256.Sum256(final)
	obj, err := c.pluginResource(ns).Get(ctx, "require-team", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(obj.Object, "status", "digest"); strings.TrimPrefix(got, "sha256:") != hex.EncodeToString(sum[:]) {
		t.Errorf("plugin status digest %q, want the last module applied (%x)", got, sum)
	}
	// 30 new pods, all Running.
	waitfor.Condition(t, 60*time.Second, "30 Running pods of the new template", func(ctx context.Context) (bool, error) {
		l, err := c.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=wave"})
		if err != nil {
			return false, nil
		}
		n := 0
		for i := range l.Items {
			if l.Items[i].Annotations["wave"] == "2" && podRunning(&l.Items[i]) {
				n++
			}
		}
		return n == waveReplicas && len(l.Items) == waveReplicas, nil
	})
}

func countBelow(xs []int32, limit int32) int {
	n := 0
	for _, x := range xs {
		if x < limit {
			n++
		}
	}
	return n
}

// rolledOut tells whether a Deployment completed the rollout of generation gen.
func rolledOut(d *appsv1.Deployment, gen int64) bool {
	s := d.Status
	return s.ObservedGeneration >= gen && s.UpdatedReplicas == *d.Spec.Replicas && s.Replicas == *d.Spec.Replicas &&
		s.AvailableReplicas == *d.Spec.Replicas && s.ReadyReplicas == *d.Spec.Replicas
}

func waitRolledOut(t *testing.T, c *cluster, ns, name string, gen int64) {
	t.Helper()
	waitfor.Condition(t, 120*time.Second, "deployment "+name+" to roll out", func(ctx context.Context) (bool, error) {
		d, err := c.admin.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && rolledOut(d, gen), nil
	})
}

// hammer sends dry-run pod creates, alternating a pod the plugin must admit and one it
// must deny, and records every answer that is neither.
type hammer struct {
	allowed, denied atomic.Int64
	mu              sync.Mutex
	failures        []string
}

func (h *hammer) run(ctx context.Context, c *cluster, ns string, worker int) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		good := i%2 == 0
		labels := map[string]string{"app": "probe"}
		if good {
			labels["team"] = "blue"
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d-%d", worker, i), Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "counter:1"}}}}
		_, err := c.admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if ctx.Err() != nil {
			return // the test ended the run; this answer is not the server's
		}
		switch {
		case good && err == nil:
			h.allowed.Add(1)
		case !good && apierrors.IsForbidden(err) && strings.Contains(err.Error(), `"swap/require-team"`) && strings.Contains(err.Error(), `label "team" is required`):
			h.denied.Add(1)
		default:
			h.mu.Lock()
			h.failures = append(h.failures, fmt.Sprintf("%s (must be allowed: %v): %v", p.Name, good, err))
			h.mu.Unlock()
		}
	}
}

func (h *hammer) results() (allowed, denied int64, failures []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.allowed.Load(), h.denied.Load(), append([]string(nil), h.failures...)
}
