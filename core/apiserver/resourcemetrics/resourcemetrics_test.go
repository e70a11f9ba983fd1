package resourcemetrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	kubeletstats "github.com/wasmplane/wasmplane/core/kubelet/stats"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestParseBatch(t *testing.T) {
	scraped := time.UnixMilli(1700000009000)
	at := time.UnixMilli(1700000000123)
	for _, tc := range []struct {
		name    string
		text    string
		node    *Point
		want    map[ContainerKey]Point
		wantErr string
	}{
		{name: "the kubelet's families", text: `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="ns",pod="web"} 1.5 1700000000123
container_memory_working_set_bytes{container="app",namespace="ns",pod="web"} 1.048576e+06 1700000000123
container_start_time_seconds{container="app",namespace="ns",pod="web"} 1.7e+09 1700000000000
node_cpu_usage_seconds_total 2.5 1700000000123
node_memory_working_set_bytes 4096 1700000000123
pod_cpu_usage_seconds_total{namespace="ns",pod="web"} 1.5 1700000000123
resource_scrape_error 0
`, node: &Point{Timestamp: at, CPUNanoSeconds: 2500000000, MemoryBytes: 4096},
			want: map[ContainerKey]Point{{"ns", "web", "app"}: {Timestamp: at, StartTime: time.Unix(1700000000, 0), CPUNanoSeconds: 1500000000, MemoryBytes: 1 << 20}}},
		{name: "no timestamps: the scrape's time; escaped label values; labels in any order", text: `node_cpu_usage_seconds_total 1
node_memory_working_set_bytes 1
container_cpu_usage_seconds_total{pod="w\"x", namespace="ns",container="a\\b"} 0.25
container_memory_working_set_bytes{container="a\\b",namespace="ns",pod="w\"x"} 8
`, node: &Point{Timestamp: scraped, CPUNanoSeconds: 1e9, MemoryBytes: 1},
			want: map[ContainerKey]Point{{"ns", `w"x`, `a\b`}: {Timestamp: scraped, CPUNanoSeconds: 25e7, MemoryBytes: 8}}},
		{name: "a container without memory and a node without CPU are left out", text: `node_memory_working_set_bytes 1
container_cpu_usage_seconds_total{container="a",namespace="ns",pod="p"} 1
container_memory_working_set_bytes{container="b",pod="p"} 1
`, want: map[ContainerKey]Point{}},
		{name: "a bad value", text: "node_cpu_usage_seconds_total one\n", wantErr: "line 1: value of node_cpu_usage_seconds_total"},
		{name: "an unterminated label", text: `container_cpu_usage_seconds_total{container="a} 1` + "\n", wantErr: "unterminated value"},
		{name: "a bad timestamp", text: "node_cpu_usage_seconds_total 1 x\n", wantErr: "timestamp of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ParseBatch(strings.NewReader(tc.text), scraped)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (b.Node == nil) != (tc.node == nil) || (b.Node != nil && !samePoint(*b.Node, *tc.node)) {
				t.Errorf("node %+v, want %+v", b.Node, tc.node)
			}
			if len(b.Containers) != len(tc.want) {
				t.Errorf("containers %+v, want %+v", b.Containers, tc.want)
			}
			for k, w := range tc.want {
				if g, ok := b.Containers[k]; !ok || !samePoint(g, w) {
					t.Errorf("%v: %+v, want %+v", k, g, w)
				}
			}
		})
	}
}

func samePoint(a, b Point) bool {
	return a.Timestamp.Equal(b.Timestamp) && a.StartTime.Equal(b.StartTime) && a.CPUNanoSeconds == b.CPUNanoSeconds && a.MemoryBytes == b.MemoryBytes
}

