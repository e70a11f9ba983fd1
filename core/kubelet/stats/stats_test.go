package stats

import (
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

// criStats is one pod sandbox's stats at t with its containers' CPU totals.
func criStats(id string, t time.Time, cpu map[string]uint64) *runtimeapi.PodSandboxStats {
	ps := &runtimeapi.PodSandboxStats{Attributes: &runtimeapi.PodSandboxAttributes{Id: id}, Linux: &runtimeapi.LinuxPodSandboxStats{}}
	var sum uint64
	for cid, n := range cpu {
		sum += n
		ps.Linux.Containers = append(ps.Linux.Containers, &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Id: cid},
			Cpu:    &runtimeapi.CpuUsage{Timestamp: t.UnixNano(), UsageCoreNanoSeconds: u64(n)},
			Memory: &runtimeapi.MemoryUsage{Timestamp: t.UnixNano(), WorkingSetBytes: u64(1 << 20)}})
	}
	ps.Linux.Cpu = &runtimeapi.CpuUsage{Timestamp: t.UnixNano(), UsageCoreNanoSeconds: u64(sum)}
	ps.Linux.Memory = &runtimeapi.MemoryUsage{Timestamp: t.UnixNano(), WorkingSetBytes: u64(uint64(len(cpu)) << 20)}
	return ps
}

func TestBuildSummary(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	sandboxes := []*runtimeapi.PodSandbox{
		{Id: "sb1", CreatedAt: t0.UnixNano(), Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns", Uid: "u1"}},
	}
	containers := []*runtimeapi.Container{
		{Id: "c1", PodSandboxId: "sb1", CreatedAt: t0.Add(time.Second).UnixNano(), Metadata: &runtimeapi.ContainerMetadata{Name: "app"}},
	}
	noNode := func() (NodeUsage, bool) { return NodeUsage{}, false }
	for _, tc := range []struct {
		name      string
		rounds    [][]*runtimeapi.PodSandboxStats // stats read by successive summaries
		wantPods  int
		wantCores []uint64 // the app container's usageNanoCores per round (0 = none)
		wantNode  uint64   // the node's cumulative CPU in the last round (its pods' sum)
	}{
		{name: "first reading has no rate", rounds: [][]*runtimeapi.PodSandboxStats{{criStats("sb1", t0, map[string]uint64{"c1": 1e9})}},
			wantPods: 1, wantCores: []uint64{0}, wantNode: 1e9},
		{name: "half a core over two seconds", rounds: [][]*runtimeapi.PodSandboxStats{
			{criStats("sb1", t0, map[string]uint64{"c1": 1e9})}, {criStats("sb1", t0.Add(2*time.Second), map[string]uint64{"c1": 2e9})}},
			wantPods: 1, wantCores: []uint64{0, 5e8}, wantNode: 2e9},
		{name: "a counter going back (restart) gives no rate", rounds: [][]*runtimeapi.PodSandboxStats{
			{criStats("sb1", t0, map[string]uint64{"c1": 5e9})}, {criStats("sb1", t0.Add(time.Second), map[string]uint64{"c1": 1e9})}},
			wantPods: 1, wantCores: []uint64{0, 0}, wantNode: 1e9},
		{name: "not ready sandboxes and not running containers are left out", rounds: [][]*runtimeapi.PodSandboxStats{
			{criStats("gone", t0, map[string]uint64{"c1": 1e9}), criStats("sb1", t0, map[string]uint64{"c1": 1e9, "exited": 7e9})}},
			wantPods: 1, wantCores: []uint64{0}, wantNode: 8e9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProvider(nil, "n1", noNode)
			var s *statsapi.Summary
			for i, round := range tc.rounds {
				s = p.build(sandboxes, containers, round)
				if len(s.Pods) != tc.wantPods {
					t.Fatalf("round %d: %d pods, want %d", i, len(s.Pods), tc.wantPods)
				}
				pod := s.Pods[0]
				if pod.PodRef.Name != "web" || pod.PodRef.Namespace != "ns" || pod.PodRef.UID != "u1" || !pod.StartTime.Time.Equal(t0) {
					t.Errorf("pod ref %+v start %v", pod.PodRef, pod.StartTime)
				}
				if len(pod.Containers) != 1 || pod.Containers[0].Name != "app" || !pod.Containers[0].StartTime.Time.Equal(t0.Add(time.Second)) {
					t.Fatalf("containers %+v", pod.Containers)
				}
				var got uint64
				if c := pod.Containers[0].CPU.UsageNanoCores; c != nil {
					got = *c
				}
				if got != tc.wantCores[i] {
					t.Errorf("round %d: usageNanoCores %d, want %d", i, got, tc.wantCores[i])
				}
			}
			if n := s.Node; n.NodeName != "n1" || n.CPU == nil || *n.CPU.UsageCoreNanoSeconds != tc.wantNode {
				t.Errorf("node %+v, want CPU %d", n, tc.wantNode)
			}
		})
	}
}

