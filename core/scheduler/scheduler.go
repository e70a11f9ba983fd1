// Package scheduler is wasmplane's scheduler: a client-go client (informers for pods and
// nodes; binds through pods/binding) running the framework's profiles over a scheduling
// queue and a cache of nodes with assumed pods.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wasmplane/wasmplane/core/scheduler/cache"
	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/metrics"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins"
	"github.com/wasmplane/wasmplane/core/scheduler/queue"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
)

// Config is what a Scheduler is built from.
type Config struct {
	// Configuration is the KubeSchedulerConfiguration (nil = DefaultConfiguration()).
	Configuration *Configuration
	// Providers are the algorithm providers (nil = NewRegistry()).
	Providers Registry
	// OutOfTreeRegistry adds plugin factories usable by name in the configuration.
	OutOfTreeRegistry framework.Registry
	// Registerer receives the metrics (nil = metrics are kept but not registered).
	Registerer prometheus.Registerer
	// Logger (nil = discarded).
	Logger *slog.Logger
	// PodMaxInUnschedulablePodsDuration (0 = 5 min) bounds how long an unschedulable pod
	// waits without a cluster event before it is retried anyway.
	PodMaxInUnschedulablePodsDuration time.Duration
	// MaxConcurrentBinds bounds the binding cycles talking to the API server at once
	// (0 = 32). Scheduling cycles are much faster than binds; unbounded, thousands of
	// binds in flight trip the API server's max-in-flight limit (429) and back pods off.
	MaxConcurrentBinds int
}

// Scheduler schedules pending pods of its profiles.
type Scheduler struct {
	client      kubernetes.Interface
	factory     informers.SharedInformerFactory
	podLister   corelisters.PodLister
	log         *slog.Logger
	cfg         *Configuration
	metrics     *metrics.Metrics
	broadcaster record.EventBroadcaster
	profiles    map[string]*framework.Framework
	queue       *queue.PriorityQueue
	cache       *cache.Cache
	snapshot    *framework.Snapshot

	// nextStartNodeIndex rotates where Filter starts so nodes are evaluated evenly; only
	// the scheduling goroutine touches it.
	nextStartNodeIndex int
	percentage         *int32
	// bindings tracks binding cycles and status updates so Run waits for them.
	bindings sync.WaitGroup
	// bindSlots is a semaphore bounding concurrent PreBind+Bind calls.
	bindSlots chan struct{}
	runMu     sync.Mutex
	running   bool
}