func TestStoreRates(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	key := ContainerKey{"ns", "web", "app"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	batch := func(at time.Duration, nodeCPU, cpu uint64, start time.Time) map[string]*Batch {
		return map[string]*Batch{"n1": {Node: &Point{Timestamp: t0.Add(at), CPUNanoSeconds: nodeCPU, MemoryBytes: 1 << 30},
			Containers: map[ContainerKey]Point{key: {Timestamp: t0.Add(at), StartTime: start, CPUNanoSeconds: cpu, MemoryBytes: 1 << 20}}}}
	}
	for _, tc := range []struct {
		name            string
		rounds          []map[string]*Batch
		nodeCPU, podCPU string // "" = no metrics
		window          time.Duration
	}{
		{name: "one round: no rate yet", rounds: []map[string]*Batch{batch(0, 1e9, 1e9, t0.Add(-time.Hour))}},
		{name: "two rounds 10 s apart", rounds: []map[string]*Batch{batch(0, 1e9, 1e9, t0.Add(-time.Hour)), batch(10*time.Second, 21e9, 6e9, t0.Add(-time.Hour))},
			nodeCPU: "2", podCPU: "500m", window: 10 * time.Second},
		{name: "a reading no newer keeps the pair", rounds: []map[string]*Batch{batch(0, 1e9, 1e9, t0.Add(-time.Hour)), batch(10*time.Second, 21e9, 6e9, t0.Add(-time.Hour)), batch(10*time.Second, 21e9, 6e9, t0.Add(-time.Hour))},
			nodeCPU: "2", podCPU: "500m", window: 10 * time.Second},
		{name: "a restarted container has no rate", rounds: []map[string]*Batch{batch(0, 1e9, 5e9, t0.Add(-time.Hour)), batch(10*time.Second, 21e9, 1e9, t0.Add(5*time.Second))},
			nodeCPU: "2"},
		{name: "a container started since the last round is rated from its start", rounds: []map[string]*Batch{
			{"n1": {Node: &Point{Timestamp: t0, CPUNanoSeconds: 1e9, MemoryBytes: 1}, Containers: map[ContainerKey]Point{}}},
			batch(10*time.Second, 11e9, 1e9, t0.Add(8*time.Second))},
			nodeCPU: "1", podCPU: "500m", window: 2 * time.Second},
		{name: "a node missing from the last round is forgotten", rounds: []map[string]*Batch{batch(0, 1e9, 1e9, t0), batch(time.Second, 2e9, 2e9, t0), {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			for _, r := range tc.rounds {
				s.Update(r)
			}
			nm, ok := s.NodeMetrics(node)
			if ok != (tc.nodeCPU != "") {
				t.Fatalf("node metrics %v, want %v", ok, tc.nodeCPU != "")
			}
			if ok {
				if cpu := nm.Usage[corev1.ResourceCPU]; cpu.String() != tc.nodeCPU && cpu.MilliValue() != mustMilli(tc.nodeCPU) {
					t.Errorf("node CPU %s, want %s", cpu.String(), tc.nodeCPU)
				}
				if mem := nm.Usage[corev1.ResourceMemory]; mem.String() != "1Gi" || nm.Labels["zone"] != "a" {
					t.Errorf("node memory %s labels %v", mem.String(), nm.Labels)
				}
			}
			pm, ok := s.PodMetrics(pod)
			if ok != (tc.podCPU != "") {
				t.Fatalf("pod metrics %v, want %v", ok, tc.podCPU != "")
			}
			if ok {
				c := pm.Containers[0]
				if cpu := c.Usage[corev1.ResourceCPU]; cpu.MilliValue() != mustMilli(tc.podCPU) || c.Name != "app" {
					t.Errorf("container %s CPU %s, want %s", c.Name, cpu.String(), tc.podCPU)
				}
				if pm.Window.Duration != tc.window || pm.Labels["app"] != "web" || !pm.Timestamp.Time.Equal(t0.Add(10*time.Second)) {
					t.Errorf("pod window %v labels %v timestamp %v", pm.Window.Duration, pm.Labels, pm.Timestamp)
				}
			}
		})
	}
}

func mustMilli(s string) int64 {
	var v float64
	if strings.HasSuffix(s, "m") {
		fmt.Sscan(strings.TrimSuffix(s, "m"), &v)
		return int64(v)
	}
	fmt.Sscan(s, &v)
	return int64(v * 1000)
}

// summaryOf is a node's Summary with pods pods of one container each, at t.
func summaryOf(pods int, t time.Time, cpu uint64) *statsapi.Summary {
	at := metav1.NewTime(t)
	mem := uint64(8 << 20)
	s := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "n1", CPU: &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: &cpu},
		Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: &mem}}}
	for i := range pods {
		s.Pods = append(s.Pods, statsapi.PodStats{PodRef: statsapi.PodReference{Name: fmt.Sprintf("pod-%d", i), Namespace: "default"},
			CPU: &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: &cpu}, Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: &mem},
			Containers: []statsapi.ContainerStats{{Name: "app", StartTime: metav1.NewTime(t.Add(-time.Hour)),
				CPU: &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: &cpu}, Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: &mem}}}})
	}
	return s
}

// TestScraperRound scrapes a kubelet's text (written by the kubelet's own writer) twice
// and reads the rates; a node that is not Ready is not scraped.
func TestScraperRound(t *testing.T) {
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	round := 0
	kubelet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// One core over each second between rounds.
		_ = kubeletstats.WriteResourceMetrics(w, summaryOf(3, t0.Add(time.Duration(round)*time.Second), uint64(round)*1e9))
		round++
	}))
	defer kubelet.Close()
	readyNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	notReady := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	scraped := map[string]int{}
	s := NewStore()
	sc := NewScraper(Config{
		Nodes: func(context.Context) ([]*corev1.Node, error) { return []*corev1.Node{readyNode, notReady}, nil },
		URL: func(n *corev1.Node) (string, error) {
			scraped[n.Name]++
			return kubelet.URL + "/metrics/resource", nil
		},
		Client: kubelet.Client(), Resolution: time.Second,
	}, s)
	sc.Round(context.Background())
	sc.Round(context.Background())
	if scraped["n1"] != 2 || scraped["n2"] != 0 {
		t.Errorf("scrapes by node: %v", scraped)
	}
	nm, ok := s.NodeMetrics(readyNode)
	if !ok || nm.Usage.Cpu().MilliValue() != 1000 || nm.Window.Duration != time.Second {
		t.Errorf("node metrics %v %+v", ok, nm)
	}
	pm, ok := s.PodMetrics(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-2", Namespace: "default"}})
	if !ok || len(pm.Containers) != 1 || pm.Containers[0].Usage.Cpu().MilliValue() != 1000 || pm.Containers[0].Usage.Memory().Value() != 8<<20 {
		t.Errorf("pod metrics %v %+v", ok, pm)
	}
}

// BenchmarkScrape is one scrape of a node running N pods: the kubelet writing its text
// from a Summary, HTTP on loopback, parsing, and the store's update.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{10, 110, 500} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			t0 := time.Now()
			sum := summaryOf(n, t0, 1e9)
			kubelet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_ = kubeletstats.WriteResourceMetrics(w, sum)
			}))
			defer kubelet.Close()
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
			sc := NewScraper(Config{
				Nodes:  func(context.Context) ([]*corev1.Node, error) { return []*corev1.Node{node}, nil },
				URL:    func(*corev1.Node) (string, error) { return kubelet.URL, nil },
				Client: kubelet.Client(), Resolution: time.Minute,
			}, NewStore())
			b.ReportAllocs()
			for b.Loop() {
				sc.Round(context.Background())
			}
		})
	}
}
