// Package apiserver assembles wasmplane's Kubernetes-compatible API server: the handler
// chain, the director, discovery, health and version endpoints, and every resource.
package apiserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	restful "github.com/emicklei/go-restful/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/api/initializers"
	"github.com/wasmplane/wasmplane/core/apiserver/apply"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/filters"
	"github.com/wasmplane/wasmplane/core/apiserver/mux"
	"github.com/wasmplane/wasmplane/core/apiserver/openapi"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/blobs"
	"github.com/wasmplane/wasmplane/core/trace"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/version"
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
	Authenticator filters.Authenticator
	// Metrics is where request metrics are registered; nil = a private registry.
	Metrics *prometheus.Registry
	// MaxRequestBodyBytes bounds request bodies (default 3 MiB).
	MaxRequestBodyBytes int64
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound concurrency (429 beyond).
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// AdmissionSources add dynamic admission plugins (WASM) after the built-in ones.
	AdmissionSources []admission.Source
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
}

// noRules is the RuleResolver of a server without RBAC.
type noRules struct{}

func (noRules) RulesFor(context.Context, *authn.User, string) ([]rbacv1.PolicyRule, error) {
	return nil, nil
}

// Server is a built API server.
type Server struct {
	// Handler is the full handler chain.
	Handler http.Handler
	// InsecureHandler is the chain without authentication: every request is
	// system:admin. It is only ever served on an explicit loopback --insecure-port.
	InsecureHandler http.Handler
	codecs          *endpoints.Codecs
	stores          map[schema.GroupResource]*registry.Store
	groups          []groupVersion
	metrics         *prometheus.Registry
	// nsMarked remembers namespaces this server just put in Terminating.
	nsMarked recentSet
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

type groupVersion struct {
	gv        schema.GroupVersion
	resources []*endpoints.APIResource
}

// Version is what /version reports: Kubernetes' API level, wasmplane's build.
func Version() version.Info {
	return version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2-wasmplane", Platform: "linux/amd64", GoVersion: "go1.26"}
}

// New builds the server and all its resources.
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
	s := &Server{codecs: endpoints.NewCodecs(cfg.Scheme), stores: map[schema.GroupResource]*registry.Store{}, metrics: cfg.Metrics}
	inits := &initializerRegistry{s: s, waiting: cfg.InitializerWaiting}
	chain := builtinAdmission(s, cfg.AdmissionSources)
	defs := map[schema.GroupVersion][]resources.Definition{
		corev1.SchemeGroupVersion: resources.WithKubeletConnection(resources.Core(), resources.KubeletConnection{TLS: cfg.KubeletClientTLS,
			GetNode: func(ctx context.Context, name string) (*corev1.Node, error) {
				obj, err := s.stores[corev1.Resource("nodes")].Get(ctx, "", name, nil)
				if err != nil {
					return nil, err
				}
				return obj.(*corev1.Node), nil
			}}),
	}
	if cfg.TokenRequest != nil {
		c := *cfg.TokenRequest
		c.Lookup = s.Lookup
		resources.AddTokenRequest(defs[corev1.SchemeGroupVersion], c)
	}
	for _, d := range resources.Apps() {
		defs[d.Resource.GroupVersion] = append(defs[d.Resource.GroupVersion], d)
	}
	extra := append(resources.Coordination(), resources.Events()...)
	extra = append(extra, resources.Wasmplane(cfg.Blobs)...)
	extra = append(extra, resources.Initializers()...)
	extra = append(extra, resources.Policy()...)
	extra = append(extra, resources.RBAC(cfg.Authorizer, cfg.RuleResolver)...)
	extra = append(extra, resources.Certificates()...)
	extra = append(extra, resources.SchedulingInputs()...)
	extra = append(extra, resources.Authorization(cfg.Authorizer, cfg.RuleResolver)...)
	for _, d := range resources.Authentication(cfg.TokenReviewer) {
		if d.Resource.Name == "tokenreviews" && cfg.TokenReviewer == nil {
			continue
		}
		extra = append(extra, d)
	}
	for _, d := range extra {
		defs[d.Resource.GroupVersion] = append(defs[d.Resource.GroupVersion], d)
	}
	gvs := make([]schema.GroupVersion, 0, len(defs))
	for gv := range defs {
		gvs = append(gvs, gv)
	}
	sort.Slice(gvs, func(i, j int) bool { return gvs[i].String() < gvs[j].String() })
	container := restful.NewContainer()
	container.Router(restful.CurlyRouter{})
	container.ServiceErrorHandler(func(se restful.ServiceError, req *restful.Request, resp *restful.Response) {
		err := endpoints.NotFound()
		if se.Code == http.StatusMethodNotAllowed {
			err = apierrors.NewMethodNotSupported(schema.GroupResource{}, req.Request.Method)
		}
		s.codecs.WriteError(resp.ResponseWriter, req.Request, err)
	})
	// One converter serves every built-in kind (its schema is parsed once).
	tc := apply.NewTypeConverter(cfg.Scheme)
	for _, gv := range gvs {
		g := groupVersion{gv: gv}
		for _, d := range defs[gv] {
			prefix := "/registry/" + d.Resource.Name
			if gv.Group != "" && gv.Group != "apps" && gv.Group != "coordination.k8s.io" && gv.Group != "wasmplane.io" && gv.Group != "admissionregistration.k8s.io" {
				prefix = "/registry/" + gv.Group + "/" + d.Resource.Name
			}
			st, err := cfg.Storage(d.Resource, prefix)
			if err != nil {
				return nil, fmt.Errorf("storage for %s: %w", d.Resource.GroupResource(), err)
			}
			res := d.Resource
			if res.GroupResource() == corev1.Resource("namespaces") && res.OnDeleteMarked != nil {
				cp, mark := *res, res.OnDeleteMarked
				cp.OnDeleteMarked = func(obj runtime.Object) {
					mark(obj)
					s.nsMarked.mark(obj.(*corev1.Namespace).Name, time.Now())
				}
				res = &cp
			}
			store := registry.NewStore(res, st, prefix)
			if d.Resource.GroupResource() == corev1.Resource("pods") {
				store.Traces = trace.NewStore(cfg.TraceSize)
			}
			if d.Resource.Name != "initializerconfigurations" {
				store.Initializers = inits
			}
			s.stores[d.Resource.GroupResource()] = store
			fields, err := fieldManagers(cfg.Scheme, tc, res)
			if err != nil {
				return nil, err
			}
			scope := &endpoints.Scope{Store: store, Codecs: s.codecs, MaxRequestBodyBytes: cfg.MaxRequestBodyBytes, Admission: chain, Fields: fields}
			a := &endpoints.APIResource{Scope: scope}
			if d.Subresources != nil {
				a.Subresources = d.Subresources(scope)
			}
			if d.CreateHandler != nil {
				a.CreateHandler = d.CreateHandler(scope)
			}
			g.resources = append(g.resources, a)
		}
		s.groups = append(s.groups, g)
		ws := endpoints.NewWebService(rootOf(gv), g.resources)
		s.addVersionDiscovery(ws, g)
		container.Add(ws)
	}
	// Discovery documents live in go-restful too, as in Kubernetes.
	for _, ws := range s.discoveryServices() {
		container.Add(ws)
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
	oa, err := openapi.New(cfg.Scheme, s.openAPIResources(), Version().GitVersion)
	if err != nil {
		return nil, fmt.Errorf("building OpenAPI documents: %w", err)
	}
	paths.Handle("/openapi/v2", oa.V2())
	paths.Handle("/openapi/v3", oa.V3())
	paths.HandlePrefix("/openapi/v3/", oa.V3())
	paths.Handle("/version", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, Version()) }))
	paths.Handle("/metrics", promhttp.HandlerFor(cfg.Metrics, promhttp.HandlerOpts{}))
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
	var h http.Handler = mux.Director{Container: container, NonGoRestful: paths}
	h = withRequestMetrics(h, cfg.Metrics)
	h = filters.WithMaxInFlight(h, cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight, s.codecs.WriteError)
	authorized := filters.WithRequestInfo(filters.WithAuthorization(h, cfg.Authorizer, s.codecs.WriteError))
	s.Handler = filters.WithPanicRecovery(filters.WithAuthentication(authorized, cfg.Authenticator, s.codecs.WriteError), s.codecs.WriteError)
	s.InsecureHandler = filters.WithPanicRecovery(filters.WithAuthentication(h, filters.AdminAuthenticator{}, s.codecs.WriteError), s.codecs.WriteError)
	return s, nil
}

