// Package apiserver assembles wasmplane's Kubernetes-compatible API server: the handler
// chain, the director, discovery, health and version endpoints, and every resource.
package apiserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/wasmplane/wasmplane/core/apiserver/aggregator"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/admission/plugins"
	"github.com/wasmplane/wasmplane/core/apiserver/apply"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/filters"
	"github.com/wasmplane/wasmplane/core/apiserver/mux"
	"github.com/wasmplane/wasmplane/core/apiserver/openapi"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/apiserver/servicealloc"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/blobs"
	"github.com/wasmplane/wasmplane/core/trace"
	buildversion "github.com/wasmplane/wasmplane/core/version"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/version"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// StorageFactory returns the storage of one resource kept under prefix.
type StorageFactory func(res *registry.Resource, prefix string) (storage.Interface, error)

// Config is what the API server is built from.
type Config struct {
	// Scheme knows every served type.
	Scheme *runtime.Scheme
	// Storage makes each resource's storage.
	Storage StorageFactory
	// Authenticator decides who each request is from; nil = everyone is system:admin.
	Authenticator authn.Authenticator
	// Metrics is where request metrics are registered; nil = a private registry.
	Metrics *prometheus.Registry
	// MoreMetrics are served on /metrics beside Metrics (metrics the Kubernetes libraries
	// keep in their own registry, such as the admission webhooks').
	MoreMetrics []prometheus.Gatherer
	// MaxRequestBodyBytes bounds request bodies (default 3 MiB).
	MaxRequestBodyBytes int64
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound concurrency (429 beyond)
	// when FlowControl is nil; with it, their sum is its server concurrency limit.
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// FlowControl, when set, is API Priority and Fairness (k8s.io/apiserver's config
	// controller, fed by FlowSchemas and PriorityLevelConfigurations): it replaces the
	// two in-flight limits, as kube-apiserver's --enable-priority-and-fairness does.
	FlowControl utilflowcontrol.Interface
	// AdmissionSources add dynamic admission plugins after the built-in ones, in order:
	// the admission webhooks, then the WASM plugins.
	AdmissionSources []admission.Source
	// PluginCeilings cap the limits of namespaced WasmPlugins (zero fields: defaults).
	PluginCeilings plugins.PluginCeilings
	// InitializerWaiting hears about objects stored with pending initializers (the WASM
	// plugin manager runs the initializers it knows); nil = nobody.
	InitializerWaiting func(gvr schema.GroupVersionResource, namespace, name string)
	// Blobs keeps uploaded WASM modules; nil = no module store.
	Blobs *blobs.Store
	// ExtraHandlers are mounted on the path recorder (exact paths, or prefixes ending in "/").
	ExtraHandlers map[string]http.Handler
	// KubeletClientTLS is how pods/log connects to kubelets; nil = no client certificate
	// and the kubelet's serving certificate is NOT verified (kube-apiserver's default
	// without --kubelet-certificate-authority).
	KubeletClientTLS *tls.Config
	// TokenRequest, when set, serves serviceaccounts/token (its Lookup is filled in).
	TokenRequest *resources.TokenRequestConfig
	// TokenReviewer, when set, serves TokenReview; SelfSubjectReview is always served.
	TokenReviewer resources.TokenReviewer
	// TraceSize is how many pods' journeys the server keeps for pods/trace (0 = default).
	TraceSize int
	// Authorizer decides what each user may do (RBAC, node authorizer…); nil = allow
	// everything (in-process tests only).
	Authorizer authz.Authorizer
	// RuleResolver lists a user's rules (escalation checks, SelfSubjectRulesReview); nil =
	// nobody holds any rule.
	RuleResolver authz.RuleResolver
	// ServiceCIDR is the range of Services' cluster IPs (kube-apiserver's
	// --service-cluster-ip-range; zero = 10.96.0.0/12, kubeadm's default).
	ServiceCIDR netip.Prefix
	// NodePortRange is the range of node ports (--service-node-port-range; zero =
	// 30000-32767).
	NodePortRange servicealloc.PortRange
	// NodePorts keeps the node port bitmap (etcd); nil = in memory, for tests only.
	NodePorts servicealloc.RangeStore
	// ComponentProbe, when set, serves core/v1 componentstatuses from its reports.
	ComponentProbe resources.ComponentProbe
	// MetricsResolution is how often the resource metrics served as metrics.k8s.io are
	// scraped from kubelets (metrics-server's --metric-resolution; 0 = 15 s); negative =
	// metrics.k8s.io is not served.
	MetricsResolution time.Duration
	// Logger receives the server's logs; nil = discarded.
	Logger *slog.Logger
	// ProxyClientCertificate is the front-proxy client certificate the aggregation layer
	// presents to aggregated API servers (kube-apiserver's --proxy-client-cert-file).
	ProxyClientCertificate *tls.Certificate
}

