package scheduler

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// DefaultSchedulerName is the profile used by pods that name no scheduler.
const DefaultSchedulerName = v1.DefaultSchedulerName

// Algorithm providers (the seed's NewRegistry).
const (
	// DefaultProvider spreads (NodeResourcesFit LeastAllocated).
	DefaultProvider = "DefaultProvider"
	// ClusterAutoscalerProvider packs (NodeResourcesFit MostAllocated), so the autoscaler
	// can remove emptied nodes.
	ClusterAutoscalerProvider = "ClusterAutoscalerProvider"
)

// Provider is a named base configuration a profile starts from.
type Provider struct {
	// Plugins are the provider's plugins per extension point.
	Plugins *framework.Plugins
	// PluginConfig are the provider's plugin args.
	PluginConfig []framework.PluginConfig
}

// Registry maps provider names to base configurations.
type Registry map[string]*Provider

// NewRegistry returns the algorithm-provider registry: DefaultProvider (alias "default")
// and ClusterAutoscalerProvider.
func NewRegistry() Registry {
	defaultConfig := getDefaultConfig()
	caConfig := getClusterAutoscalerConfig()
	return Registry{
		DefaultProvider:           defaultConfig,
		"default":                 defaultConfig,
		ClusterAutoscalerProvider: caConfig,
	}
}

// getDefaultConfig lists the built-in plugins as Kubernetes' default MultiPoint set, in
// Kubernetes' order and with its Score weights.
func getDefaultConfig() *Provider {
	return &Provider{Plugins: &framework.Plugins{
		MultiPoint: framework.PluginList{Enabled: []framework.PluginRef{
			{Name: names.PrioritySort},
			{Name: names.NodeName},
			{Name: names.NodeUnschedulable},
			{Name: names.TaintToleration, Weight: 3},
			{Name: names.NodeAffinity, Weight: 2},
			{Name: names.NodePorts},
			{Name: names.NodeResourcesFit, Weight: 1},
			{Name: names.DefaultPreemption},
			{Name: names.NodeResourcesBalancedAllocation, Weight: 1},
			{Name: names.ImageLocality, Weight: 1},
			{Name: names.DefaultBinder},
		}},
	}}
}

// getClusterAutoscalerConfig is the default with MostAllocated packing.
func getClusterAutoscalerConfig() *Provider {
	p := getDefaultConfig()
	p.PluginConfig = []framework.PluginConfig{{
		Name: names.NodeResourcesFit,
		Args: json.RawMessage(`{"scoringStrategy":{"type":"MostAllocated","resources":[{"name":"cpu","weight":1},{"name":"memory","weight":1}]}}`),
	}}
	return p
}

// LeaderElection configures leader election on a Lease.
type LeaderElection struct {
	// LeaderElect turns leader election on (the standalone command defaults it to true).
	LeaderElect *bool `json:"leaderElect,omitempty"`
	// LeaseDuration (default 15 s).
	LeaseDuration metav1.Duration `json:"leaseDuration,omitempty"`
	// RenewDeadline (default 10 s).
	RenewDeadline metav1.Duration `json:"renewDeadline,omitempty"`
	// RetryPeriod (default 2 s).
	RetryPeriod metav1.Duration `json:"retryPeriod,omitempty"`
	// ResourceName is the Lease name (default "kube-scheduler").
	ResourceName string `json:"resourceName,omitempty"`
	// ResourceNamespace is the Lease namespace (default "kube-system").
	ResourceNamespace string `json:"resourceNamespace,omitempty"`
}

// Profile is one scheduling profile.
type Profile struct {
	// SchedulerName selects the profile (pod.spec.schedulerName).
	SchedulerName string `json:"schedulerName"`
	// Provider is the base configuration (wasmplane extension; default DefaultProvider).
	Provider string `json:"provider,omitempty"`
	// PercentageOfNodesToScore overrides the global setting for this profile.
	PercentageOfNodesToScore *int32 `json:"percentageOfNodesToScore,omitempty"`
	// Plugins overlay the provider's plugins.
	Plugins *framework.Plugins `json:"plugins,omitempty"`
	// PluginConfig overrides the provider's plugin args by name.
	PluginConfig []framework.PluginConfig `json:"pluginConfig,omitempty"`
}

