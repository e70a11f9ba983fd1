package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/wasmplane/wasmplane/core/scheduler"
	"k8s.io/client-go/tools/clientcmd"
)

// newScheduler is `wasmplane scheduler`: the scheduler alone, against any API server.
func newScheduler() *cobra.Command {
	var kubeconfig, configPath, logLevel, metricsAddr string
	var leaderElect bool
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
			err = scheduler.RunStandalone(ctx, restCfg, scheduler.StandaloneOptions{
				Configuration:  cfg,
				Logger:         log,
				MetricsAddress: metricsAddr,
			})
			if errors.Is(err, scheduler.ErrLeaderElectionLost) {
				log.Error("leader election lost; exiting")
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the API server (empty: in-cluster)")
	f.StringVar(&configPath, "config", "", "KubeSchedulerConfiguration YAML file")
	f.BoolVar(&leaderElect, "leader-elect", true, "elect a leader on a Lease before scheduling")
	f.StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:10259", "address serving /metrics and /healthz (empty: off)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
