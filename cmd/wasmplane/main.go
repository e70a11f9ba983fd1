// Command wasmplane is the one binary: `up` runs the whole control plane.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/wasmplane/wasmplane/core/apiserver/filters"
	"github.com/wasmplane/wasmplane/core/apiserver/servicealloc"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/controller/podautoscaler"
	"github.com/wasmplane/wasmplane/core/gcpace"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/core/version"
	"k8s.io/apimachinery/pkg/api/resource"
	cliflag "k8s.io/component-base/cli/flag"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "kubectl" {
		os.Exit(runKubectl(os.Args[2:]))
	}
	if err := newRoot().Execute(); err != nil {
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "wasmplane",
		Short:         "A Kubernetes-compatible control plane whose extension points are WebAssembly modules",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(newUp(), newVersion(), newKubectl())
	root.AddCommand(newPlugin())
	root.AddCommand(newControllerManager())
	root.AddCommand(newScheduler())
	root.AddCommand(newAgent())
	root.AddCommand(newEtcd())
	root.AddCommand(newRuntime(), newImage())
	root.AddCommand(newKubeconfigCmd(), newToken(), newTrace())
	return root
}

func newUp() *cobra.Command {
	var cfg server.Config
	var logLevel, memoryLimit, gcHeadroom, serviceCIDR, nodePortRange, advertise string
	var disableKubelet, enableAPF bool
	var apfRefusalHold time.Duration
	var hpaTolerance float64
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the control plane (API server on embedded etcd) in this process",
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			slog.SetDefault(cfg.Logger)
			if memoryLimit != "" {
				q, err := resource.ParseQuantity(memoryLimit)
				if err != nil || q.Sign() <= 0 {
					return fmt.Errorf("--memory-limit %q: want a positive quantity such as 1800Mi", memoryLimit)
				}
				// The Go runtime's soft limit (what GOMEMLIMIT sets): the collector runs
				// more often as the heap nears it instead of letting the heap double.
				debug.SetMemoryLimit(q.Value())
			}
			headroom, err := resource.ParseQuantity(gcHeadroom)
			if err != nil || headroom.Sign() < 0 {
				return fmt.Errorf("--gc-min-headroom %q: want 0 or a positive quantity such as 128Mi", gcHeadroom)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			defer dumpGoroutinesOnSIGQUIT(os.Stderr, cfg.Logger)()
			paced := make(chan struct{})
			go func() {
				defer close(paced)
				gcpace.Pacer{MinHeadroom: uint64(headroom.Value()), Logger: cfg.Logger}.Run(ctx)
			}()
			// The pacer stops with ctx; stop it also when the server ends on its own.
			defer func() { stop(); <-paced }()
			cfg.RunKubelet = !disableKubelet
			cfg.DisablePriorityAndFairness = !enableAPF
			if cfg.APFRefusalHold = apfRefusalHold; apfRefusalHold <= 0 {
				cfg.APFRefusalHold = -1
			}
			if err := parseCeilingFlags(cmd.Flags(), &cfg.PluginCeilings); err != nil {
				return err
			}
			cfg.KubeletPort = kubeletPort(cfg.KubeletPort)
			if hpaTolerance < 0 {
				return fmt.Errorf("--horizontal-pod-autoscaler-tolerance %v: want 0 or more", hpaTolerance)
			}
			cfg.Controllers.HPATolerance = &hpaTolerance
			if err := parseServiceFlags(serviceCIDR, nodePortRange, advertise, &cfg); err != nil {
				return err
			}
			freePort := cfg.Port == 0
			if freePort {
				cfg.Port = rememberedPort(cfg.DataDir)
			}
			inst, err := server.Start(ctx, cfg)
			if err != nil && freePort && cfg.Port != 0 && addrInUse(err) {
				cfg.Logger.Warn("the port an earlier --port 0 picked is taken; picking another", "port", cfg.Port)
				cfg.Port = 0
				inst, err = server.Start(ctx, cfg)
			}
			if err != nil {
				return err
			}
			if freePort {
				if err := rememberPort(cfg.DataDir, inst.URL()); err != nil {
					inst.Close()
					return err
				}
			}
			kc := inst.KubeconfigPath()
			if abs, err := filepath.Abs(kc); err == nil {
				kc = abs
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wasmplane is up at %s\n\n  export KUBECONFIG=%s\n  kubectl get namespaces      # or: wasmplane kubectl get namespaces\n\n", inst.URL(), kc)
			select {
			case <-ctx.Done():
				cfg.Logger.Info("shutting down")
				inst.Close()
				return nil
			case <-inst.Done():
				return inst.Err()
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", ".wasmplane", "directory for etcd data and the admin kubeconfig")
	f.StringSliceVar(&cfg.EtcdServers, "etcd-servers", nil, "external etcd client URLs (nothing is embedded when set)")
	f.StringVar(&cfg.BindAddress, "bind-address", "127.0.0.1", "API server listen address")
	f.IntVar(&cfg.Port, "port", 6443, "API server port (0 picks a free port, kept in <data-dir>/port and reused by the next --port 0)")
	f.DurationVar(&cfg.CompactionInterval, "etcd-compaction-interval", 0, "how often to compact etcd (default 5m)")
	f.StringSliceVar(&cfg.TLSSANs, "tls-san", nil, "extra names and IPs for the serving certificate")
	f.StringVar(&cfg.TLSMinVersion, "tls-min-version", "", "minimum TLS version served (default VersionTLS12); possible values: "+strings.Join(cliflag.TLSPossibleVersions(), ", "))
	f.StringSliceVar(&cfg.TLSCipherSuites, "tls-cipher-suites", nil, "comma-separated TLS 1.0-1.2 cipher suites served (default Go's); preferred values: "+
		strings.Join(cliflag.PreferredTLSCipherNames(), ", ")+"; insecure values: "+strings.Join(cliflag.InsecureTLSCipherNames(), ", "))
	f.IntVar(&cfg.MaxRequestsInFlight, "max-requests-inflight", 400, "concurrent non-mutating requests served; beyond, 429 with Retry-After (watches and logs do not count); with priority and fairness, the two limits' sum is the server's concurrency limit")
	f.IntVar(&cfg.MaxMutatingRequestsInFlight, "max-mutating-requests-inflight", 200, "concurrent mutating requests served; beyond, 429 with Retry-After")
	f.DurationVar(&cfg.MetricsResolution, "metrics-resolution", 15*time.Second, "how often kubelets are scraped for the resource metrics served as metrics.k8s.io (kubectl top, autoscalers), as metrics-server's --metric-resolution; a negative value serves no metrics.k8s.io")
	f.BoolVar(&enableAPF, "enable-priority-and-fairness", true, "share the server's concurrency among priority levels with fair queuing by FlowSchemas and PriorityLevelConfigurations (API Priority and Fairness); false = the two max-inflight limits")
	f.DurationVar(&apfRefusalHold, "apf-refusal-hold", filters.DefaultRefusalHold, "with priority and fairness, hold the 429 of a flow refused continuously for a second for its Retry-After, at most this long, before answering it (a flooding client then costs the server almost nothing); 0 answers refusals at once, as kube-apiserver does")
	f.IntVar(&cfg.InsecurePort, "insecure-port", 0, "also serve plain HTTP WITHOUT authentication on 127.0.0.1:PORT (tests only; 0 = off)")
	f.StringVar(&cfg.TokenAuthFile, "token-auth-file", "", "static bearer tokens (CSV: token,user,uid,\"group1,group2\")")
	f.StringSliceVar(&cfg.APIAudiences, "api-audiences", nil, "audiences the API accepts (default: the service account issuer)")
	f.StringVar(&cfg.ServiceAccountIssuer, "service-account-issuer", "", "iss of ServiceAccount tokens (default "+authn.DefaultIssuer+")")
	f.BoolVar(&cfg.AnonymousAuth, "anonymous-auth", false, "let requests without credentials reach /healthz, /livez, /readyz and /version as system:anonymous")
	f.StringSliceVar(&cfg.AuthenticationOrder, "authentication-order", nil, "order of the authenticators (default x509,token-file,serviceaccount,bootstrap,wasm)")
	f.BoolVar(&disableKubelet, "disable-kubelet", false, "run no node in this process (use wasmplane agent elsewhere)")
	f.StringVar(&cfg.NodeName, "node-name", "", "name of this process's node (default the hostname)")
	f.IntVar(&cfg.KubeletPort, "kubelet-port", 10250, "kubelet HTTPS port (0 picks a free port; -1 too, as before)")
	f.StringVar(&cfg.ContainerRuntimeEndpoint, "container-runtime-endpoint", "", "CRI socket (e.g. unix:///run/containerd/containerd.sock); default the built-in WASI runtime")
	f.BoolVar(&cfg.DisableControllers, "disable-controllers", false, "do not run the controllers (run wasmplane controller-manager instead)")
	f.BoolVar(&cfg.DisableScheduler, "disable-scheduler", false, "do not run the scheduler (run wasmplane scheduler instead)")
	f.DurationVar(&cfg.Controllers.HPASyncPeriod, "horizontal-pod-autoscaler-sync-period", podautoscaler.DefaultSyncPeriod, "how often each HorizontalPodAutoscaler is reconciled")
	f.StringSliceVar((*[]string)(&cfg.Controllers.Selection), "controllers", []string{"*"}, "controllers to run, as kube-controller-manager's --controllers: * for all, NAME to run one, -NAME to leave one to another controller manager (e.g. *,-job,-statefulset)")
	f.Float64Var(&hpaTolerance, "horizontal-pod-autoscaler-tolerance", podautoscaler.DefaultTolerance, "minimum change (from 1.0) in the desired-to-actual metrics ratio for the HorizontalPodAutoscaler to scale")
	f.StringVar(&serviceCIDR, "service-cluster-ip-range", servicealloc.DefaultServiceCIDR.String(), "CIDR of Services' cluster IPs; its first address is the kubernetes Service's")
	f.StringVar(&nodePortRange, "service-node-port-range", servicealloc.DefaultNodePortRange.String(), "range of ports NodePort and LoadBalancer Services get (LOW-HIGH)")
	f.StringVar(&advertise, "advertise-address", "", "address listed in the kubernetes Service's endpoints (default the bind address, or the host's first non-loopback one)")
	addCeilingFlags(f, &cfg.PluginCeilings)
	addCallBoundFlags(f, &cfg.WasmCallBounds)
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&gcHeadroom, "gc-min-headroom", "128Mi", "how much the heap may grow over what is live before a garbage collection, at least (GOGC's percent applies once the live heap is larger); 0 leaves the collector to GOGC alone")
	f.StringVar(&memoryLimit, "memory-limit", "", "soft limit of the process's memory (e.g. 1800Mi): garbage is collected more often near it; the default lets the heap grow to twice what is live")
	return cmd
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprint(cmd.OutOrStdout(), version.Read())
		},
	}
}