func TestParseProc(t *testing.T) {
	stat := "cpu  100 5 50 1000 20 3 2 1 7 0\ncpu0 50 2 25 500 10 1 1 0 0 0\nbtime 1700000000\n"
	cpu, boot, ok := parseProcStat([]byte(stat))
	// user+nice+system+irq+softirq+steal = 161 jiffies of 10 ms.
	if !ok || cpu != 161*uint64(10*time.Millisecond) || boot.Unix() != 1700000000 {
		t.Errorf("parseProcStat: %d %v %v", cpu, boot, ok)
	}
	if _, _, ok := parseProcStat([]byte("intr 1 2\n")); ok {
		t.Error("parseProcStat without a cpu line: ok")
	}
	total, avail, ok := parseMeminfo([]byte("MemTotal:       16000 kB\nMemFree:    1000 kB\nMemAvailable:    6000 kB\n"))
	if !ok || total != 16000<<10 || avail != 6000<<10 {
		t.Errorf("parseMeminfo: %d %d %v", total, avail, ok)
	}
	if _, _, ok := parseMeminfo([]byte("MemTotal: 10 kB\n")); ok {
		t.Error("parseMeminfo without MemAvailable: ok")
	}
}

func TestWriteResourceMetrics(t *testing.T) {
	at := time.UnixMilli(1700000000123)
	p := NewProvider(nil, "n1", func() (NodeUsage, bool) {
		return NodeUsage{Time: at, CPUNanoSeconds: 2500000000, WorkingSetBytes: 1 << 30, UsageBytes: 1 << 30}, true
	})
	s := p.build([]*runtimeapi.PodSandbox{{Id: "sb1", CreatedAt: at.UnixNano(), Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns"}}},
		[]*runtimeapi.Container{{Id: "c1", CreatedAt: at.UnixNano(), Metadata: &runtimeapi.ContainerMetadata{Name: `a"b`}}},
		[]*runtimeapi.PodSandboxStats{criStats("sb1", at, map[string]uint64{"c1": 1e9})})
	var b strings.Builder
	if err := WriteResourceMetrics(&b, s); err != nil {
		t.Fatal(err)
	}
	want := `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="a\"b",namespace="ns",pod="web"} 1 1700000000123
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="a\"b",namespace="ns",pod="web"} 1.048576e+06 1700000000123
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="a\"b",namespace="ns",pod="web"} 1.700000000123e+09 1700000000123
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 2.5 1700000000123
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.073741824e+09 1700000000123
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="ns",pod="web"} 1 1700000000123
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="ns",pod="web"} 1.048576e+06 1700000000123
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
# HELP scrape_error [ALPHA] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE scrape_error gauge
scrape_error 0
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteResourceMetrics(&b, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "\nresource_scrape_error 1\n") || !strings.Contains(got, "\nscrape_error 1\n") || strings.Contains(got, "cpu") {
		t.Errorf("failed scrape:\n%s", got)
	}
}