// noRules is the RuleResolver of a server without RBAC.
type noRules struct{}

func (noRules) RulesFor(context.Context, *authn.User, string) ([]rbacv1.PolicyRule, error) {
	return nil, nil
}

// Server is a built API server. Its resources can be added and removed while it serves
// (AddResource, RemoveResource): routing, discovery and OpenAPI follow at once.
type Server struct {
	// Handler is the full handler chain.
	Handler http.Handler
	// InsecureHandler is the chain without authentication: every request is
	// system:admin. It is only ever served on an explicit loopback --insecure-port.
	InsecureHandler http.Handler
	codecs          *endpoints.Codecs
	metrics         *prometheus.Registry
	scheme          *runtime.Scheme
	newStorage      StorageFactory
	maxBody         int64
	traceSize       int
	admission       registry.Admission
	initializers    registry.Initializers
	// typeConverter gives built-in kinds their merge semantics (parsed once).
	typeConverter managedfields.TypeConverter
	// mu serializes changes of the served resources; readers use cur only.
	mu sync.Mutex
	// cur is what is served now, replaced whole (copy on write) by each change.
	cur atomic.Pointer[snapshot]
	// nsMarked remembers namespaces this server just put in Terminating.
	nsMarked recentSet
	// services allocates Services' cluster IPs and node ports.
	services *servicealloc.Services
	// aggregator forwards the group versions APIServices assign to Services.
	aggregator *aggregator.Aggregator
	// apiServiceRecheck asks RunAPIServices to check the aggregated servers now (a
	// forwarded request could not reach one).
	apiServiceRecheck chan struct{}
	// merged is the discovery of cur with the aggregated group versions, rebuilt when
	// either changes.
	merged atomic.Pointer[mergedDiscovery]
	// customOpenAPI keeps the merged OpenAPI v3 document of each group version of custom
	// resources across snapshots: a CRD's change re-encodes its own group version only.
	customOpenAPI mergedOpenAPICache
	// builtinOpenAPI keeps the documents of the built-in resources, which custom
	// resources coming and going do not change.
	builtinOpenAPI builtinOpenAPICache
	// resourceMetrics scrapes kubelets for metrics.k8s.io; nil when it is not served.
	resourceMetrics *resourceMetrics
}

// liveLookupTTL is how long after marking a namespace Terminating NamespaceLifecycle
// reads it from etcd instead of the watch cache, which may still show it Active (as
// Kubernetes' forceLiveLookupTTL).
const liveLookupTTL = 30 * time.Second

// recentSet is a set of names that expire after liveLookupTTL.
type recentSet struct {
	mu sync.Mutex
	at map[string]time.Time
}

// mark adds name, dropping expired names.
func (r *recentSet) mark(name string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	for n, t := range r.at {
		if now.Sub(t) > liveLookupTTL {
			delete(r.at, n)
		}
	}
	r.at[name] = now
}

// recent tells whether name was marked within liveLookupTTL.
func (r *recentSet) recent(name string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[name]
	return ok && now.Sub(t) <= liveLookupTTL
}

// Version is what /version reports: Kubernetes' API level, wasmplane's build.
func Version() version.Info {
	return buildversion.Read().Server()
}

