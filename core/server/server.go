// Package server assembles wasmplane: embedded or external etcd, storage with watch
// caches, the API server, and the admin kubeconfig. It is the only package that knows
// every component.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/wasmplane/wasmplane/core/admission"
	admissionplugins "github.com/wasmplane/wasmplane/core/admission/plugins"
	"github.com/wasmplane/wasmplane/core/admission/webhook"
	"github.com/wasmplane/wasmplane/core/api"
	"github.com/wasmplane/wasmplane/core/apiserver"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/apiserver/servicealloc"
	"github.com/wasmplane/wasmplane/core/pki"
	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/blobs"
	"github.com/wasmplane/wasmplane/core/storage/etcdserver"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/manager"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	// DisableControllers leaves the controllers to a separate controller-manager.
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
	// Logger receives structured logs; nil = slog.Default().
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
	err        error
	closeOnce  sync.Once
	mu         sync.Mutex
	closers    []func()
	// beforeShutdown runs while the server still serves, when it is stopping (this server
	// takes itself out of the kubernetes endpoints through its own API).
	beforeShutdown []func()
	api            *apiserver.Server
	etcd           []string
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

// Start brings the control plane up and returns when it serves requests.
func Start(ctx context.Context, cfg Config) (*Instance, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.DataDir == "" {
		cfg.DataDir = ".wasmplane"
	}
	if cfg.BindAddress == "" {
		cfg.BindAddress = "127.0.0.1"
	}
	if cfg.CompactionInterval == 0 {
		cfg.CompactionInterval = 5 * time.Minute
	}
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
	inst := &Instance{cancel: cancel, done: make(chan struct{}), sec: sec}
	fail := func(err error) (*Instance, error) {
		cancel()
		inst.runClosers()
		close(inst.done)
		return nil, err
	}
	endpoints := cfg.EtcdServers
	if len(endpoints) == 0 {
		etcd, err := etcdserver.Start(ctx, etcdserver.Config{DataDir: filepath.Join(cfg.DataDir, "etcd"), Logger: log})
		if err != nil {
			return fail(fmt.Errorf("starting embedded etcd: %w", err))
		}
		inst.closers = append(inst.closers, etcd.Close)
		endpoints = etcd.Endpoints()
	}
	inst.etcd = endpoints
	client, err := storage.NewClient(storage.ClientConfig{Endpoints: endpoints})
	if err != nil {
		return fail(fmt.Errorf("connecting to etcd: %w", err))
	}
	inst.closers = append(inst.closers, func() { _ = client.Close() })
	scheme, err := api.NewScheme()
	if err != nil {
		return fail(err)
	}
	codec := storage.NewCodec(scheme)
	var cachers []*storage.Cacher
	compacted := &storage.CompactedRevision{}
	factory := func(res *registry.Resource, prefix string) (storage.Interface, error) {
		etcdStore := storage.NewEtcd(client, storage.ResourceConfig{
			GroupResource: res.GroupResource(), Prefix: prefix, NewFunc: res.NewFunc, NewListFunc: res.NewListFunc,
			Codec: codec, GetAttrs: registry.StorageAttrs(res),
		}, storage.WithLogger(log))
		c := storage.NewCacher(etcdStore, storage.CacherConfig{Logger: log, Compacted: compacted})
		cachers = append(cachers, c)
		return c, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fail(fmt.Errorf("listening for the API server: %w", err))
	}
	// Closing an already-served listener is harmless; this covers the failure paths below.
	inst.closers = append(inst.closers, func() { _ = ln.Close() })
	inst.url = "https://" + urlHost(ln.Addr().(*net.TCPAddr))
	inst.kubeconfig = filepath.Join(cfg.DataDir, "admin.kubeconfig")
	if err := writeKubeconfig(inst.kubeconfig, inst.RESTConfig(), "admin"); err != nil {
		return fail(err)
	}
	var insecureLn net.Listener
	if cfg.InsecurePort != 0 {
		port := max(cfg.InsecurePort, 0)
		if insecureLn, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
			return fail(fmt.Errorf("listening on the insecure port: %w", err))
		}
		inst.closers = append(inst.closers, func() { _ = insecureLn.Close() })
		inst.insecure = "http://" + insecureLn.Addr().String()
	}
	tlsConfig, err := sec.tlsConfig()
	if err != nil {
		return fail(err)
	}
	servingPolicy.apply(tlsConfig, log)
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The scheduler's runtime registers the same wasm metrics; the label tells them apart.
	wasmRuntime, err := wasm.NewRuntime(ctx, wasm.RuntimeConfig{CacheDir: filepath.Join(cfg.DataDir, "wasm-cache"), Logger: log,
		Registerer: registererWith(metrics, "apiserver"), CallBounds: cfg.WasmCallBounds})
	if err != nil {
		return fail(fmt.Errorf("starting the WASM runtime: %w", err))
	}
	inst.closers = append(inst.closers, func() { _ = wasmRuntime.Close(context.Background()) })
	plugins, err := newPluginManager(inst.loopbackConfig(), wasmRuntime, cfg.InitializerTimeout, log,
		manager.AuthnConfig{APIAudiences: sec.audiences, VerifiedCertificate: sec.verifiedCertificate})
	if err != nil {
		return fail(err)
	}
	// The getters reach the server's storage, which exists only once the server is built.
	var srv *apiserver.Server
	chain, err := sec.authenticator(&cfg, lookupGetter{
		cached: func(ctx context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
			return srv.LookupCached(ctx, gr, ns, name)
		},
		fresh: func(ctx context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
			return srv.Lookup(ctx, gr, ns, name)
		}}, plugins, log)
	if err != nil {
		return fail(fmt.Errorf("authentication: %w", err))
	}
	authzInformers, authorizer, rbac, err := newAuthorizer(inst.loopbackConfig())
	if err != nil {
		return fail(err)
	}
	kubeletTLS, err := sec.kubeletClientTLS()
	if err != nil {
		return fail(err)
	}
	webhooks, err := newWebhooks(inst.loopbackConfig(), scheme, &srv, log)
	if err != nil {
		return fail(err)
	}
	policies, err := newPolicies(inst.loopbackConfig(), scheme, &srv, authorizer, log)
	if err != nil {
		return fail(err)
	}
	var apf *flowControl
	if !cfg.DisablePriorityAndFairness {
		limit := cmp.Or(cfg.MaxRequestsInFlight, 400) + cmp.Or(cfg.MaxMutatingRequestsInFlight, 200)
		if apf, err = newFlowControl(inst.loopbackConfig(), limit, cfg.FlowControlBootstrapInterval, log); err != nil {
			return fail(err)
		}
	}
	// The node port bitmap is one key, read and written by every API server of the cluster
	// with optimistic concurrency; it is kept where Kubernetes keeps it.
	nodePorts := servicealloc.StorageRangeStore{Key: servicealloc.NodePortsKey, Storage: storage.NewEtcd(client, storage.ResourceConfig{
		GroupResource: corev1.Resource("rangeallocations"), Prefix: "/registry/ranges", Codec: codec,
		NewFunc: func() runtime.Object { return &corev1.RangeAllocation{} }, NewListFunc: func() runtime.Object { return &metav1.List{} },
	}, storage.WithLogger(log))}
	proxyCert, err := sec.proxyClientCertificate()
	if err != nil {
		return fail(err)
	}
	extra := map[string]http.Handler{"/debug/pprof/": http.HandlerFunc(pprof.Index),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile), "/debug/pprof/trace": http.HandlerFunc(pprof.Trace)}
	moreMetrics := []prometheus.Gatherer{webhook.Metrics()}
	apiCfg := apiserver.Config{
		ServiceCIDR: cfg.ServiceCIDR, NodePortRange: cfg.NodePortRange, NodePorts: nodePorts, Logger: log,
		Authorizer: authorizer, RuleResolver: rbac, KubeletClientTLS: kubeletTLS, Scheme: scheme, Storage: factory, Metrics: metrics, Blobs: blobs.New(client, "/wasmplane/blobs"),
		Authenticator:       chain,
		MaxRequestsInFlight: cfg.MaxRequestsInFlight, MaxMutatingRequestsInFlight: cfg.MaxMutatingRequestsInFlight,
		MetricsResolution: cfg.MetricsResolution,
		TokenReviewer:     tokenReviewer(chain),
		TokenRequest:      &resources.TokenRequestConfig{Issuer: sec.signer, APIAudiences: sec.audiences},
		AdmissionSources:  []admission.Source{policies, webhooks, plugins}, InitializerWaiting: plugins.Waiting, PluginCeilings: cfg.PluginCeilings,
		// Profiling is on, as with kube-apiserver's --profiling default.
		ExtraHandlers: extra, ProxyClientCertificate: proxyCert}
	if apf != nil {
		apiCfg.FlowControl = apf.controller
		extra[apfDebugPrefix] = apf.debug
		moreMetrics = append(moreMetrics, flowControlMetrics())
	}
	apiCfg.MoreMetrics = moreMetrics
	srv, err = apiserver.New(apiCfg)
	if err != nil {
		return fail(fmt.Errorf("building API server: %w", err))
	}
	inst.api = srv
	inst.closers = append(inst.closers, func() {
		for _, c := range cachers {
			c.Stop()
		}
	})
	compactor := storage.NewCompactor(client, cfg.CompactionInterval, log)
	compactor.Compacted = compacted
	compactor.Start(ctx)
	inst.closers = append(inst.closers, compactor.Stop)
	if err := srv.EnsureSystemNamespaces(ctx); err != nil {
		return fail(err)
	}
	if err := srv.EnsureSystemPriorityClasses(ctx); err != nil {
		return fail(err)
	}
	if err := srv.EnsureServiceCIDR(ctx); err != nil {
		return fail(err)
	}
	hs := &http.Server{Handler: srv.Handler, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 1 << 20, TLSConfig: tlsConfig}
	serveErr := make(chan error, 2)
	go func() { serveErr <- hs.ServeTLS(ln, "", "") }()
	var his *http.Server
	if insecureLn != nil {
		his = &http.Server{Handler: srv.InsecureHandler, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 1 << 20}
		go func() { serveErr <- his.Serve(insecureLn) }()
	}
	go func() {
		defer close(inst.done)
		select {
		case <-ctx.Done():
		case err := <-serveErr:
			if !errors.Is(err, http.ErrServerClosed) {
				inst.err = fmt.Errorf("API server: %w", err)
			}
		}
		inst.mu.Lock()
		before := inst.beforeShutdown
		inst.beforeShutdown = nil
		inst.mu.Unlock()
		for _, f := range before {
			f()
		}
		shutdownCtx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		// Watches are long-running: close them rather than wait the full timeout.
		_ = hs.Shutdown(shutdownCtx)
		_ = hs.Close()
		if his != nil {
			_ = his.Close()
		}
		cancel()
		inst.runClosers()
	}()
	// The webhooks' informers start first: the bootstrap writes below pass through
	// admission, which waits for them to sync (as kube-apiserver's post-start hooks do).
	webhooksDone := make(chan struct{})
	go func() {
		defer close(webhooksDone)
		webhooks.Run(ctx)
	}()
	policiesDone := make(chan struct{})
	go func() {
		defer close(policiesDone)
		if err := policies.Run(ctx); err != nil {
			log.Error("admission policies stopped", "err", err)
		}
	}()
	if err := startAuthorizer(ctx, authzInformers, inst.loopbackConfig()); err != nil {
		cancel()
		<-inst.done
		<-webhooksDone
		<-policiesDone
		return nil, err
	}
	if apf != nil {
		stopAPF := apf.start(ctx)
		inst.mu.Lock()
		inst.closers = append(inst.closers, stopAPF)
		inst.mu.Unlock()
	}
	pluginsDone := make(chan struct{})
	go func() {
		defer close(pluginsDone)
		if err := plugins.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("WASM plugin manager stopped", "err", err)
		}
	}()
	// Custom resources are served from the CustomResourceDefinitions as they come and go.
	crdsDone := make(chan struct{})
	go func() {
		defer close(crdsDone)
		srv.RunCustomResources(ctx, log)
	}()
	// Local APIServices follow the served group versions, as kube-apiserver's autoregister.
	apiServicesDone := make(chan struct{})
	go func() {
		defer close(apiServicesDone)
		srv.RunAPIServices(ctx, log)
	}()
	// Resource metrics (metrics.k8s.io) are scraped from kubelets, as metrics-server does.
	resourceMetricsDone := make(chan struct{})
	go func() {
		defer close(resourceMetricsDone)
		srv.RunResourceMetrics(ctx)
	}()
	inst.mu.Lock()
	inst.closers = append(inst.closers, func() { <-pluginsDone }, func() { <-crdsDone }, func() { <-apiServicesDone }, func() { <-resourceMetricsDone },
		func() { <-webhooksDone }, func() { <-policiesDone })
	inst.mu.Unlock()
	stopKubernetesService, err := startKubernetesService(ctx, inst.loopbackConfig(), srv.ServiceIPs().Reserved(),
		advertiseAddress(cfg.AdvertiseAddress, ln.Addr().(*net.TCPAddr)), int32(ln.Addr().(*net.TCPAddr).Port), log)
	if err != nil {
		cancel()
		<-inst.done
		return nil, err
	}
	inst.mu.Lock()
	inst.beforeShutdown = append(inst.beforeShutdown, stopKubernetesService)
	inst.mu.Unlock()
	stopTrust, err := startAuthenticationTrust(ctx, inst.loopbackConfig(), sec, log)
	if err != nil {
		cancel()
		<-inst.done
		return nil, err
	}
	inst.mu.Lock()
	inst.closers = append(inst.closers, stopTrust)
	inst.mu.Unlock()
	ctrlCtx := ctx
	if cfg.DisableControllers {
		ctrlCtx = WithoutControllers(ctx)
	}
	stopControllers, err := startControllers(ctrlCtx, inst.loopbackConfig(), sec.ca, cfg.Controllers, log)
	if err != nil {
		cancel()
		<-inst.done
		return nil, err
	}
	inst.mu.Lock()
	inst.closers = append(inst.closers, stopControllers)
	inst.mu.Unlock()
	if !cfg.DisableScheduler {
		stopScheduler, err := startSchedulerWithPlugins(ctx, inst.loopbackConfig(), log, metrics, filepath.Join(cfg.DataDir, "wasm-cache-scheduler"), true, cfg.WasmCallBounds)
		if err != nil {
			cancel()
			<-inst.done
			return nil, err
		}
		inst.mu.Lock()
		inst.closers = append(inst.closers, stopScheduler)
		inst.mu.Unlock()
	}
	if cfg.RunKubelet {
		nc, err := sec.localNode(&cfg, inst.url)
		if err != nil {
			cancel()
			<-inst.done
			return nil, err
		}
		nc.Logger = log
		stopNode, err := startNode(ctx, nc)
		if err != nil {
			cancel()
			<-inst.done
			return nil, fmt.Errorf("starting the node: %w", err)
		}
		inst.mu.Lock()
		inst.closers = append(inst.closers, stopNode)
		inst.mu.Unlock()
	}
	log.Info("wasmplane API server ready", "url", inst.url, "kubeconfig", inst.kubeconfig, "etcd", endpoints)
	return inst, nil
}

func (i *Instance) runClosers() {
	i.mu.Lock()
	closers := i.closers
	i.closers = nil
	i.mu.Unlock()
	for j := len(closers) - 1; j >= 0; j-- {
		closers[j]()
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
