// Package server assembles wasmplane: embedded or external etcd, the API server with its
// storage, admission, authorization and WASM plugins, then the controllers, the scheduler
// and a kubelet, each behind its Disable flag, and the admin kubeconfig. It is the only
// package that knows every component; Start reads as the list of them.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	admissionplugins "github.com/wasmplane/wasmplane/core/admission/plugins"
	"github.com/wasmplane/wasmplane/core/apiserver"
	"github.com/wasmplane/wasmplane/core/apiserver/servicealloc"
	"github.com/wasmplane/wasmplane/core/pki"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Config is what `wasmplane up` is started with.
type Config struct {
	// DataDir holds etcd's data and the kubeconfig (default ./.wasmplane).
	DataDir string
	// EtcdServers, when set, are an external etcd cluster; nothing is embedded.
	EtcdServers []string
	// BindAddress is the API server's listen address (default 127.0.0.1).
	BindAddress string
	// Port is the API server's port (default 6443; 0 picks a free one).
	Port int
	// CompactionInterval is how often etcd is compacted (default 5 min).
	CompactionInterval time.Duration
	// DisableControllers leaves the controllers to a separate controller-manager (or, in
	// tests, to a controller manager of the test's own).
	DisableControllers bool
	// DisableScheduler leaves scheduling to a separate scheduler.
	DisableScheduler bool
	// Controllers tunes individual controllers (when they run in this process).
	Controllers ControllerConfig
	// InitializerTimeout fails objects whose initializer does not act in time (default 30 s).
	InitializerTimeout time.Duration
	// PluginCeilings cap the limits of tenants' (namespaced) WasmPlugins; zero fields take
	// the defaults, negative ones lift the ceiling.
	PluginCeilings admissionplugins.PluginCeilings
	// WasmCallBounds bound the guest code that runs at once and suspend plugins that keep
	// running out of time or memory (zero fields: the defaults).
	WasmCallBounds wasm.CallBounds
	// Logger receives structured logs; nil = discarded.
	Logger *slog.Logger
	// TLSSANs are extra names and IPs of the serving certificate.
	TLSSANs []string
	// TLSMinVersion is the lowest TLS version served (kube-apiserver's --tls-min-version:
	// VersionTLS10…VersionTLS13; empty = VersionTLS12).
	TLSMinVersion string
	// TLSCipherSuites are the TLS 1.0–1.2 cipher suites served, by IANA name
	// (kube-apiserver's --tls-cipher-suites; empty = Go's defaults).
	TLSCipherSuites []string
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound concurrent reads and
	// writes; beyond them requests get 429 with Retry-After (0 = 400 and 200, as
	// kube-apiserver's defaults).
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// MetricsResolution is how often kubelets are scraped for metrics.k8s.io (0 = 15 s;
	// negative = metrics.k8s.io is not served).
	MetricsResolution time.Duration
	// DisablePriorityAndFairness turns API Priority and Fairness off (kube-apiserver's
	// --enable-priority-and-fairness=false): the two in-flight limits apply instead.
	// With it on, their sum is the concurrency the priority levels share.
	DisablePriorityAndFairness bool
	// APFRefusalHold is the longest API Priority and Fairness holds a refusal of a flow
	// that has been refused continuously for a while before answering it with 429; it
	// is held for the Retry-After it carries, within this (a wasmplane protection
	// kube-apiserver does not have: a client flooding past its share then costs the
	// server almost nothing). 0 = filters.DefaultRefusalHold (8 s), negative = refusals
	// are answered at once, as kube-apiserver answers them.
	APFRefusalHold time.Duration
	// FlowControlBootstrapInterval is how often the APF bootstrap configuration is
	// re-ensured (0 = every minute, as kube-apiserver; tests shorten it).
	FlowControlBootstrapInterval time.Duration
	// InsecurePort, when non-zero, also serves plain HTTP without authentication on
	// loopback (tests and debugging only; -1 picks a free port).
	InsecurePort int
	// TokenAuthFile is a static token file (Kubernetes' CSV format).
	TokenAuthFile string
	// APIAudiences are the audiences the server accepts (default: the issuer).
	APIAudiences []string
	// ServiceAccountIssuer is the iss of ServiceAccount tokens.
	ServiceAccountIssuer string
	// AnonymousAuth lets requests without credentials reach the health and version paths.
	AnonymousAuth bool
	// AuthenticationOrder orders the authenticators (default DefaultAuthenticationOrder).
	AuthenticationOrder []string
	// RunKubelet runs a node (kubelet + container runtime) in this process, as `up` does
	// unless --disable-kubelet; library users and tests get none unless they ask.
	RunKubelet bool
	// NodeName names this process's node (default the hostname).
	NodeName string
	// KubeletPort is the kubelet's HTTPS port (0 = 10250, -1 = a free port).
	KubeletPort int
	// ContainerRuntimeEndpoint is a CRI socket (e.g. containerd's); empty = the built-in
	// WASI runtime.
	ContainerRuntimeEndpoint string
	// ServiceCIDR is the range of Services' cluster IPs (kube-apiserver's
	// --service-cluster-ip-range; zero = 10.96.0.0/12, kubeadm's default). Its first
	// address is the `kubernetes` Service's.
	ServiceCIDR netip.Prefix
	// NodePortRange is the range of node ports (zero = 30000-32767).
	NodePortRange servicealloc.PortRange
	// AdvertiseAddress is the address listed in the `kubernetes` Service's endpoints
	// (kube-apiserver's --advertise-address); zero = the bind address, or the host's first
	// non-loopback address when it binds every address.
	AdvertiseAddress netip.Addr
}