// New builds the server with every built-in resource.
func New(cfg Config) (*Server, error) {
	if cfg.MaxRequestBodyBytes == 0 {
		cfg.MaxRequestBodyBytes = endpoints.DefaultMaxRequestBodyBytes
	}
	if cfg.MaxRequestsInFlight == 0 {
		cfg.MaxRequestsInFlight = 400
	}
	if cfg.MaxMutatingRequestsInFlight == 0 {
		cfg.MaxMutatingRequestsInFlight = 200
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	if cfg.Authenticator == nil {
		cfg.Authenticator = filters.AdminAuthenticator{}
	}
	if cfg.Authorizer == nil {
		cfg.Authorizer = authz.AlwaysAllow()
	}
	if cfg.RuleResolver == nil {
		cfg.RuleResolver = noRules{}
	}
	s := &Server{codecs: endpoints.NewCodecs(cfg.Scheme), metrics: cfg.Metrics, scheme: cfg.Scheme, newStorage: cfg.Storage,
		maxBody: cfg.MaxRequestBodyBytes, traceSize: cfg.TraceSize, typeConverter: apply.NewTypeConverter(cfg.Scheme),
		apiServiceRecheck: make(chan struct{}, 1)}
	s.initializers = &initializerRegistry{s: s, waiting: cfg.InitializerWaiting}
	s.aggregator = aggregator.New(aggregator.Config{ClientCertificate: cfg.ProxyClientCertificate, Logger: cfg.Logger,
		Lookup: func(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error) {
			return s.Lookup(ctx, gr, namespace, name)
		},
		Unreachable: func() {
			select {
			case s.apiServiceRecheck <- struct{}{}:
			default:
			}
		}})
	s.admission = builtinAdmission(s, &cfg)
	s.cur.Store(s.newSnapshot(nil))
	services, err := newServiceAllocator(s, &cfg)
	if err != nil {
		return nil, err
	}
	s.services = services
	s.resourceMetrics = newResourceMetrics(s, cfg)
	if err := s.AddResources(builtins(s, cfg)...); err != nil {
		return nil, err
	}
	// autoscaling/v1 HorizontalPodAutoscalers are a view of the v2 ones' storage.
	if hpa := s.Store(autoscalingv2.Resource("horizontalpodautoscalers")); hpa != nil {
		if err := s.AddResources(resources.AutoscalingV1(hpa.Storage)...); err != nil {
			return nil, err
		}
	}
	// The documents are built lazily after each change; the first build is checked here
	// so that a type the generator cannot describe fails the start, not a client.
	if _, err := s.cur.Load().openAPI.get(); err != nil {
		return nil, fmt.Errorf("building OpenAPI documents: %w", err)
	}
	notFound := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { s.codecs.WriteError(w, req, endpoints.NotFound()) })
	paths := mux.NewPathRecorder(notFound)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		paths.Handle(p, ok)
		paths.HandlePrefix(p+"/", ok)
	}
	paths.Handle("/openapi/v2", s.openAPIHandler((*openapi.Service).V2))
	v3 := s.openAPIHandler((*openapi.Service).V3)
	paths.Handle("/openapi/v3", v3)
	paths.HandlePrefix("/openapi/v3/", v3)
	paths.Handle("/version", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, Version()) }))
	paths.Handle("/metrics", promhttp.HandlerFor(append(prometheus.Gatherers{cfg.Metrics}, cfg.MoreMetrics...), promhttp.HandlerOpts{}))
	for p, h := range cfg.ExtraHandlers {
		if strings.HasSuffix(p, "/") {
			paths.HandlePrefix(p, h)
		} else {
			paths.Handle(p, h)
		}
	}
	paths.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, metav1.RootPaths{Paths: append(paths.ListedPaths(), "/api", "/api/v1", "/apis")})
	}))
	var h http.Handler = restHandler{s: s, other: paths}
	h = withRequestMetrics(h, cfg.Metrics)
	// The filters in kube-apiserver's order, innermost first: authorization, max in flight
	// or priority and fairness, impersonation, authentication, request info, panic
	// recovery. Requests wait for a seat as the user they act as, before authorization,
	// as Kubernetes' do.
	chain := filters.WithAuthorization(h, cfg.Authorizer, s.codecs.WriteError)
	limit := func(h http.Handler) http.Handler {
		if cfg.FlowControl != nil {
			return filters.WithPriorityAndFairness(h, cfg.FlowControl, s.objectStats)
		}
		return filters.WithMaxInFlight(h, cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight, s.codecs.WriteError)
	}
	chain = limit(chain)
	chain = filters.WithImpersonation(chain, cfg.Authorizer, s.codecs.WriteError)
	chain = filters.WithAuthentication(chain, cfg.Authenticator, s.codecs.WriteError)
	s.Handler = filters.WithPanicRecovery(filters.WithWriteStack(filters.WithRequestInfo(chain)), s.codecs.WriteError)
	insecure := limit(h)
	insecure = filters.WithAuthentication(insecure, filters.AdminAuthenticator{}, s.codecs.WriteError)
	s.InsecureHandler = filters.WithPanicRecovery(filters.WithWriteStack(filters.WithRequestInfo(insecure)), s.codecs.WriteError)
	return s, nil
}

