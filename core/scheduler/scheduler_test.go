package scheduler

import (
	"reflect"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/plugins/noderesources"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNumFeasibleNodesToFind(t *testing.T) {
	p := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		pct  *int32
		all  int
		want int
	}{
		{nil, 10, 10},
		{nil, 99, 99},
		{nil, 100, 100},  // 49 % of 100 = 49 → at least 100
		{nil, 200, 100},  // 49 % = 98 → at least 100
		{nil, 1000, 420}, // 50 − 8 = 42 %
		{nil, 5000, 500}, // 50 − 40 = 10 %
		{nil, 6000, 300}, // 50 − 48 = 2 % → 5 %
		{p(10), 500, 100},
		{p(30), 1000, 300},
		{p(100), 5000, 5000},
		{p(0), 5000, 500},
	} {
		if got := NumFeasibleNodesToFind(tc.pct, tc.all); got != tc.want {
			t.Errorf("pct=%v nodes=%d: got %d, want %d", tc.pct, tc.all, got, tc.want)
		}
	}
}

const configYAML = `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 8
percentageOfNodesToScore: 20
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packing
  provider: ClusterAutoscalerProvider
  percentageOfNodesToScore: 50
- schedulerName: custom
  plugins:
    multiPoint:
      disabled:
      - name: ImageLocality
    score:
      enabled:
      - name: NodeAffinity
        weight: 7
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources:
        - name: cpu
          weight: 1
        requestedToCapacityRatio:
          shape:
          - {utilization: 0, score: 10}
          - {utilization: 100, score: 0}
`

func TestConfigAndProfiles(t *testing.T) {
	cfg, err := ParseConfig([]byte(configYAML))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Parallelism != 8 || *cfg.PercentageOfNodesToScore != 20 || *cfg.LeaderElection.LeaderElect {
		t.Fatalf("config %+v", cfg)
	}
	client := fake.NewSimpleClientset()
	s, err := New(client, informers.NewSharedInformerFactory(client, 0), Config{Configuration: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.ProfileNames(); !reflect.DeepEqual(got, []string{"bin-packing", "custom", "default-scheduler"}) {
		t.Fatalf("profiles %v", got)
	}
	def := s.Profile("default-scheduler").Plugins().PluginNames()
	wantScore := []string{"TaintToleration:3", "NodeAffinity:2", "NodeResourcesFit:1", "NodeResourcesBalancedAllocation:1", "ImageLocality:1"}
	if !reflect.DeepEqual(def["Score"], wantScore) {
		t.Fatalf("default score plugins %v", def["Score"])
	}
	wantFilter := []string{"NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit"}
	if !reflect.DeepEqual(def["Filter"], wantFilter) {
		t.Fatalf("default filter plugins %v", def["Filter"])
	}
	custom := s.Profile("custom").Plugins().PluginNames()
	if !reflect.DeepEqual(custom["Score"], []string{"TaintToleration:3", "NodeAffinity:7", "NodeResourcesFit:1", "NodeResourcesBalancedAllocation:1"}) {
		t.Fatalf("custom score plugins %v", custom["Score"])
	}
	if *s.Profile("bin-packing").PercentageOfNodesToScore() != 50 || *s.Profile("default-scheduler").PercentageOfNodesToScore() != 20 {
		t.Fatal("percentageOfNodesToScore not applied")
	}
	fitStrategy := func(profile string) string { return strategyOf(t, s, profile) }
	if got := fitStrategy("bin-packing"); got != noderesources.MostAllocated {
		t.Fatalf("ClusterAutoscalerProvider strategy %q", got)
	}
	if got := fitStrategy("default-scheduler"); got != noderesources.LeastAllocated {
		t.Fatalf("default strategy %q", got)
	}
	if got := fitStrategy("custom"); got != noderesources.RequestedToCapacityRatio {
		t.Fatalf("custom strategy %q", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"percentageOfNodesToScore: 101", "percentageOfNodesToScore"},
		{"profiles: [{schedulerName: a}, {schedulerName: a}]", "duplicate"},
		{"profilez: []", "unknown field"},
		{"kind: Pod", "not KubeSchedulerConfiguration"},
	} {
		if _, err := ParseConfig([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want error containing %q", tc.yaml, err, tc.want)
		}
	}
	cfg, _ := ParseConfig([]byte("profiles: [{schedulerName: x, plugins: {score: {enabled: [{name: NoSuchPlugin}]}}}]"))
	client := fake.NewSimpleClientset()
	if _, err := New(client, informers.NewSharedInformerFactory(client, 0), Config{Configuration: cfg}); err == nil || !strings.Contains(err.Error(), "NoSuchPlugin") {
		t.Fatalf("unknown plugin: %v", err)
	}
}
