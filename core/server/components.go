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
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/admission/policy"
	"github.com/wasmplane/wasmplane/core/admission/webhook"
	"github.com/wasmplane/wasmplane/core/api"
	"github.com/wasmplane/wasmplane/core/apiserver"
	"github.com/wasmplane/wasmplane/core/apiserver/filters"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/apiserver/servicealloc"
	"github.com/wasmplane/wasmplane/core/node"
	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/blobs"
	"github.com/wasmplane/wasmplane/core/storage/etcdserver"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/manager"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
)

// component is one step of Start, started in turn unless disabled. Whatever it starts
// registers its stop with Instance.onStop as soon as it runs, so a failure half-way
// needs no clean-up of its own: the instance stops what has started, last first. Stops
// run after ctx has ended and wait for their part to finish.
type component struct {
	name     string
	disabled bool
	start    func(ctx context.Context) error
}

// background makes a component of a function that runs until ctx ends.
func (p *plane) background(run func(ctx context.Context)) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		done := make(chan struct{})
		go func() {
			defer close(done)
			run(ctx)
		}()
		p.inst.onStop(func() { <-done })
		return nil
	}
}

// started registers the stop of a part that started (or started in part: a non-nil stop
// with an error), passing its error on.
func (p *plane) started(stop func(), err error) error {
	if stop != nil {
		p.inst.onStop(stop)
	}
	return err
}

// plane holds what the components of one Instance build and hand on to the later ones.
type plane struct {
	inst          *Instance
	cfg           Config
	log           *slog.Logger
	servingPolicy servingTLS

	ln             net.Listener
	srv            *apiserver.Server
	metrics        *prometheus.Registry
	plugins        *manager.Manager
	webhooks       *webhook.Webhooks
	policies       *policy.Policies
	apf            *flowControl
	authzInformers informers.SharedInformerFactory
}

// startEtcd runs the embedded etcd; it returns once etcd serves.
func (p *plane) startEtcd(ctx context.Context) error {
	etcd, err := etcdserver.Start(ctx, etcdserver.Config{DataDir: filepath.Join(p.cfg.DataDir, "etcd"), Logger: p.log})
	if err != nil {
		return err
	}
	p.inst.onStop(etcd.Close)
	p.inst.etcd = etcd.Endpoints()
	return nil
}

