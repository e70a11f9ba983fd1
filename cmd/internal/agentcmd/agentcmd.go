// Package agentcmd is the node agent's command line, shared by `wasmplane agent` and the
// smaller `wasmplane-agent` binary, which links only the agent (no API server, etcd or
// kubectl) and so starts with a fraction of the memory.
package agentcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/node"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// New is the agent command, named use: a kubelet (and the built-in runtime) joining a
// cluster.
func New(use string) *cobra.Command {
	var (
		cfg                               node.Config
		apiURL, token, kubeconfig, caFile string
		taints                            []string
		logLevel                          string
		insecure                          bool
		bootstrapTimeout                  time.Duration
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: "Run a node: a kubelet and, unless --container-runtime-endpoint is given, the built-in WASI runtime",
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			if cfg.NodeName == "" {
				h, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("--node-name not given and no hostname: %w", err)
				}
				cfg.NodeName = strings.ToLower(h)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rc, err := agentRESTConfig(ctx, agentCredentials{apiURL: apiURL, token: token, kubeconfig: kubeconfig, caFile: caFile,
				insecure: insecure, rootDir: cfg.RootDir, nodeName: cfg.NodeName, timeout: bootstrapTimeout, log: cfg.Logger})
			if err != nil {
				return err
			}
			cfg.RESTConfig = rc
			for _, t := range taints {
				taint, err := parseTaint(t)
				if err != nil {
					return err
				}
				cfg.Taints = append(cfg.Taints, taint)
			}
			stopNode, err := node.Start(ctx, cfg)
			if err != nil {
				return err
			}
			cfg.Logger.Info("node agent running", "node", cfg.NodeName)
			<-ctx.Done()
			cfg.Logger.Info("shutting down")
			stopNode()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&apiURL, "server", "", "API server URL (with --token)")
	f.StringVar(&token, "token", "", "bearer token for --server; a bootstrap token (<id>.<secret>, from wasmplane token create) joins the node by TLS bootstrapping, writing <root-dir>/"+node.KubeletKubeconfigName)
	f.StringVar(&caFile, "certificate-authority", "", "CA file verifying --server (e.g. <data-dir>/pki/ca.crt of wasmplane up)")
	f.BoolVar(&insecure, "insecure-skip-tls-verify", false, "do not verify --server's certificate (insecure: anyone on the path can impersonate the API server)")
	f.DurationVar(&bootstrapTimeout, "bootstrap-timeout", node.DefaultBootstrapTimeout, "how long TLS bootstrapping waits for the certificate signing request to be approved and signed")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the kubelet's credentials (instead of --server/--token)")
	f.StringVar(&cfg.NodeName, "node-name", "", "node name (default the hostname)")
	f.StringVar(&cfg.NodeIP, "node-ip", "127.0.0.1", "the node's InternalIP, where the kubelet listens")
	f.StringVar(&cfg.RuntimeEndpoint, "container-runtime-endpoint", "", "CRI endpoint, e.g. unix:///run/containerd/containerd.sock (default: start the built-in WASI runtime)")
	f.StringVar(&cfg.RootDir, "root-dir", ".wasmplane-agent", "directory for the kubelet's and runtime's state")
	f.IntVar(&cfg.MaxPods, "max-pods", 110, "pods capacity")
	f.IntVar(&cfg.Port, "kubelet-port", 10250, "kubelet HTTPS port (-1 picks a free one)")
	f.StringSliceVar(&taints, "register-with-taints", nil, "taints to register the node with (key=value:Effect)")
	f.StringVar(&cfg.KubeletTLS.CertFile, "tls-cert-file", "", "kubelet serving certificate (default self-signed)")
	f.StringVar(&cfg.KubeletTLS.KeyFile, "tls-private-key-file", "", "kubelet serving key")
	f.StringVar(&cfg.KubeletTLS.ClientCAFile, "client-ca-file", "", "CA whose client certificates the kubelet accepts")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

// agentCredentials are the flags that decide how the agent authenticates.
type agentCredentials struct {
	apiURL, token, kubeconfig, caFile string
	insecure                          bool
	rootDir, nodeName                 string
	timeout                           time.Duration
	log                               *slog.Logger
}

// agentRESTConfig picks the kubelet's credentials: --kubeconfig; else, with a bootstrap
// token, the node kubeconfig of an earlier join or a new one from TLS bootstrapping; else
// --server with --token used as is; else the node kubeconfig of an earlier join.
func agentRESTConfig(ctx context.Context, c agentCredentials) (*rest.Config, error) {
	nodeKubeconfig := filepath.Join(c.rootDir, node.KubeletKubeconfigName)
	if c.kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return rc, nil
	}
	var caData []byte
	if c.caFile != "" {
		var err error
		if caData, err = os.ReadFile(c.caFile); err != nil {
			return nil, fmt.Errorf("--certificate-authority: %w", err)
		}
	}
	if c.apiURL != "" && strings.HasPrefix(c.apiURL, "https://") && caData == nil && !c.insecure {
		return nil, errors.New("--server needs --certificate-authority to verify the API server (or --insecure-skip-tls-verify)")
	}
	if c.apiURL == "" || authn.BootstrapTokenRE.MatchString(c.token) {
		// Without --server this only reuses an earlier join's kubeconfig.
		return node.LoadOrBootstrapKubeconfig(ctx, node.BootstrapOptions{Server: c.apiURL, Token: c.token,
			CAData: caData, Insecure: c.insecure, NodeName: c.nodeName, KubeconfigPath: nodeKubeconfig,
			Timeout: c.timeout, Logger: c.log})
	}
	return &rest.Config{Host: c.apiURL, BearerToken: c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData, Insecure: c.insecure}}, nil
}

// parseTaint reads key[=value]:Effect.
func parseTaint(s string) (corev1.Taint, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key[=value]:Effect", s)
	}
	t := corev1.Taint{Effect: corev1.TaintEffect(s[i+1:])}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return t, fmt.Errorf("taint %q: unknown effect %q", s, t.Effect)
	}
	kv := s[:i]
	if j := strings.IndexByte(kv, '='); j >= 0 {
		t.Key, t.Value = kv[:j], kv[j+1:]
	} else {
		t.Key = kv
	}
	if t.Key == "" {
		return t, fmt.Errorf("taint %q: empty key", s)
	}
	return t, nil
}