// served is one resource as the server serves it.
type served struct {
	def   endpoints.Definition
	api   *endpoints.APIResource
	store *registry.Store
}

// snapshot is everything that depends on the set of served resources. It is never
// modified once published: a change builds a new one.
type snapshot struct {
	// served in the order the resources were added.
	served []*served
	byGVR  map[schema.GroupVersionResource]*served
	byGR   map[schema.GroupResource]*served
	routes *endpoints.Routes
	equiv  equivalence
	disc   *discovery
	// openAPI is built on its first request after a change.
	openAPI *lazyOpenAPI
	// replaced is closed when a newer snapshot takes this one's place.
	replaced chan struct{}
}

// lazyOpenAPI builds the OpenAPI documents of a snapshot once, when first asked.
type lazyOpenAPI struct {
	once  sync.Once
	build func() (*openapi.Service, error)
	svc   *openapi.Service
	err   error
}

// builtinOpenAPICache holds the OpenAPI service of the built-in resources last built.
type builtinOpenAPICache struct {
	mu        sync.Mutex
	resources []openapi.Resource
	svc       *openapi.Service
}

// get returns the service documenting resources, built anew only when they differ from
// the last ones.
func (c *builtinOpenAPICache) get(scheme *runtime.Scheme, resources []openapi.Resource) (*openapi.Service, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.svc != nil && reflect.DeepEqual(c.resources, resources) {
		return c.svc, nil
	}
	svc, err := openapi.New(scheme, resources, Version().GitVersion)
	if err != nil {
		return nil, err
	}
	c.resources, c.svc = resources, svc
	return svc, nil
}

// mergedOpenAPICache holds, by "apis/<group>/<version>", the documents last merged and
// their encoding.
type mergedOpenAPICache struct {
	mu   sync.Mutex
	byGV map[string]mergedOpenAPI
}

type mergedOpenAPI struct {
	docs []*spec3.OpenAPI
	json []byte
}

// encode merges and encodes the documents of each group version, reusing the encoding
// of a group version whose documents are the very ones merged last time (documents are
// built once per CRD change and never modified), and forgets group versions no longer
// served.
func (c *mergedOpenAPICache) encode(own map[string][]*spec3.OpenAPI) (map[string][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[string]mergedOpenAPI, len(own))
	extra := make(map[string][]byte, len(own))
	for gv, docs := range own {
		if prev, ok := c.byGV[gv]; ok && slices.Equal(prev.docs, docs) {
			next[gv], extra[gv] = prev, prev.json
			continue
		}
		merged, err := builder.MergeSpecsV3(docs...)
		if err != nil {
			return nil, fmt.Errorf("merging the OpenAPI documents of %s: %w", gv, err)
		}
		data, err := json.Marshal(merged)
		if err != nil {
			return nil, fmt.Errorf("encoding the OpenAPI document of %s: %w", gv, err)
		}
		next[gv], extra[gv] = mergedOpenAPI{docs: docs, json: data}, data
	}
	c.byGV = next
	return extra, nil
}

func (l *lazyOpenAPI) get() (*openapi.Service, error) {
	l.once.Do(func() { l.svc, l.err = l.build() })
	return l.svc, l.err
}