func rootOf(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// openAPIResources describes every served resource for the OpenAPI documents.
func (s *Server) openAPIResources() []openapi.Resource {
	var out []openapi.Resource
	for _, g := range s.groups {
		for _, a := range g.resources {
			res := a.Scope.Store.Resource
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

// Store returns the REST store of a resource (for bootstrapping and tests).
func (s *Server) Store(gr schema.GroupResource) *registry.Store { return s.stores[gr] }

// Groups returns every served group version with its resources.
func (s *Server) Groups() map[schema.GroupVersion][]*endpoints.APIResource {
	out := map[schema.GroupVersion][]*endpoints.APIResource{}
	for _, g := range s.groups {
		out[g.gv] = g.resources
	}
	return out
}

// namespaceLifecycle is the built-in NamespaceLifecycle admission plugin: no creates in a
// missing or terminating namespace.
type namespaceLifecycle struct{ s *Server }

func (namespaceLifecycle) Name() string { return "NamespaceLifecycle" }

func (n namespaceLifecycle) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create || a.Namespace == "" || a.Subresource != "" || a.Resource.Resource == "namespaces" {
		return nil
	}
	store := n.s.stores[corev1.Resource("namespaces")]
	nsObj, err := store.Get(ctx, "", a.Namespace, &metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		// The cache may lag a namespace created a moment ago; ask etcd before refusing.
		nsObj, err = store.Get(ctx, "", a.Namespace, nil)
	}
	if err == nil && nsObj.(*corev1.Namespace).Status.Phase != corev1.NamespaceTerminating && n.s.nsMarked.recent(a.Namespace, time.Now()) {
		// Marked Terminating a moment ago: the cache may not show it yet.
		nsObj, err = store.Get(ctx, "", a.Namespace, nil)
	}
	if err != nil {
		return err
	}
	if ns := nsObj.(*corev1.Namespace); ns.Status.Phase == corev1.NamespaceTerminating {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns.Name))
	}
	return nil
}

// initializerRegistry computes pending initializers from the InitializerConfigurations.
type initializerRegistry struct {
	s       *Server
	waiting func(gvr schema.GroupVersionResource, namespace, name string)
}

// Pending implements registry.Initializers: configurations in name order, each
// initializer once.
func (r *initializerRegistry) Pending(ctx context.Context, gvr schema.GroupVersionResource) []string {
	store := r.s.stores[initializers.SchemeGroupVersion.WithResource("initializerconfigurations").GroupResource()]
	if store == nil {
		return nil
	}
	list, err := store.List(ctx, "", &metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil
	}
	items := list.(*initializers.InitializerConfigurationList).Items
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	var out []string
	for _, c := range items {
		for _, in := range c.Initializers {
			if slices.Contains(out, in.Name) {
				continue
			}
			for _, rule := range in.Rules {
				if rule.Matches(gvr) {
					out = append(out, in.Name)
					break
				}
			}
		}
	}
	return out
}

// Waiting implements registry.Initializers.
func (r *initializerRegistry) Waiting(gvr schema.GroupVersionResource, namespace, name string) {
	if r.waiting != nil {
		r.waiting(gvr, namespace, name)
	}
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
	st, ok := s.stores[gr]
	if !ok {
		return nil, fmt.Errorf("no resource %s", gr)
	}
	return st.Get(ctx, namespace, name, &metav1.GetOptions{ResourceVersion: rv})
}

// EnsureSystemNamespaces creates the namespaces Kubernetes always has.
func (s *Server) EnsureSystemNamespaces(ctx context.Context) error {
	store := s.stores[corev1.Resource("namespaces")]
	for _, name := range resources.SystemNamespaces {
		_, err := store.Create(ctx, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, registry.WriteOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
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

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// fieldManagers builds the managedFields keepers of a resource: its object and, when it
// has one, its status.
func fieldManagers(scheme *runtime.Scheme, tc managedfields.TypeConverter, res *registry.Resource) (*apply.Managers, error) {
	cfg := apply.Config{Scheme: scheme, Kind: res.GroupVersionKind(), TypeConverter: tc, Default: res.Strategy.Default, ResetFields: res.ResetFields}
	if res.TypeConverter != nil {
		cfg.TypeConverter = res.TypeConverter
	}
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
