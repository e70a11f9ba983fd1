// Package node runs a node: the kubelet and, unless the node uses another CRI runtime,
// the built-in WASI runtime, and joins it to a cluster by TLS bootstrapping. It is what
// `wasmplane agent` and the smaller `wasmplane-agent` binary run, and it links none of the
// API server, etcd or kubectl, so that a binary built from it carries only the agent.
package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/wasmplane/wasmplane/core/kubelet"
	kubeletserver "github.com/wasmplane/wasmplane/core/kubelet/server"
	"github.com/wasmplane/wasmplane/runtime/cri/wasi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// KubeletTLS names the kubelet's serving pair and the CA that signs the clients it
// accepts (the API server's kubelet-client certificate).
type KubeletTLS struct {
	// CertFile and KeyFile serve HTTPS; empty = a self-signed pair under RootDir/pki.
	CertFile, KeyFile string
	// ClientCAFile, when set, makes the kubelet accept only client certificates it signed;
	// empty = no client certificate is asked for.
	ClientCAFile string
}

// Config is a kubelet (and, by default, the built-in runtime) to run.
type Config struct {
	// RESTConfig carries the kubelet's credentials.
	RESTConfig *rest.Config
	// NodeName names the Node (default the hostname).
	NodeName string
	// NodeIP is the InternalIP (default 127.0.0.1).
	NodeIP string
	// RootDir holds the kubelet's and the built-in runtime's state.
	RootDir string
	// RuntimeEndpoint is a CRI endpoint; empty = start the built-in WASI runtime.
	RuntimeEndpoint string
	// Port is the kubelet's HTTPS port (0 = 10250, -1 = a free port).
	Port int
	// MaxPods is the pods capacity (default 110).
	MaxPods int
	// Taints are registered with the Node.
	Taints []corev1.Taint
	// Logger receives logs.
	Logger *slog.Logger
	// KubeletTLS configures HTTPS.
	KubeletTLS KubeletTLS
	// Tune, if set, adjusts the kubelet configuration last (tests shorten periods).
	Tune func(*kubelet.Config)
}

// Start starts the built-in runtime (unless an endpoint is given) and a kubelet; stop
// ends both and waits for them.
func Start(ctx context.Context, cfg Config) (stop func(), err error) {
	if cfg.RESTConfig == nil {
		return nil, fmt.Errorf("node: a REST config is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("node: hostname: %w", err)
		}
		cfg.NodeName = h
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = "127.0.0.1"
	}
	if cfg.RootDir == "" {
		return nil, fmt.Errorf("node: a root dir is required")
	}
	// CRI paths (a pod's log directory, a container's log file) are absolute: a relative
	// root dir (`up --data-dir .wasmplane`) would otherwise make the kubelet join the
	// runtime's relative log path onto its own pod directory a second time.
	abs, err := filepath.Abs(cfg.RootDir)
	if err != nil {
		return nil, fmt.Errorf("node: root dir: %w", err)
	}
	cfg.RootDir = abs
	if err := os.MkdirAll(cfg.RootDir, 0o700); err != nil {
		return nil, fmt.Errorf("node: creating root dir: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var closers []func()
	fail := func(err error) (func(), error) {
		cancel()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		return nil, err
	}
	endpoint := cfg.RuntimeEndpoint
	if endpoint == "" {
		rt, err := wasi.Serve(ctx, wasi.Config{Socket: filepath.Join(cfg.RootDir, "cri.sock"), RootDir: filepath.Join(cfg.RootDir, "runtime"), Logger: cfg.Logger})
		if err != nil {
			return fail(fmt.Errorf("node: starting the built-in runtime: %w", err))
		}
		closers = append(closers, func() { _ = rt.Close() })
		endpoint = rt.Endpoint()
	}
	rt, img, err := kubelet.Connect(ctx, endpoint)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = rt.Close(context.Background()); _ = img.Close(context.Background()) })
	certFile, keyFile := cfg.KubeletTLS.CertFile, cfg.KubeletTLS.KeyFile
	if certFile == "" || keyFile == "" {
		host, _ := os.Hostname()
		certFile, keyFile, err = kubeletserver.SelfSignedCert(filepath.Join(cfg.RootDir, "pki"), []string{cfg.NodeIP, cfg.NodeName, host, "localhost"})
		if err != nil {
			return fail(err)
		}
	}
	tlsConfig, err := kubeletserver.TLSConfig(certFile, keyFile, cfg.KubeletTLS.ClientCAFile)
	if err != nil {
		return fail(err)
	}
	if tlsConfig.ClientCAs != nil {
		// A client without a certificate may still come in with a bearer token, which
		// the kubelet's delegated authentication reviews (a bad certificate is still
		// refused in the handshake).
		tlsConfig.ClientAuth = tls.VerifyClientCertIfGiven
	}
	rc := rest.CopyConfig(cfg.RESTConfig)
	if rc.UserAgent == "" {
		rc.UserAgent = "wasmplane-kubelet/" + cfg.NodeName
	}
	// The kubelet writes several statuses per pod start; stock kubelets use 50 QPS, which
	// would cap pod starts near 15/s.
	rc.QPS, rc.Burst = 200, 400
	client, err := kubelet.NewClient(rc)
	if err != nil {
		return fail(fmt.Errorf("node: kubelet client: %w", err))
	}
	port := cfg.Port
	if port == 0 {
		port = kubelet.DefaultPort
	}
	kcfg := kubelet.Config{Client: client, Runtime: rt, Images: img, NodeName: cfg.NodeName, NodeIP: cfg.NodeIP, RootDir: filepath.Join(cfg.RootDir, "kubelet"),
		MaxPods: cfg.MaxPods, Taints: cfg.Taints, Port: port, TLS: tlsConfig, Logger: cfg.Logger}
	if cfg.Tune != nil {
		cfg.Tune(&kcfg)
	}
	k, err := kubelet.New(kcfg)
	if err != nil {
		return fail(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := k.Run(ctx); err != nil {
			cfg.Logger.Error("kubelet stopped", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}, nil
}