// Instance is a running wasmplane control plane.
type Instance struct {
	url        string
	insecure   string
	kubeconfig string
	sec        *security
	cancel     context.CancelFunc
	done       chan struct{}
	// failed receives the first error of a component that stopped by itself.
	failed    chan error
	err       error
	closeOnce sync.Once
	mu        sync.Mutex
	// stops are the started components' stop functions, in the order they started.
	stops []func()
	api   *apiserver.Server
	etcd  []string
}

// URL is the API server's base URL.
func (i *Instance) URL() string { return i.url }

// KubeconfigPath is the admin kubeconfig written for this instance.
func (i *Instance) KubeconfigPath() string { return i.kubeconfig }

// RESTConfig is an admin client configuration for this instance (the admin client
// certificate, group system:masters).
func (i *Instance) RESTConfig() *rest.Config { return i.sec.adminConfig(i.url) }

// InsecureURL is the plain-HTTP, unauthenticated URL ("" unless Config.InsecurePort).
func (i *Instance) InsecureURL() string { return i.insecure }

// CA is the cluster CA certificate (PEM).
func (i *Instance) CA() []byte { return i.sec.ca.CertPEM }

// IssueClientCertificate signs a client certificate for user in groups (PEM cert, key).
func (i *Instance) IssueClientCertificate(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	return i.sec.ca.Issue(pki.Leaf{CommonName: user, Organizations: groups, Usage: pki.ClientAuth})
}

// loopbackConfig is how the server's own components reach it.
func (i *Instance) loopbackConfig() *rest.Config { return i.sec.loopbackConfig(i.url) }

// EtcdEndpoints are the client URLs of the etcd the instance stores into (tests compact
// and inspect etcd directly through them).
func (i *Instance) EtcdEndpoints() []string { return append([]string(nil), i.etcd...) }

// APIServer exposes the assembled API server (tests and bootstrapping).
func (i *Instance) APIServer() *apiserver.Server { return i.api }

// Done is closed when the instance has stopped.
func (i *Instance) Done() <-chan struct{} { return i.done }

// Err is why the instance stopped (nil after a requested stop).
func (i *Instance) Err() error { return i.err }

// Close stops everything and waits for it.
func (i *Instance) Close() {
	i.closeOnce.Do(func() { i.cancel() })
	<-i.done
}