// newSnapshot indexes list and derives its routes, discovery and OpenAPI.
func (s *Server) newSnapshot(list []*served) *snapshot {
	snap := &snapshot{served: list, byGVR: map[schema.GroupVersionResource]*served{}, byGR: map[schema.GroupResource]*served{},
		replaced: make(chan struct{})}
	apis := make([]*endpoints.APIResource, 0, len(list))
	for _, sv := range list {
		res := sv.def.Resource
		snap.byGVR[res.GroupVersionResource()] = sv
		if _, ok := snap.byGR[res.GroupResource()]; !ok {
			snap.byGR[res.GroupResource()] = sv
		}
		apis = append(apis, sv.api)
	}
	snap.routes = endpoints.NewRoutes(s.codecs, apis)
	snap.equiv = newEquivalence(snap.routes)
	snap.disc = newDiscovery(snap.routes, nil)
	resources := openAPIResources(snap.routes, s.scheme)
	// Resources with their own documents (custom resources) are merged per group version.
	own := map[string][]*spec3.OpenAPI{}
	var ownV2 []*spec.Swagger
	for _, sv := range list {
		if doc := sv.def.OpenAPIV3; doc != nil {
			key := "apis/" + sv.def.Resource.GroupVersion.String()
			own[key] = append(own[key], doc)
		}
		if doc := sv.def.OpenAPIV2; doc != nil {
			ownV2 = append(ownV2, doc)
		}
	}
	snap.openAPI = &lazyOpenAPI{build: func() (*openapi.Service, error) {
		base, err := s.builtinOpenAPI.get(s.scheme, resources)
		if err != nil {
			return nil, err
		}
		extra, err := s.customOpenAPI.encode(own)
		if err != nil {
			return nil, err
		}
		return base.WithExtra(ownV2, extra)
	}}
	return snap
}

// AddResource starts serving one resource; see AddResources.
func (s *Server) AddResource(d endpoints.Definition) error { return s.AddResources(d) }

// AddResources starts serving resources while the server runs: each gets its storage
// (Config.Storage with the descriptor's StoragePrefix) and its routes, and discovery
// (legacy and aggregated) and the OpenAPI documents list it from the next request on.
// A resource whose group, version and plural is already served is refused, and then
// none of defs is added.
func (s *Server) AddResources(defs ...endpoints.Definition) error {
	return s.ReplaceResources(nil, defs...)
}

// RemoveResource stops serving a resource: its routes, discovery entries and OpenAPI
// paths go at once, and its storage's watches end (unless the definition brought its
// own storage). Requests already being served finish against the removed store. Its
// stored objects are left in storage.
func (s *Server) RemoveResource(gvr schema.GroupVersionResource) error {
	return s.ReplaceResources([]schema.GroupVersionResource{gvr})
}

// ReplaceResources removes the resources remove and adds defs in one change: no request
// sees a state in between (a custom resource whose definition changed). Nothing changes
// if one of remove is not served or one of defs cannot be served.
func (s *Server) ReplaceResources(remove []schema.GroupVersionResource, defs ...endpoints.Definition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load()
	list := slices.Clone(old.served)
	var removed []*served
	for _, gvr := range remove {
		sv := old.byGVR[gvr]
		if sv == nil {
			return fmt.Errorf("resource %s is not served", gvr)
		}
		removed = append(removed, sv)
		list = slices.DeleteFunc(list, func(x *served) bool { return x == sv })
	}
	seen := map[schema.GroupVersionResource]bool{}
	for _, d := range defs {
		if err := checkDefinition(d); err != nil {
			return err
		}
		gvr := d.Resource.GroupVersionResource()
		if (old.byGVR[gvr] != nil && !slices.Contains(remove, gvr)) || seen[gvr] {
			return fmt.Errorf("resource %s is already served", gvr)
		}
		seen[gvr] = true
	}
	var made []storage.Interface
	for _, d := range defs {
		sv, err := s.serve(d)
		if err != nil {
			for _, st := range made {
				stopStorage(st)
			}
			return err
		}
		if d.Storage == nil {
			made = append(made, sv.store.Storage)
		}
		list = append(list, sv)
	}
	s.cur.Store(s.newSnapshot(list))
	close(old.replaced)
	for _, sv := range removed {
		if sv.def.Storage == nil {
			stopStorage(sv.store.Storage)
		}
	}
	return nil
}

// stopStorage ends the watches of a storage that has any (a watch cache).
func stopStorage(st storage.Interface) {
	if stopper, ok := st.(interface{ Stop() }); ok {
		stopper.Stop()
	}
}