// startAPIServer builds the API server with its storage, authentication, authorization,
// admission and WASM host, and serves it; it returns once the server answers requests and
// the system namespaces, priority classes and service CIDR exist. The admission sources,
// the authorizer and priority and fairness are built here (the server's config takes
// them) but run as the components after it, through the server's loopback client.
func (p *plane) startAPIServer(ctx context.Context) error {
	cfg, log, inst, sec := &p.cfg, p.log, p.inst, p.inst.sec
	client, err := storage.NewClient(storage.ClientConfig{Endpoints: inst.etcd})
	if err != nil {
		return fmt.Errorf("connecting to etcd: %w", err)
	}
	inst.onStop(func() { _ = client.Close() })
	scheme, err := api.NewScheme()
	if err != nil {
		return err
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
	if p.ln, err = net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port))); err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	// Closing a listener the server has already closed is harmless; this covers failures.
	inst.onStop(func() { _ = p.ln.Close() })
	inst.url = "https://" + urlHost(p.ln.Addr().(*net.TCPAddr))
	inst.kubeconfig = filepath.Join(cfg.DataDir, "admin.kubeconfig")
	if err := writeKubeconfig(inst.kubeconfig, inst.RESTConfig(), "admin"); err != nil {
		return err
	}
	var insecureLn net.Listener
	if cfg.InsecurePort != 0 {
		port := max(cfg.InsecurePort, 0)
		if insecureLn, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
			return fmt.Errorf("listening on the insecure port: %w", err)
		}
		inst.onStop(func() { _ = insecureLn.Close() })
		inst.insecure = "http://" + insecureLn.Addr().String()
	}
	tlsConfig, err := sec.tlsConfig()
	if err != nil {
		return err
	}
	p.servingPolicy.apply(tlsConfig, log)
	p.metrics = prometheus.NewRegistry()
	p.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The scheduler's runtime registers the same wasm metrics; the label tells them apart.
	wasmRuntime, err := wasm.NewRuntime(ctx, wasm.RuntimeConfig{CacheDir: filepath.Join(cfg.DataDir, "wasm-cache"), Logger: log,
		Registerer: registererWith(p.metrics, "apiserver"), CallBounds: cfg.WasmCallBounds})
	if err != nil {
		return fmt.Errorf("starting the WASM runtime: %w", err)
	}
	inst.onStop(func() { _ = wasmRuntime.Close(context.Background()) })
	loopback := inst.loopbackConfig()
	if p.plugins, err = newPluginManager(loopback, wasmRuntime, cfg.InitializerTimeout, log,
		manager.AuthnConfig{APIAudiences: sec.audiences, VerifiedCertificate: sec.verifiedCertificate}); err != nil {
		return err
	}
	// The getters reach the server's storage, which exists only once the server is built.
	chain, err := sec.authenticator(cfg, lookupGetter{
		cached: func(ctx context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
			return p.srv.LookupCached(ctx, gr, ns, name)
		},
		fresh: func(ctx context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
			return p.srv.Lookup(ctx, gr, ns, name)
		}}, p.plugins, log)
	if err != nil {
		return fmt.Errorf("authentication: %w", err)
	}
	authzInformers, authorizer, rbac, err := newAuthorizer(loopback)
	if err != nil {
		return err
	}
	p.authzInformers = authzInformers
	kubeletTLS, err := sec.kubeletClientTLS()
	if err != nil {
		return err
	}
	if p.webhooks, err = newWebhooks(loopback, scheme, &p.srv, log); err != nil {
		return err
	}
	if p.policies, err = newPolicies(loopback, scheme, &p.srv, authorizer, log); err != nil {
		return err
	}
	if !cfg.DisablePriorityAndFairness {
		limit := cmp.Or(cfg.MaxRequestsInFlight, 400) + cmp.Or(cfg.MaxMutatingRequestsInFlight, 200)
		if p.apf, err = newFlowControl(loopback, limit, cfg.FlowControlBootstrapInterval, log); err != nil {
			return err
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
		return err
	}
	extra := map[string]http.Handler{"/debug/pprof/": http.HandlerFunc(pprof.Index),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile), "/debug/pprof/trace": http.HandlerFunc(pprof.Trace)}
	moreMetrics := []prometheus.Gatherer{webhook.Metrics()}
	apiCfg := apiserver.Config{
		ServiceCIDR: cfg.ServiceCIDR, NodePortRange: cfg.NodePortRange, NodePorts: nodePorts, Logger: log,
		Authorizer: authorizer, RuleResolver: rbac, KubeletClientTLS: kubeletTLS, Scheme: scheme, Storage: factory, Metrics: p.metrics, Blobs: blobs.New(client, "/wasmplane/blobs"),
		Authenticator:       chain,
		MaxRequestsInFlight: cfg.MaxRequestsInFlight, MaxMutatingRequestsInFlight: cfg.MaxMutatingRequestsInFlight,
		MetricsResolution: cfg.MetricsResolution,
		ComponentProbe:    componentProbe(client, cfg.DisableScheduler, cfg.DisableControllers),
		TokenReviewer:     tokenReviewer(chain),
		TokenRequest:      &resources.TokenRequestConfig{Issuer: sec.signer, APIAudiences: sec.audiences},
		AdmissionSources:  []admission.Source{p.policies, p.webhooks, p.plugins}, InitializerWaiting: p.plugins.Waiting, PluginCeilings: cfg.PluginCeilings,
		// Profiling is on, as with kube-apiserver's --profiling default.
		ExtraHandlers: extra, ProxyClientCertificate: proxyCert}
	if p.apf != nil {
		apiCfg.FlowControl = p.apf.controller
		if cfg.APFRefusalHold >= 0 {
			holder := filters.HoldRefusals(p.apf.controller, filters.RefusalHoldConfig{Hold: cfg.APFRefusalHold}, ctx.Done())
			p.metrics.MustRegister(holder)
			apiCfg.FlowControl = holder
		}
		extra[apfDebugPrefix] = p.apf.debug
		moreMetrics = append(moreMetrics, flowControlMetrics())
	}
	apiCfg.MoreMetrics = moreMetrics
	if p.srv, err = apiserver.New(apiCfg); err != nil {
		return fmt.Errorf("building the handlers: %w", err)
	}
	inst.api = p.srv
	inst.onStop(func() {
		for _, c := range cachers {
			c.Stop()
		}
	})
	compactor := storage.NewCompactor(client, cfg.CompactionInterval, log)
	compactor.Compacted = compacted
	compactor.Start(ctx)
	inst.onStop(compactor.Stop)
	if err := p.srv.EnsureSystemNamespaces(ctx); err != nil {
		return err
	}
	if err := p.srv.EnsureSystemPriorityClasses(ctx); err != nil {
		return err
	}
	if err := p.srv.EnsureServiceCIDR(ctx); err != nil {
		return err
	}
	servers := []*http.Server{{Handler: p.srv.Handler, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 1 << 20, TLSConfig: tlsConfig}}
	go p.serve(func() error { return servers[0].ServeTLS(p.ln, "", "") })
	if insecureLn != nil {
		servers = append(servers, &http.Server{Handler: p.srv.InsecureHandler, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 1 << 20})
		go p.serve(func() error { return servers[1].Serve(insecureLn) })
	}
	inst.onStop(func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Watches are long-running: close them rather than wait the full timeout.
		_ = servers[0].Shutdown(shutdownCtx)
		for _, hs := range servers {
			_ = hs.Close()
		}
	})
	return nil
}

