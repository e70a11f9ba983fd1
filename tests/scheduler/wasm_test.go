package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/examples/scheduling/native"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { wasmtest.Main(m) }

var (
	filterHooks = []wasmv1.Hook{wasmv1.HookFilter}
	scoreHooks  = []wasmv1.Hook{wasmv1.HookScore}
)

// TestWasmPluginsPlaceLikeNativeTwins: a tenant's WASM Filter (node-label-filter) and
// Score (label-score) place pods exactly where their native Go twins rank the nodes, and
// the guest's rejection reason reaches the pod's FailedScheduling condition.
func TestWasmPluginsPlaceLikeNativeTwins(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	mods := wasmtest.GoAll(t, nodeLabelFilterPkg, labelScorePkg)
	e := startWasmEnv(t)
	const ns = "place"
	e.createNamespace(t, ns)
	prio := []string{"40", "90", "10", "70", "100", "55", "abc", "85", "", "60", "35", "95"}
	var infos []*framework.NodeInfo
	for i, p := range prio {
		// One 1500m pod fills a 2-CPU node, so pod k lands on the k-th best node.
		n := nodeSpec{name: nodeName(i), cpu: "2", mem: "8Gi", labels: map[string]string{"disk": "ssd"}}
		if i%3 == 0 {
			n.labels["disk"] = "hdd"
		}
		if p != "" {
			n.labels["example.com/priority"] = p
		}
		e.createNode(t, n)
		ni := framework.NewNodeInfo()
		ni.SetNode(makeNode(n))
		infos = append(infos, ni)
	}
	e.apply(t, ns, "disk", pluginSpec(e.push(t, mods[nodeLabelFilterPkg]), filterHooks, `{"label":"disk","values":["ssd"]}`, 0))
	e.apply(t, ns, "prio", pluginSpec(e.push(t, mods[labelScorePkg]), scoreHooks, `{"label":"example.com/priority"}`, 100))

	// The native twins' ranking of the nodes.
	filter := &native.NodeLabelFilter{PluginName: "disk", Label: "disk", Values: []string{"ssd"}}
	score := &native.LabelScore{PluginName: "prio", Label: "example.com/priority"}
	type ranked struct {
		name  string
		score int64
	}
	var want []ranked
	for _, ni := range infos {
		if filter.Filter(context.Background(), nil, nil, ni).IsSuccess() {
			s, _ := score.Score(context.Background(), nil, nil, ni)
			want = append(want, ranked{ni.Node().Name, s})
		}
	}
	slices.SortStableFunc(want, func(a, b ranked) int { return int(b.score - a.score) })
	// Ties ("abc" and a missing label both score 0) may go either way: only the
	// distinct-score prefix has one right answer per pod.
	for i, w := range want {
		name := fmt.Sprintf("p-%02d", i)
		p := basePod(ns, name)
		p.Spec.Containers[0].Resources = requests("1500m", "1Gi")
		e.createPod(t, p)
		got := e.waitBound(t, ns, name, 30*time.Second)
		if w.score == 0 {
			if !slices.ContainsFunc(want, func(r ranked) bool { return r.score == 0 && r.name == got.Spec.NodeName }) {
				t.Fatalf("%s landed on %s, not one of the feasible nodes scored 0", name, got.Spec.NodeName)
			}
			continue
		}
		if got.Spec.NodeName != w.name {
			t.Fatalf("%s landed on %s; the native twins rank %s next (score %d)", name, got.Spec.NodeName, w.name, w.score)
		}
	}
	// Every ssd node is full now: the next pod fits nowhere, and the hdd nodes are
	// rejected with the guest's own words.
	p := basePod(ns, "no-room")
	p.Spec.Containers[0].Resources = requests("1500m", "1Gi")
	e.createPod(t, p)
	cond := e.waitUnschedulable(t, ns, "no-room", 30*time.Second)
	if !strings.Contains(cond.Message, "node label disk=hdd is not one of [ssd]") || !strings.Contains(cond.Message, " nodes are available: ") {
		t.Errorf("FailedScheduling message lacks the guest's reason: %q", cond.Message)
	}
	if n := schedulerCounter(t, e.client, "scheduler_schedule_attempts_total", map[string]string{"result": "error"}); n != 0 {
		t.Errorf("%v scheduling attempts failed with an error", n)
	}
}