// New builds a scheduler and registers its informer handlers on factory (start the
// factory after New, or let Run start it).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, c Config) (*Scheduler, error) {
	cfg := c.Configuration
	if cfg == nil {
		cfg = DefaultConfiguration()
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	providers := c.Providers
	if providers == nil {
		providers = NewRegistry()
	}
	registry := plugins.NewInTreeRegistry()
	if err := registry.Merge(c.OutOfTreeRegistry); err != nil {
		return nil, fmt.Errorf("out-of-tree registry: %w", err)
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Scheduler{
		client:      client,
		factory:     factory,
		log:         log,
		cfg:         cfg,
		metrics:     metrics.New(c.Registerer),
		broadcaster: record.NewBroadcaster(record.WithContext(context.Background())),
		profiles:    map[string]*framework.Framework{},
		cache:       cache.New(0, nil, log),
		snapshot:    framework.NewEmptySnapshot(),
		percentage:  cfg.PercentageOfNodesToScore,
	}
	if c.MaxConcurrentBinds <= 0 {
		c.MaxConcurrentBinds = 32
	}
	s.bindSlots = make(chan struct{}, c.MaxConcurrentBinds)
	var less func(a, b *framework.QueuedPodInfo) bool
	for _, p := range cfg.Profiles {
		plugs, args, err := providers.resolve(p)
		if err != nil {
			return nil, err
		}
		pct := p.PercentageOfNodesToScore
		if pct == nil {
			pct = cfg.PercentageOfNodesToScore
		}
		fw, err := framework.NewFramework(context.Background(), p.SchedulerName, registry, plugs, args, framework.Options{
			ClientSet:                client,
			InformerFactory:          factory,
			EventRecorder:            coreRecorder{s.broadcaster.NewRecorder(clientscheme.Scheme, v1.EventSource{Component: p.SchedulerName})},
			Metrics:                  s.metrics,
			Parallelism:              int(cfg.Parallelism),
			PercentageOfNodesToScore: pct,
		})
		if err != nil {
			return nil, err
		}
		s.profiles[p.SchedulerName] = fw
		if less == nil {
			// Kubernetes requires one QueueSort for all profiles; the first one's is used.
			less = fw.Plugins().QueueSortFunc()
		}
	}
	s.queue = queue.New(less, queue.Options{
		InitialBackoff:     time.Duration(cfg.PodInitialBackoffSeconds) * time.Second,
		MaxBackoff:         time.Duration(cfg.PodMaxBackoffSeconds) * time.Second,
		MaxInUnschedulable: c.PodMaxInUnschedulablePodsDuration,
		Metrics:            s.metrics,
	})
	s.podLister = factory.Core().V1().Pods().Lister()
	if err := s.addEventHandlers(); err != nil {
		return nil, err
	}
	return s, nil
}

// Profile returns the profile (framework) named by schedulerName, or nil.
func (s *Scheduler) Profile(schedulerName string) *framework.Framework {
	return s.profiles[schedulerName]
}

// ProfileNames lists the profiles' scheduler names.
func (s *Scheduler) ProfileNames() []string {
	out := make([]string, 0, len(s.profiles))
	for n := range s.profiles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SetExtension adds or atomically replaces an out-of-tree plugin (e.g. a WASM Filter or
// Score) in the named profiles (none named = every profile). In-flight cycles finish on
// the plugin set they started with; the next cycle uses the new one.
func (s *Scheduler) SetExtension(ext framework.Extension, profiles ...string) error {
	if len(profiles) == 0 {
		profiles = s.ProfileNames()
	}
	for _, name := range profiles {
		fw := s.profiles[name]
		if fw == nil {
			return fmt.Errorf("profile %q: %w", name, framework.ErrNotFound)
		}
		if err := fw.SetExtension(ext); err != nil {
			return err
		}
	}
	// A new plugin may accept pods it rejected before (or the old one rejected).
	s.queue.MoveAllToActiveOrBackoffQueue(queue.EventForceActivate)
	return nil
}

// RemoveExtension removes an out-of-tree plugin from the named profiles (none = all).
func (s *Scheduler) RemoveExtension(name string, profiles ...string) {
	if len(profiles) == 0 {
		profiles = s.ProfileNames()
	}
	for _, p := range profiles {
		if fw := s.profiles[p]; fw != nil {
			fw.RemoveExtension(name)
		}
	}
	s.queue.MoveAllToActiveOrBackoffQueue(queue.EventForceActivate)
}

// Queue exposes the scheduling queue (tests, diagnostics).
func (s *Scheduler) Queue() *queue.PriorityQueue { return s.queue }

// Cache exposes the scheduler cache (tests, diagnostics).
func (s *Scheduler) Cache() *cache.Cache { return s.cache }

// Metrics exposes the metrics.
func (s *Scheduler) Metrics() *metrics.Metrics { return s.metrics }

// Run starts the informers (if not yet), waits for their caches, and schedules until ctx
// ends; it returns after every binding cycle and helper goroutine it started has ended.
func (s *Scheduler) Run(ctx context.Context) error {
	s.runMu.Lock()
	if s.running {
		s.runMu.Unlock()
		return errors.New("scheduler already running")
	}
	s.running = true
	s.runMu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sink := s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.client.CoreV1().Events("")})
	defer s.broadcaster.Shutdown()
	defer sink.Stop()

	var helpers sync.WaitGroup
	helpers.Add(2)
	go func() { defer helpers.Done(); s.queue.Run(ctx) }()
	go func() { defer helpers.Done(); s.cache.Run(ctx) }()
	defer helpers.Wait()
	defer cancel()

	s.factory.Start(ctx.Done())
	for typ, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			s.bindings.Wait()
			return fmt.Errorf("scheduler: informer for %v did not sync: %w", typ, context.Cause(ctx))
		}
	}
	s.log.Info("scheduler started", "profiles", s.ProfileNames())
	for s.scheduleOne(ctx) {
	}
	cancel()
	s.bindings.Wait()
	return nil
}

// responsibleFor reports whether one of our profiles handles the pod.
func (s *Scheduler) responsibleFor(pod *v1.Pod) bool {
	_, ok := s.profiles[pod.Spec.SchedulerName]
	return ok
}
