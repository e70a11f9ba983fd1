package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// StandaloneOptions configure RunStandalone.
type StandaloneOptions struct {
	// Configuration (nil = default).
	Configuration *Configuration
	// Logger (nil = discarded).
	Logger *slog.Logger
	// MetricsAddress serves /metrics and /healthz over HTTP ("" = off).
	MetricsAddress string
	// Identity is the leader-election identity (default hostname_pid).
	Identity string
	// OnListening, if set, receives the metrics listener address.
	OnListening func(addr string)
	// Extend, if set, runs beside the scheduler while it schedules (e.g. the WASM plugin
	// manager feeding it extensions); it gets the scheduler's client configuration and
	// metrics registry and must return when ctx ends.
	Extend func(ctx context.Context, s *Scheduler, restCfg *rest.Config, reg prometheus.Registerer)
}

// RunStandalone runs the scheduler as its own process would: its own client, informers,
// metrics registry and HTTP endpoint, and (unless disabled in the configuration) leader
// election on a Lease so that only one replica schedules. A replica that loses the Lease
// (e.g. it could not renew while etcd changed leader) stops scheduling, waits for that
// term's work to end and stands again, rather than exiting and leaving no candidate. It
// returns when ctx ends, or when the scheduler fails while leading.
func RunStandalone(ctx context.Context, restCfg *rest.Config, opts StandaloneOptions) error {
	cfg := opts.Configuration
	if cfg == nil {
		cfg = DefaultConfiguration()
	}
	cfg.SetDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	restCfg = rest.CopyConfig(restCfg)
	restCfg.UserAgent = "wasmplane-scheduler/" + opts.Identity
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("scheduler client: %w", err)
	}
	// Each term of leadership builds a new scheduler, whose metrics go to a new registry:
	// /metrics serves the process's collectors and the current term's.
	process := prometheus.NewRegistry()
	process.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var term atomic.Pointer[prometheus.Registry]
	term.Store(prometheus.NewRegistry())
	gather := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return prometheus.Gatherers{process, term.Load()}.Gather()
	})

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if opts.MetricsAddress != "" {
		ln, err := net.Listen("tcp", opts.MetricsAddress)
		if err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		if opts.OnListening != nil {
			opts.OnListening(ln.Addr().String())
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		wg.Add(2)
		go func() { defer wg.Done(); _ = srv.Serve(ln) }()
		go func() {
			defer wg.Done()
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			_ = srv.Shutdown(sctx)
		}()
	}

	run := func(ctx context.Context) error {
		factory := informers.NewSharedInformerFactory(client, 0)
		defer factory.Shutdown()
		reg := prometheus.NewRegistry()
		term.Store(reg)
		s, err := New(client, factory, Config{Configuration: cfg, Registerer: reg, Logger: log})
		if err != nil {
			return err
		}
		if opts.Extend == nil {
			return s.Run(ctx)
		}
		ctx, cancel := context.WithCancel(ctx)
		var ext sync.WaitGroup
		ext.Add(1)
		go func() { defer ext.Done(); opts.Extend(ctx, s, restCfg, reg) }()
		err = s.Run(ctx)
		cancel()
		ext.Wait()
		return err
	}
	le := cfg.LeaderElection
	if le.LeaderElect != nil && !*le.LeaderElect {
		return run(ctx)
	}
	if err := ensureNamespace(ctx, client, le.ResourceNamespace); err != nil {
		return err
	}
	for ctx.Err() == nil {
		if err := campaign(ctx, client, le, opts.Identity, log, run); err != nil {
			return err
		}
	}
	return nil
}

// campaign runs one term of leader election: it stands for the Lease, schedules while it
// holds it, and returns once the Lease is lost (or ctx ends) and the term's scheduler has
// stopped, so the caller can stand again with nothing of the lost term still running. An
// error is the scheduler failing while it still led (e.g. an invalid configuration), which
// standing again would not fix.
func campaign(ctx context.Context, client kubernetes.Interface, le LeaderElection, identity string, log *slog.Logger, run func(context.Context) error) error {
	var (
		mu      sync.Mutex
		stopped bool
		leading sync.WaitGroup
		runErr  error
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.ResourceNamespace, Name: le.ResourceName},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            le.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				// The elector starts this in its own goroutine; register it unless the term
				// already ended, so no scheduler outlives its term.
				mu.Lock()
				if stopped {
					mu.Unlock()
					return
				}
				leading.Add(1)
				mu.Unlock()
				defer leading.Done()
				log.Info("became leader, starting scheduler", "identity", identity)
				if err := run(lctx); err != nil && lctx.Err() == nil {
					mu.Lock()
					runErr = err
					mu.Unlock()
				}
			},
			OnStoppedLeading: func() { log.Info("stopped leading; standing again", "identity", identity) },
			OnNewLeader: func(id string) {
				if id != identity {
					log.Info("following leader", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(ctx)
	mu.Lock()
	stopped = true
	mu.Unlock()
	leading.Wait()
	mu.Lock()
	defer mu.Unlock()
	return runErr
}

// ensureNamespace makes sure the Lease's namespace exists. It looks first: the scheduler's
// own role (system:kube-scheduler) may read namespaces but not create them, and the
// authorizer refuses a create before storage could answer AlreadyExists.
func ensureNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("reading namespace %s for the Lease: %w", name, err)
	}
	_, err = client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s for the Lease: %w", name, err)
	}
	return nil
}