// Configuration mirrors KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).
type Configuration struct {
	// APIVersion is informational (kubescheduler.config.k8s.io/v1).
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind is informational (KubeSchedulerConfiguration).
	Kind string `json:"kind,omitempty"`
	// Parallelism bounds the goroutines of Filter and Score (default 16).
	Parallelism int32 `json:"parallelism,omitempty"`
	// PercentageOfNodesToScore (0 = adaptive: 50 − nodes/125, at least 5 %).
	PercentageOfNodesToScore *int32 `json:"percentageOfNodesToScore,omitempty"`
	// PodInitialBackoffSeconds (default 1).
	PodInitialBackoffSeconds int64 `json:"podInitialBackoffSeconds,omitempty"`
	// PodMaxBackoffSeconds (default 10).
	PodMaxBackoffSeconds int64 `json:"podMaxBackoffSeconds,omitempty"`
	// LeaderElection configures the Lease.
	LeaderElection LeaderElection `json:"leaderElection,omitempty"`
	// Profiles (default: one "default-scheduler" profile on DefaultProvider).
	Profiles []Profile `json:"profiles,omitempty"`
}

// ParseConfig reads a YAML or JSON configuration; unknown fields are errors.
func ParseConfig(data []byte) (*Configuration, error) {
	var c Configuration
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("parsing scheduler configuration: %w", err)
	}
	if c.Kind != "" && c.Kind != "KubeSchedulerConfiguration" {
		return nil, fmt.Errorf("parsing scheduler configuration: kind %q is not KubeSchedulerConfiguration", c.Kind)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// LoadConfig reads a configuration file.
func LoadConfig(path string) (*Configuration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scheduler configuration: %w", err)
	}
	return ParseConfig(data)
}

// DefaultConfiguration is one default profile.
func DefaultConfiguration() *Configuration {
	c := &Configuration{}
	c.SetDefaults()
	return c
}

// SetDefaults fills unset fields.
func (c *Configuration) SetDefaults() {
	if c.Parallelism <= 0 {
		c.Parallelism = framework.DefaultParallelism
	}
	if c.PodInitialBackoffSeconds <= 0 {
		c.PodInitialBackoffSeconds = 1
	}
	if c.PodMaxBackoffSeconds <= 0 {
		c.PodMaxBackoffSeconds = 10
	}
	if len(c.Profiles) == 0 {
		c.Profiles = []Profile{{SchedulerName: DefaultSchedulerName}}
	}
	for i := range c.Profiles {
		if c.Profiles[i].SchedulerName == "" {
			c.Profiles[i].SchedulerName = DefaultSchedulerName
		}
		if c.Profiles[i].Provider == "" {
			c.Profiles[i].Provider = DefaultProvider
		}
	}
	le := &c.LeaderElection
	if le.LeaseDuration.Duration == 0 {
		le.LeaseDuration.Duration = 15 * time.Second
	}
	if le.RenewDeadline.Duration == 0 {
		le.RenewDeadline.Duration = 10 * time.Second
	}
	if le.RetryPeriod.Duration == 0 {
		le.RetryPeriod.Duration = 2 * time.Second
	}
	if le.ResourceName == "" {
		le.ResourceName = "kube-scheduler"
	}
	if le.ResourceNamespace == "" {
		le.ResourceNamespace = "kube-system"
	}
}

// Validate checks the configuration.
func (c *Configuration) Validate() error {
	seen := map[string]bool{}
	valid := func(p *int32) bool { return p == nil || (*p >= 0 && *p <= 100) }
	if !valid(c.PercentageOfNodesToScore) {
		return fmt.Errorf("percentageOfNodesToScore must be in [0, 100]")
	}
	if c.PodMaxBackoffSeconds < c.PodInitialBackoffSeconds {
		return fmt.Errorf("podMaxBackoffSeconds must not be lower than podInitialBackoffSeconds")
	}
	for _, p := range c.Profiles {
		if seen[p.SchedulerName] {
			return fmt.Errorf("profiles: duplicate schedulerName %q", p.SchedulerName)
		}
		seen[p.SchedulerName] = true
		if !valid(p.PercentageOfNodesToScore) {
			return fmt.Errorf("profile %q: percentageOfNodesToScore must be in [0, 100]", p.SchedulerName)
		}
	}
	return nil
}

// resolve returns a profile's effective plugins and plugin args.
func (r Registry) resolve(p Profile) (*framework.Plugins, []framework.PluginConfig, error) {
	prov, ok := r[p.Provider]
	if !ok {
		return nil, nil, fmt.Errorf("profile %q: unknown provider %q", p.SchedulerName, p.Provider)
	}
	plugins := framework.MergePlugins(prov.Plugins, p.Plugins)
	args := map[string]framework.PluginConfig{}
	var order []string
	for _, pc := range append(append([]framework.PluginConfig(nil), prov.PluginConfig...), p.PluginConfig...) {
		if _, ok := args[pc.Name]; !ok {
			order = append(order, pc.Name)
		}
		args[pc.Name] = pc
	}
	out := make([]framework.PluginConfig, 0, len(order))
	for _, n := range order {
		out = append(out, args[n])
	}
	return plugins, out, nil
}