// TestWasmHotSwapUnderLoad updates a plugin object's config while 200 pods are being
// scheduled: no attempt fails, and pods after the swap follow the new configuration.
func TestWasmHotSwapUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	mods := wasmtest.GoAll(t, labelScorePkg)
	e := startWasmEnv(t)
	const ns = "swap"
	e.createNamespace(t, ns)
	for i := 0; i < 4; i++ {
		labels := map[string]string{"rank-a": "10", "rank-b": "10"}
		if i == 0 {
			labels["rank-a"] = "100"
		}
		if i == 1 {
			labels["rank-b"] = "100"
		}
		// Room for every pod on one node: the preferred node must never be full.
		e.createNode(t, nodeSpec{name: nodeName(i), cpu: "64", mem: "256Gi", pods: "500", labels: labels})
	}
	digest := e.push(t, mods[labelScorePkg])
	e.apply(t, ns, "rank", pluginSpec(digest, scoreHooks, `{"label":"rank-a"}`, 100))
	e.createPod(t, tinyPod(ns, "probe"))
	if got := e.waitBound(t, ns, "probe", 30*time.Second); got.Spec.NodeName != nodeName(0) {
		t.Fatalf("probe on %s; rank-a prefers %s", got.Spec.NodeName, nodeName(0))
	}

	const total = 200
	var created atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := 0; i < total; i++ {
			if _, err := e.client.CoreV1().Pods(ns).Create(context.Background(), tinyPod(ns, fmt.Sprintf("p-%03d", i)), metav1.CreateOptions{}); err != nil {
				done <- err
				return
			}
			created.Add(1)
		}
		done <- nil
	}()
	waitFor(t, 30*time.Second, "50 pods created", func() (bool, error) { return created.Load() >= 50, nil })
	e.apply(t, ns, "rank", pluginSpec(digest, scoreHooks, `{"label":"rank-b"}`, 100))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i++ {
		e.waitBound(t, ns, fmt.Sprintf("p-%03d", i), 60*time.Second)
	}
	for _, result := range []string{"error", "unschedulable"} {
		if n := schedulerCounter(t, e.client, "scheduler_schedule_attempts_total", map[string]string{"result": result}); n != 0 {
			t.Errorf("%v scheduling attempts ended %q during the swap", n, result)
		}
	}
	if n := schedulerCounter(t, e.client, "scheduler_schedule_attempts_total", map[string]string{"result": "scheduled"}); n < total+1 {
		t.Errorf("%v attempts scheduled, want at least %d", n, total+1)
	}
	// The WASM plugin is observed like any plugin (10 % of cycles are sampled; over 200
	// pods at least one is), labelled with its framework name.
	for _, point := range []string{"PreScore", "Score"} {
		if n := schedulerCounter(t, e.client, "scheduler_plugin_execution_duration_seconds_count",
			map[string]string{"plugin": "wasm:swap/rank", "extension_point": point}); n == 0 {
			t.Errorf("no %s latency recorded for plugin wasm:swap/rank", point)
		}
	}
	// The WASM host's own metrics are served too, labelled with the runtime's owner.
	if n := schedulerCounter(t, e.client, "wasmplane_wasm_calls_total", map[string]string{"component": "scheduler", "hook": "score"}); n == 0 {
		t.Error("no wasmplane_wasm_calls_total{component=\"scheduler\",hook=\"score\"} on /metrics")
	}
	byNode := podsByNode(t, e.client, ns)
	if byNode[nodeName(0)] == 0 || byNode[nodeName(1)] == 0 {
		t.Errorf("pods by node %v: want some on %s (before the swap) and some on %s (after)", byNode, nodeName(0), nodeName(1))
	}
	for i := 0; i < 10; i++ {
		name := "after-" + strconv.Itoa(i)
		e.createPod(t, tinyPod(ns, name))
		if got := e.waitBound(t, ns, name, 30*time.Second); got.Spec.NodeName != nodeName(1) {
			t.Fatalf("%s landed on %s after the swap; rank-b prefers %s", name, got.Spec.NodeName, nodeName(1))
		}
	}
}

// TestWasmTenantPluginScope: a namespaced plugin filters only its namespace's pods, and
// deleting it restores the default behaviour.
func TestWasmTenantPluginScope(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	mods := wasmtest.GoAll(t, nodeLabelFilterPkg)
	e := startWasmEnv(t)
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		e.createNamespace(t, ns)
	}
	for i := 0; i < 4; i++ {
		n := nodeSpec{name: nodeName(i), cpu: "4", mem: "8Gi", labels: map[string]string{}}
		if i == 3 {
			n.labels["tenant-a"] = "yes"
		}
		e.createNode(t, n)
	}
	e.apply(t, "tenant-a", "only-mine", pluginSpec(e.push(t, mods[nodeLabelFilterPkg]), filterHooks, `{"label":"tenant-a"}`, 0))
	pinned := func(ns, name, node string) *v1.Pod {
		p := basePod(ns, name)
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		return p
	}
	for i := 0; i < 3; i++ {
		name := "mine-" + strconv.Itoa(i)
		e.createPod(t, basePod("tenant-a", name))
		if got := e.waitBound(t, "tenant-a", name, 30*time.Second); got.Spec.NodeName != nodeName(3) {
			t.Fatalf("tenant-a pod on %s; its plugin admits only %s", got.Spec.NodeName, nodeName(3))
		}
	}
	// Another tenant's pod is not filtered: it lands on a node without the label.
	e.createPod(t, pinned("tenant-b", "theirs", nodeName(0)))
	if got := e.waitBound(t, "tenant-b", "theirs", 30*time.Second); got.Spec.NodeName != nodeName(0) {
		t.Fatalf("tenant-b pod on %s", got.Spec.NodeName)
	}
	// A tenant-a pod pinned to an unlabelled node is unschedulable, with the reason.
	e.createPod(t, pinned("tenant-a", "pinned", nodeName(0)))
	cond := e.waitUnschedulable(t, "tenant-a", "pinned", 30*time.Second)
	if !strings.Contains(cond.Message, `node lacks label "tenant-a"`) {
		t.Errorf("message %q lacks the plugin's reason", cond.Message)
	}
	// Deleting the plugin restores the default: the pinned pod is scheduled.
	e.deletePlugin(t, "tenant-a", "only-mine")
	if got := e.waitBound(t, "tenant-a", "pinned", 60*time.Second); got.Spec.NodeName != nodeName(0) {
		t.Fatalf("pinned pod on %s", got.Spec.NodeName)
	}
	if n := schedulerCounter(t, e.client, "scheduler_schedule_attempts_total", map[string]string{"result": "error"}); n != 0 {
		t.Errorf("%v scheduling attempts failed with an error", n)
	}
}