// Start brings the control plane up and returns when it serves requests. The
// components start in this order, each ready before the next starts, and stop in the
// reverse order when ctx ends, when Close is called or when one of them fails.
func Start(ctx context.Context, cfg Config) (*Instance, error) {
	cfg.setDefaults()
	servingPolicy, err := parseServingTLS(cfg.TLSMinVersion, cfg.TLSCipherSuites)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data dir: %w", err)
	}
	sec, err := setupSecurity(&cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	inst := &Instance{cancel: cancel, done: make(chan struct{}), failed: make(chan error, 1), sec: sec, etcd: cfg.EtcdServers}
	p := &plane{inst: inst, cfg: cfg, log: cfg.Logger, servingPolicy: servingPolicy}
	components := []component{
		{"embedded etcd", len(cfg.EtcdServers) > 0, p.startEtcd},
		{"API server", false, p.startAPIServer},
		{"admission webhooks and policies", false, p.startAdmissionSources},
		{"authorizer", false, p.startAuthorizer},
		{"priority and fairness", cfg.DisablePriorityAndFairness, p.startFlowControl},
		{"WASM plugin manager", false, p.startPlugins},
		{"custom resources", false, p.background(p.runCustomResources)},
		{"local APIServices", false, p.background(p.runAPIServices)},
		{"resource metrics", false, p.background(p.runResourceMetrics)},
		{"kubernetes Service", false, p.startKubernetesService},
		{"authentication trust", false, p.startAuthenticationTrust},
		{"controllers", cfg.DisableControllers, p.startControllers},
		{"scheduler", cfg.DisableScheduler, p.startScheduler},
		{"kubelet", !cfg.RunKubelet, p.startKubelet},
	}
	go inst.supervise(ctx)
	for _, c := range components {
		if c.disabled {
			continue
		}
		if err := c.start(ctx); err != nil {
			inst.Close()
			return nil, fmt.Errorf("starting the %s: %w", c.name, err)
		}
	}
	cfg.Logger.Info("wasmplane API server ready", "url", inst.url, "kubeconfig", inst.kubeconfig, "etcd", inst.etcd)
	return inst, nil
}

// setDefaults fills in what Config documents as defaults.
func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.DataDir == "" {
		c.DataDir = ".wasmplane"
	}
	if c.BindAddress == "" {
		c.BindAddress = "127.0.0.1"
	}
	if c.CompactionInterval == 0 {
		c.CompactionInterval = 5 * time.Minute
	}
}

// supervise stops every component, the last started first, once ctx ends or a
// component reports that it failed; it is the only place that stops them.
func (i *Instance) supervise(ctx context.Context) {
	defer close(i.done)
	select {
	case <-ctx.Done():
	case err := <-i.failed:
		i.err = err
	}
	i.cancel()
	i.mu.Lock()
	stops := i.stops
	i.stops = nil
	i.mu.Unlock()
	for j := len(stops) - 1; j >= 0; j-- {
		stops[j]()
	}
}

// onStop registers the stop of a component that has started.
func (i *Instance) onStop(stop func()) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.stops = append(i.stops, stop)
}

// fail stops the instance because a component failed while running; the first failure
// is the one Err reports.
func (i *Instance) fail(err error) {
	select {
	case i.failed <- err:
	default:
	}
}

// urlHost is the host:port clients should dial: an unspecified bind address is reached
// on loopback.
func urlHost(a *net.TCPAddr) string {
	ip := a.IP
	if ip.IsUnspecified() {
		ip = net.ParseIP("127.0.0.1")
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(a.Port))
}

// Kubeconfig encodes a kubeconfig for rc (server, CA and credentials embedded) with user
// as the user entry's name.
func Kubeconfig(rc *rest.Config, user string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["wasmplane"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData, Token: rc.BearerToken}
	cfg.Contexts["wasmplane"] = &clientcmdapi.Context{Cluster: "wasmplane", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "wasmplane"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig: %w", err)
	}
	return data, nil
}

// writeKubeconfig writes a kubeconfig for rc with mode 0600.
func writeKubeconfig(path string, rc *rest.Config, user string) error {
	data, err := Kubeconfig(rc, user)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}