// checkDefinition refuses a descriptor the generic code cannot serve.
func checkDefinition(d endpoints.Definition) error {
	res := d.Resource
	switch {
	case res == nil:
		return errors.New("resource definition without a descriptor")
	case res.Name == "" || res.Kind == "" || res.GroupVersion.Version == "":
		return fmt.Errorf("resource %s: name, kind and version are required", res.GroupVersionResource())
	case res.StoragePrefix == "" || !strings.HasPrefix(res.StoragePrefix, "/"):
		return fmt.Errorf("resource %s: storage prefix %q must be an absolute key", res.GroupVersionResource(), res.StoragePrefix)
	case res.NewFunc == nil || res.NewListFunc == nil || res.Strategy == nil:
		return fmt.Errorf("resource %s: NewFunc, NewListFunc and Strategy are required", res.GroupVersionResource())
	}
	return nil
}

// serve builds the storage, store and handlers of one resource.
func (s *Server) serve(d endpoints.Definition) (*served, error) {
	res := d.Resource
	st := d.Storage
	if st == nil {
		var err error
		if st, err = s.newStorage(registry.StoredResource(res), res.StoragePrefix); err != nil {
			return nil, fmt.Errorf("storage for %s: %w", res.GroupResource(), err)
		}
		if res.StoredAs != nil {
			st = registry.NewConvertingStorage(st, res.StoredAs)
		}
	}
	store := registry.NewStore(res, st, res.StoragePrefix)
	if res.Traced {
		store.Traces = trace.NewStore(s.traceSize)
	}
	if !res.NoInitializers {
		store.Initializers = s.initializers
	}
	codecs := s.codecs
	if _, ok := res.NewFunc().(runtime.Unstructured); ok {
		// Unstructured objects have no protobuf form: JSON and YAML only, as Kubernetes
		// serves custom resources.
		codecs = codecs.WithoutProtobuf()
	}
	if res.NoTable {
		codecs = codecs.WithoutTable()
	}
	fields, err := fieldManagers(s.scheme, s.typeConverter, res)
	if err != nil {
		return nil, err
	}
	scope := &endpoints.Scope{Store: store, Codecs: codecs, MaxRequestBodyBytes: s.maxBody, Admission: s.admission, Fields: fields}
	a := &endpoints.APIResource{Scope: scope}
	if d.Subresources != nil {
		a.Subresources = d.Subresources(scope)
	}
	if d.CreateHandler != nil {
		a.CreateHandler = d.CreateHandler(scope)
	}
	if d.GetHandler != nil {
		a.GetHandler = d.GetHandler(scope)
	}
	if d.ListHandler != nil {
		a.ListHandler = d.ListHandler(scope)
	}
	return &served{def: d, api: a, store: store}, nil
}

// openAPIHandler serves one of the current OpenAPI documents.
func (s *Server) openAPIHandler(pick func(*openapi.Service) http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		svc, err := s.cur.Load().openAPI.get()
		if err != nil {
			s.codecs.WriteError(w, req, apierrors.NewInternalError(fmt.Errorf("building OpenAPI documents: %w", err)))
			return
		}
		pick(svc).ServeHTTP(w, req)
	})
}

// restHandler serves /api, /apis and everything below them from the current snapshot;
// paths it does not serve go to other.
type restHandler struct {
	s     *Server
	other http.Handler
}

