package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wasmplane/wasmplane/core/scheduler"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// startScheduler runs the scheduler against the API server through client-go, as a
// separate kube-scheduler would (single process: no leader election); the returned func
// stops it and waits for it.
func startScheduler(ctx context.Context, cfg *rest.Config, log *slog.Logger) (stop func(), err error) {
	return startSchedulerWithMetrics(ctx, cfg, log, nil)
}

// startSchedulerWithMetrics is startScheduler registering the scheduler metrics on reg
// (e.g. the API server's /metrics registry; nil = not exported).
func startSchedulerWithMetrics(ctx context.Context, cfg *rest.Config, log *slog.Logger, reg prometheus.Registerer) (stop func(), err error) {
	if log == nil {
		log = slog.Default()
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "wasmplane-scheduler"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("scheduler client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	s, err := scheduler.New(client, factory, scheduler.Config{Registerer: reg, Logger: log.With("component", "scheduler")})
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("scheduler stopped", "err", err)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	}, nil
}