// componentProbe reports the components as kube-apiserver's componentstatuses do: etcd
// by a read with a short deadline, the scheduler and the controllers as healthy when this
// process runs them (they stop with it), and as not probed when they run elsewhere
// (`wasmplane scheduler`, `wasmplane controller-manager`, kube-controller-manager), where
// kube-apiserver would probe fixed localhost ports.
func componentProbe(client *clientv3.Client, noScheduler, noControllers bool) resources.ComponentProbe {
	inProcess := func(name string, disabled bool) corev1.ComponentStatus {
		if !disabled {
			return resources.ComponentStatus(name, "ok", nil)
		}
		c := resources.ComponentStatus(name, "", nil)
		c.Conditions[0].Status = corev1.ConditionUnknown
		c.Conditions[0].Error = "not run by this server process; not probed"
		return c
	}
	return func(ctx context.Context) []corev1.ComponentStatus {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := client.Get(ctx, "health")
		if err != nil {
			err = fmt.Errorf("reading from etcd: %w", err)
		}
		return []corev1.ComponentStatus{
			inProcess("scheduler", noScheduler),
			inProcess("controller-manager", noControllers),
			resources.ComponentStatus("etcd-0", `{"health":"true"}`, err),
		}
	}
}

// serve runs one of the API server's HTTP servers; if it stops by itself, the instance
// stops.
func (p *plane) serve(serve func() error) {
	if err := serve(); !errors.Is(err, http.ErrServerClosed) {
		p.inst.fail(fmt.Errorf("API server: %w", err))
	}
}

// startAdmissionSources runs the informers of the admission webhooks and policies. They
// start before the bootstrap writes below: those pass through admission, which waits for
// them to sync (as kube-apiserver's post-start hooks do).
func (p *plane) startAdmissionSources(ctx context.Context) error {
	_ = p.background(p.webhooks.Run)(ctx)
	return p.background(func(ctx context.Context) {
		if err := p.policies.Run(ctx); err != nil {
			p.log.Error("admission policies stopped", "err", err)
		}
	})(ctx)
}

// startAuthorizer bootstraps the default RBAC policy and returns once the authorizer
// sees it.
func (p *plane) startAuthorizer(ctx context.Context) error {
	return p.started(startAuthorizer(ctx, p.authzInformers, p.inst.loopbackConfig()))
}

// startFlowControl runs API Priority and Fairness' configuration controller.
func (p *plane) startFlowControl(ctx context.Context) error {
	p.inst.onStop(p.apf.start(ctx))
	return nil
}

// startPlugins runs the WASM plugin manager: plugin objects load into the API server's
// authentication and admission as they come and go.
func (p *plane) startPlugins(ctx context.Context) error {
	return p.background(func(ctx context.Context) {
		if err := p.plugins.Run(ctx); err != nil && ctx.Err() == nil {
			p.log.Error("WASM plugin manager stopped", "err", err)
		}
	})(ctx)
}

// runCustomResources serves custom resources from the CustomResourceDefinitions as they
// come and go.
func (p *plane) runCustomResources(ctx context.Context) { p.srv.RunCustomResources(ctx, p.log) }

// runAPIServices keeps the local APIServices in step with the served group versions, as
// kube-apiserver's autoregister controller does.
func (p *plane) runAPIServices(ctx context.Context) { p.srv.RunAPIServices(ctx, p.log) }

// runResourceMetrics scrapes kubelets for metrics.k8s.io, as metrics-server does.
func (p *plane) runResourceMetrics(ctx context.Context) { p.srv.RunResourceMetrics(ctx) }

// startKubernetesService lists this server in the `default/kubernetes` Service's
// endpoints; stopping takes it out again while the server still serves.
func (p *plane) startKubernetesService(ctx context.Context) error {
	addr := p.ln.Addr().(*net.TCPAddr)
	return p.started(startKubernetesService(ctx, p.inst.loopbackConfig(), p.srv.ServiceIPs().Reserved(),
		advertiseAddress(p.cfg.AdvertiseAddress, addr), int32(addr.Port), p.log))
}

// startAuthenticationTrust publishes the CAs aggregated API servers trust.
func (p *plane) startAuthenticationTrust(ctx context.Context) error {
	return p.started(startAuthenticationTrust(ctx, p.inst.loopbackConfig(), p.inst.sec, p.log))
}

// startControllers runs the built-in controllers through client-go.
func (p *plane) startControllers(ctx context.Context) error {
	return p.started(startControllers(ctx, p.inst.loopbackConfig(), p.inst.sec.ca, p.cfg.Controllers, p.log))
}

// startScheduler runs the scheduler, with its own WASM runtime for Filter/Score plugins,
// through client-go.
func (p *plane) startScheduler(ctx context.Context) error {
	return p.started(startScheduler(ctx, p.inst.loopbackConfig(), p.log, p.metrics, filepath.Join(p.cfg.DataDir, "wasm-cache-scheduler"), p.cfg.WasmCallBounds))
}

// startKubelet runs this process's node: a kubelet and, unless another CRI runtime is
// configured, the built-in WASI runtime.
func (p *plane) startKubelet(ctx context.Context) error {
	nc, err := p.inst.sec.localNode(&p.cfg, p.inst.url)
	if err != nil {
		return err
	}
	nc.Logger = p.log
	return p.started(node.Start(ctx, nc))
}
