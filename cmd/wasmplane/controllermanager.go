package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/wasmplane/wasmplane/core/controller/podautoscaler"
	"github.com/wasmplane/wasmplane/core/pki"
	"github.com/wasmplane/wasmplane/core/server"
	"k8s.io/client-go/tools/clientcmd"
)

// newControllerManager is `wasmplane controller-manager`: the controllers alone, against any
// API server, with leader election so that several copies can run and one acts.
func newControllerManager() *cobra.Command {
	var kubeconfig, logLevel, signingCert, signingKey string
	var opts server.ControllerManagerOptions
	var hpaTolerance float64
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the Deployment, ReplicaSet, garbage-collector and namespace controllers (leader-elected)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("loading kubeconfig: %w", err)
			}
			if hpaTolerance < 0 {
				return fmt.Errorf("--horizontal-pod-autoscaler-tolerance %v: want 0 or more", hpaTolerance)
			}
			opts.Controllers.HPATolerance = &hpaTolerance
			if (signingCert == "") != (signingKey == "") {
				return fmt.Errorf("--cluster-signing-cert-file and --cluster-signing-key-file go together")
			}
			if signingCert != "" {
				ca, err := pki.LoadCA(signingCert, signingKey)
				if err != nil {
					return fmt.Errorf("loading the cluster signing CA: %w", err)
				}
				opts.SigningCA = ca
			} else {
				opts.Logger.Info("no --cluster-signing-cert-file: the kubelet client certificate signer is off")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return server.RunControllerManager(ctx, cfg, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server")
	f.StringVar(&opts.Identity, "identity", "", "leader election identity (default hostname_pid)")
	f.StringVar(&opts.LeaseNamespace, "leader-elect-resource-namespace", "kube-system", "namespace of the leader election Lease")
	f.StringVar(&opts.LeaseName, "leader-elect-resource-name", "wasmplane-controller-manager", "name of the leader election Lease")
	f.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", server.LeaseDuration, "how long a standby waits after the leader's last renewal before taking over")
	f.DurationVar(&opts.RenewDeadline, "leader-elect-renew-deadline", server.RenewDeadline, "how long the leader retries renewing before it stops leading (less than the lease duration)")
	f.DurationVar(&opts.RetryPeriod, "leader-elect-retry-period", server.RetryPeriod, "how often candidates try to acquire or renew the Lease")
	f.StringVar(&signingCert, "cluster-signing-cert-file", "", "PEM CA certificate that signs kubelet client certificates (e.g. <data-dir>/pki/ca.crt); empty = no signer")
	f.StringVar(&signingKey, "cluster-signing-key-file", "", "PEM private key of --cluster-signing-cert-file")
	f.DurationVar(&opts.Controllers.HPASyncPeriod, "horizontal-pod-autoscaler-sync-period", podautoscaler.DefaultSyncPeriod, "how often each HorizontalPodAutoscaler is reconciled")
	f.StringSliceVar((*[]string)(&opts.Controllers.Selection), "controllers", []string{"*"}, "controllers to run, as kube-controller-manager's --controllers: * for all, NAME to run one, -NAME to leave one to another controller manager (e.g. *,-job,-statefulset)")
	f.Float64Var(&hpaTolerance, "horizontal-pod-autoscaler-tolerance", podautoscaler.DefaultTolerance, "minimum change (from 1.0) in the desired-to-actual metrics ratio for the HorizontalPodAutoscaler to scale")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
