package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/wasmplane/wasmplane/core/scheduler"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// newScheduler is `wasmplane scheduler`: the scheduler alone, against any API server.
func newScheduler() *cobra.Command {
	var kubeconfig, configPath, logLevel, metricsAddr, wasmCacheDir string
	var leaderElect, wasmPlugins bool
	var bounds wasm.CallBounds
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the scheduler alone against an API server (leader election on a Lease)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			cfg := scheduler.DefaultConfiguration()
			if configPath != "" {
				if cfg, err = scheduler.LoadConfig(configPath); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("leader-elect") || cfg.LeaderElection.LeaderElect == nil {
				cfg.LeaderElection.LeaderElect = &leaderElect
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts := scheduler.StandaloneOptions{
				Configuration:  cfg,
				Logger:         log,
				MetricsAddress: metricsAddr,
			}
			if wasmPlugins {
				opts.Extend = wasmExtension(wasmCacheDir, bounds, log)
			}
			return scheduler.RunStandalone(ctx, restCfg, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the API server (empty: in-cluster)")
	f.StringVar(&configPath, "config", "", "KubeSchedulerConfiguration YAML file")
	f.BoolVar(&leaderElect, "leader-elect", true, "elect a leader on a Lease before scheduling")
	f.StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:10259", "address serving /metrics and /healthz (empty: off)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.BoolVar(&wasmPlugins, "wasm-plugins", true, "load WasmPlugin/ClusterWasmPlugin filter and score hooks into the profiles")
	f.StringVar(&wasmCacheDir, "wasm-cache-dir", defaultWasmCacheDir(), "compilation cache of WASM scheduling plugins (empty: in memory)")
	addCallBoundFlags(f, &bounds)
	return cmd
}

// wasmExtension runs the scheduler's WASM plugin manager beside the scheduler while it
// leads, with the scheduler's own client and metrics registry.
func wasmExtension(cacheDir string, bounds wasm.CallBounds, log *slog.Logger) func(context.Context, *scheduler.Scheduler, *rest.Config, prometheus.Registerer) {
	return func(ctx context.Context, s *scheduler.Scheduler, restCfg *rest.Config, reg prometheus.Registerer) {
		host, _ := os.Hostname()
		run, err := server.SchedulerPlugins(ctx, server.SchedulerPluginsConfig{RESTConfig: restCfg, Scheduler: s, CacheDir: cacheDir,
			Registerer: reg, ServerName: "scheduler-" + host, CallBounds: bounds, Logger: log})
		if err != nil {
			log.Error("WASM scheduling plugins disabled", "err", err)
			return
		}
		run()
	}
}

// defaultWasmCacheDir is the user's cache directory, or "" (in memory) when there is none.
func defaultWasmCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "wasmplane", "scheduler-wasm-cache")
}
