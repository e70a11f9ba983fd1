package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/wasmplane/wasmplane/core/storage/etcdserver"
)

// newEtcd is `wasmplane etcd`: one member of an etcd cluster, the same embedded etcd `up`
// runs, so that an external (for instance three-member) etcd needs no other binary.
func newEtcd() *cobra.Command {
	var cfg etcdserver.Config
	var logLevel string
	cmd := &cobra.Command{
		Use:   "etcd --name N --client-url URL --peer-url URL --initial-cluster N1=URL1,N2=URL2,...",
		Short: "Run one etcd member (for an external etcd cluster used with `up --etcd-servers`)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			// A member of a new cluster is ready only once a quorum of its peers runs, and
			// they may be started by hand one after another.
			cfg.ReadyTimeout = 10 * time.Minute
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv, err := etcdserver.Start(ctx, cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "etcd member %s is ready at %s\n", cfg.Name, srv.Endpoints()[0])
			select {
			case <-ctx.Done():
				return nil
			case err := <-srv.Err():
				return fmt.Errorf("etcd member %s: %w", cfg.Name, err)
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Name, "name", "default", "member name (as in --initial-cluster)")
	f.StringVar(&cfg.DataDir, "data-dir", ".wasmplane-etcd", "the member's data directory")
	f.StringVar(&cfg.ClientURL, "client-url", "http://127.0.0.1:2379", "URL clients (up --etcd-servers) reach this member at")
	f.StringVar(&cfg.PeerURL, "peer-url", "http://127.0.0.1:2380", "URL the other members reach this member at")
	f.StringVar(&cfg.InitialCluster, "initial-cluster", "", "every member of a new cluster, name=peer-url,... (default: this member alone)")
	f.StringVar(&cfg.InitialClusterState, "initial-cluster-state", "new", "new, or existing to join a running cluster")
	f.StringVar(&cfg.InitialClusterToken, "initial-cluster-token", "wasmplane-etcd", "cluster token, distinct per cluster")
	f.Int64Var(&cfg.QuotaBytes, "quota-backend-bytes", etcdserver.DefaultQuotaBytes, "backend size quota")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