func (h restHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	snap := h.s.cur.Load()
	path := req.URL.Path
	if !strings.HasPrefix(path, "/api") {
		h.other.ServeHTTP(w, req)
		return
	}
	if gv, ok := aggregatedPath(path); ok && h.s.aggregator.Handles(gv) {
		u, _ := filters.UserFrom(req.Context())
		if u == nil {
			u = &filters.User{}
		}
		h.s.aggregator.Serve(w, req, gv, u.Name, u.UID, u.Groups, u.Extra, h.s.codecs.WriteError)
		return
	}
	if doc := h.s.discoveryOf(snap).document(path); doc != nil {
		if req.Method != http.MethodGet {
			h.s.codecs.WriteError(w, req, apierrors.NewMethodNotSupported(schema.GroupResource{}, req.Method))
			return
		}
		doc(h.s, w, req)
		return
	}
	gv, rest, ok := endpoints.SplitPath(path)
	var v *endpoints.VersionRoutes
	if ok && len(rest) > 0 {
		v = snap.routes.Version(gv)
	}
	if v == nil {
		h.other.ServeHTTP(w, req)
		return
	}
	v.Serve(w, req, rest)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// openAPIResources describes every served resource for the OpenAPI documents.
func openAPIResources(routes *endpoints.Routes, scheme *runtime.Scheme) []openapi.Resource {
	var out []openapi.Resource
	for _, gv := range routes.GroupVersions() {
		for _, a := range routes.Version(gv).Resources {
			res := a.Scope.Store.Resource
			if !scheme.Recognizes(res.GroupVersionKind()) {
				// Described by its own document (Definition.OpenAPIV3).
				continue
			}
			r := openapi.Resource{GVK: res.GroupVersionKind(), ListKind: res.ListKind, Plural: res.Name, Namespaced: res.Namespaced, Verbs: res.Verbs}
			for _, sub := range a.Subresources {
				os := openapi.Subresource{Name: sub.Name, Kind: sub.Kind}
				for m := range sub.Handlers {
					os.Verbs = append(os.Verbs, m)
				}
				sort.Strings(os.Verbs)
				r.Subresources = append(r.Subresources, os)
			}
			out = append(out, r)
		}
	}
	return out
}

// Store returns the REST store of a resource (for bootstrapping and tests), nil when it
// is not served. A resource served in several versions returns its first added one.
func (s *Server) Store(gr schema.GroupResource) *registry.Store {
	if sv := s.cur.Load().byGR[gr]; sv != nil {
		return sv.store
	}
	return nil
}

// Groups returns every served group version with its resources.
func (s *Server) Groups() map[schema.GroupVersion][]*endpoints.APIResource {
	routes := s.cur.Load().routes
	out := map[schema.GroupVersion][]*endpoints.APIResource{}
	for _, gv := range routes.GroupVersions() {
		out[gv] = routes.Version(gv).Resources
	}
	return out
}

// Lookup reads the current state of one object from the server's storage, for
// in-process consumers such as serviceaccounts/token.
func (s *Server) Lookup(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error) {
	return s.lookup(ctx, gr, namespace, name, "")
}

// LookupCached is Lookup from the watch cache (no etcd round trip; may trail writes by
// milliseconds), for per-request checks such as token revocation.
func (s *Server) LookupCached(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error) {
	return s.lookup(ctx, gr, namespace, name, "0")
}

func (s *Server) lookup(ctx context.Context, gr schema.GroupResource, namespace, name, rv string) (runtime.Object, error) {
	st := s.Store(gr)
	if st == nil {
		return nil, fmt.Errorf("no resource %s", gr)
	}
	return st.Get(ctx, namespace, name, &metav1.GetOptions{ResourceVersion: rv})
}

func withRequestMetrics(h http.Handler, reg *prometheus.Registry) http.Handler {
	total := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_request_total", Help: "Counter of apiserver requests by verb and HTTP response code."}, []string{"verb", "code"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_request_duration_seconds", Help: "Response latency distribution in seconds by verb.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, []string{"verb"})
	reg.MustRegister(total, dur)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		rw := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rw, req)
		verb := req.Method
		if req.URL.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
		total.WithLabelValues(verb, fmt.Sprint(rw.code)).Inc()
		dur.WithLabelValues(verb).Observe(time.Since(start).Seconds())
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush passes streaming flushes through (watch needs them).
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes connection upgrades through (exec, attach and port-forward proxy the
// client's connection); the request is counted as 101 Switching Protocols.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("response writer %T cannot be hijacked", r.ResponseWriter)
	}
	r.code = http.StatusSwitchingProtocols
	return h.Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// fieldManagers builds the managedFields keepers of a resource: its object and, when it
// has one, its status.
func fieldManagers(scheme *runtime.Scheme, tc managedfields.TypeConverter, res *registry.Resource) (*apply.Managers, error) {
	cfg := apply.Config{Scheme: scheme, Kind: res.GroupVersionKind(), TypeConverter: tc, Default: res.Strategy.Default, ResetFields: res.ResetFields,
		Custom: !scheme.Recognizes(res.GroupVersionKind())}
	if res.TypeConverter != nil {
		cfg.TypeConverter = res.TypeConverter
	}
	cfg.Convertor = res.Convertor
	if res.StatusStrategy != nil {
		cfg.Subresources = []string{apply.Status}
		if cfg.ResetFields == nil {
			cfg.ResetFields = apply.StatusResetFields(nil)
		}
	}
	fields, err := apply.NewManagers(cfg)
	if err != nil {
		return nil, fmt.Errorf("managed fields of %s: %w", res.GroupResource(), err)
	}
	return fields, nil
}
