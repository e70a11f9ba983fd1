// Package aggregator is the API server's aggregation layer: it forwards the requests for
// a group version that an APIService (apiregistration.k8s.io/v1) assigns to a Service to
// that Service's API server, as kube-aggregator does, checks that each such server
// answers, and fetches its discovery document.
package aggregator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// Availability reasons and messages of kube-aggregator's AvailableConditionController.
const (
	ReasonPassed               = "Passed"
	ReasonServiceNotFound      = "ServiceNotFound"
	ReasonServicePortError     = "ServicePortError"
	ReasonEndpointsNotFound    = "EndpointsNotFound"
	ReasonMissingEndpoints     = "MissingEndpoints"
	ReasonFailedDiscoveryCheck = "FailedDiscoveryCheck"
	ReasonServiceAccessError   = "ServiceAccessError"
)

// checkUser is who the availability check says it is to the aggregated server, as
// kube-aggregator does.
const checkUser = "system:kube-aggregator"

// checkTimeout bounds one discovery check (kube-aggregator allows 5 s).
const checkTimeout = 5 * time.Second

// LookupFunc reads one object from the server's own storage.
type LookupFunc func(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)

// Config is what the aggregation layer needs from its API server.
type Config struct {
	// ClientCertificate is the front-proxy client certificate presented to aggregated
	// servers; they trust it through the extension-apiserver-authentication ConfigMap.
	// Without one, requests are forwarded with no identity an aggregated server accepts.
	ClientCertificate *tls.Certificate
	// Lookup reads Services and Endpoints.
	Lookup LookupFunc
	// Logger logs check failures.
	Logger *slog.Logger
	// Unreachable, when set, is called when a forwarded request cannot reach its aggregated
	// server, so that the APIService's availability is checked again at once rather than
	// at the next periodic check.
	Unreachable func()
}

// Aggregator forwards requests to aggregated API servers. It is safe for concurrent use.
type Aggregator struct {
	cfg Config
	mu  sync.RWMutex
	// targets holds the group versions assigned to a Service, by group version.
	targets map[schema.GroupVersion]*target
	// gen counts changes of what Discovery returns.
	gen uint64
}

// target is one APIService naming a Service, with what its last check found.
type target struct {
	spec      apiregistrationv1.APIServiceSpec
	name      string
	transport *http.Transport
	condition apiregistrationv1.APIServiceCondition
	// resources is the aggregated server's discovery document for the group version,
	// from the last check that passed.
	resources *metav1.APIResourceList
}

// New returns an aggregation layer with no targets.
func New(cfg Config) *Aggregator {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Aggregator{cfg: cfg, targets: map[schema.GroupVersion]*target{}}
}

// SetAPIServices makes the targets those of services that name a Service, keeping what
// the checks found for those whose spec did not change.
func (a *Aggregator) SetAPIServices(services []*apiregistrationv1.APIService) {
	next := map[schema.GroupVersion]*target{}
	a.mu.Lock()
	defer a.mu.Unlock()
	changed := false
	for _, as := range services {
		if as.Spec.Service == nil {
			continue
		}
		gv := schema.GroupVersion{Group: as.Spec.Group, Version: as.Spec.Version}
		if old := a.targets[gv]; old != nil && old.name == as.Name && equality.Semantic.DeepEqual(old.spec, as.Spec) {
			next[gv] = old
			continue
		}
		changed = true
		t := &target{spec: *as.Spec.DeepCopy(), name: as.Name}
		rt, err := a.newTransport(as)
		if err != nil {
			t.condition = unavailable(ReasonServiceAccessError, err.Error())
		} else {
			t.transport = rt
			t.condition = unavailable(ReasonFailedDiscoveryCheck, "not checked yet")
		}
		next[gv] = t
	}
	if len(next) != len(a.targets) {
		changed = true
	}
	for gv, old := range a.targets {
		if next[gv] != old {
			changed = true
			if old.transport != nil {
				old.transport.CloseIdleConnections()
			}
		}
	}
	a.targets = next
	if changed {
		a.gen++
	}
}

// newTransport builds the TLS client an APIService calls for: its caBundle (or no
// verification when it says insecureSkipTLSVerify), the Service's DNS name as the server
// name, and the front-proxy client certificate.
func (a *Aggregator) newTransport(as *apiregistrationv1.APIService) (*http.Transport, error) {
	svc := as.Spec.Service
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: svc.Name + "." + svc.Namespace + ".svc",
		InsecureSkipVerify: as.Spec.InsecureSkipTLSVerify} //nolint:gosec // the APIService asks for it, as in Kubernetes
	if len(as.Spec.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(as.Spec.CABundle) {
			return nil, errors.New("spec.caBundle holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	if a.cfg.ClientCertificate != nil {
		tc.Certificates = []tls.Certificate{*a.cfg.ClientCertificate}
	}
	return &http.Transport{TLSClientConfig: tc, Proxy: nil, MaxIdleConnsPerHost: 25, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, DialContext: (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext}, nil
}

func unavailable(reason, message string) apiregistrationv1.APIServiceCondition {
	return apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse,
		Reason: reason, Message: message}
}

// Condition returns the Available condition the last check found for the APIService
// named name serving gv, and whether it is one of the targets.
func (a *Aggregator) Condition(name string, gv schema.GroupVersion) (apiregistrationv1.APIServiceCondition, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	t := a.targets[gv]
	if t == nil || t.name != name {
		return apiregistrationv1.APIServiceCondition{}, false
	}
	return t.condition, true
}

// Names reports whether obj is a Service (or its Endpoints) that an APIService names.
func (a *Aggregator) Names(obj any) bool {
	m, ok := obj.(metav1.Object)
	if !ok {
		return false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, t := range a.targets {
		if ref := t.spec.Service; ref != nil && ref.Namespace == m.GetNamespace() && ref.Name == m.GetName() {
			return true
		}
	}
	return false
}

// Handles reports whether requests for gv go to an aggregated server.
func (a *Aggregator) Handles(gv schema.GroupVersion) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.targets[gv] != nil
}

// Check checks every target once, at the same time, and reports whether a condition or
// a discovery document changed.
func (a *Aggregator) Check(ctx context.Context) bool {
	a.mu.RLock()
	type job struct {
		gv schema.GroupVersion
		t  *target
	}
	var jobs []job
	for gv, t := range a.targets {
		jobs = append(jobs, job{gv, t})
	}
	a.mu.RUnlock()
	type result struct {
		job
		cond apiregistrationv1.APIServiceCondition
		res  *metav1.APIResourceList
	}
	results := make(chan result, len(jobs))
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			cond, res := a.check(ctx, j.gv, j.t)
			results <- result{j, cond, res}
		})
	}
	wg.Wait()
	close(results)
	changed := false
	a.mu.Lock()
	defer a.mu.Unlock()
	for r := range results {
		if a.targets[r.gv] != r.t {
			continue // replaced while it was checked
		}
		if r.t.condition.Status != r.cond.Status || r.t.condition.Reason != r.cond.Reason || r.t.condition.Message != r.cond.Message {
			changed = true
			if r.cond.Status != apiregistrationv1.ConditionTrue {
				a.cfg.Logger.Warn("aggregated API server unavailable", "apiservice", r.t.name, "reason", r.cond.Reason, "message", r.cond.Message)
			}
		}
		r.t.condition = r.cond
		if r.res != nil || r.cond.Status != apiregistrationv1.ConditionTrue {
			if !equality.Semantic.DeepEqual(r.t.resources, r.res) {
				changed = true
				a.gen++
			}
			r.t.resources = r.res
		}
	}
	return changed
}

// check resolves t's Service and asks its server for gv's discovery document, as
// kube-aggregator's availability controller does.
func (a *Aggregator) check(ctx context.Context, gv schema.GroupVersion, t *target) (apiregistrationv1.APIServiceCondition, *metav1.APIResourceList) {
	if t.transport == nil {
		return t.condition, nil
	}
	u, cond := a.resolve(ctx, t.spec.Service)
	if u == nil {
		return cond, nil
	}
	u.Path = "/apis/" + gv.Group + "/" + gv.Version
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return unavailable(ReasonFailedDiscoveryCheck, err.Error()), nil
	}
	req.Header.Set("Accept", "application/json")
	transport.SetAuthProxyHeaders(req, checkUser, "", []string{"system:masters"}, nil)
	resp, err := t.transport.RoundTrip(req)
	if err != nil {
		return unavailable(ReasonFailedDiscoveryCheck, fmt.Sprintf("failing or missing response from %s: %v", u, err)), nil
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return unavailable(ReasonFailedDiscoveryCheck, fmt.Sprintf("failing or missing response from %s: %v", u, err)), nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return unavailable(ReasonFailedDiscoveryCheck, fmt.Sprintf("failing or missing response from %s: bad status from %s: %d", u, u, resp.StatusCode)), nil
	}
	list := &metav1.APIResourceList{}
	if err := json.Unmarshal(body, list); err != nil || list.GroupVersion != gv.String() {
		// The server answered: it is available, only its document is not usable.
		return available(), nil
	}
	return available(), list
}

func available() apiregistrationv1.APIServiceCondition {
	return apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue,
		Reason: ReasonPassed, Message: "all checks passed"}
}

// resolve finds where an APIService's Service listens, or the condition saying why not.
func (a *Aggregator) resolve(ctx context.Context, ref *apiregistrationv1.ServiceReference) (*url.URL, apiregistrationv1.APIServiceCondition) {
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	return Resolve(ctx, a.cfg.Lookup, ref.Namespace, ref.Name, port)
}

// ResolveService is webhookutil.ServiceResolver over Resolve, for the other clients of
// Services the API server has (conversion webhooks).
type ResolveService struct {
	Lookup LookupFunc
}

// ResolveEndpoint implements webhookutil.ServiceResolver.
func (r ResolveService) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	u, cond := Resolve(ctx, r.Lookup, namespace, name, port)
	if u == nil {
		return nil, errors.New(cond.Message)
	}
	return u, nil
}

// Resolve finds where a Service's server listens on port: an ExternalName Service's host,
// else a random ready address of its Endpoints on the Service port's target, as
// kube-aggregator's endpoint routing does (there is no proxy to route a ClusterIP here).
// Without one, the condition says why, with kube-aggregator's reasons.
func Resolve(ctx context.Context, lookup LookupFunc, namespace, name string, port int32) (*url.URL, apiregistrationv1.APIServiceCondition) {
	ref := &apiregistrationv1.ServiceReference{Namespace: namespace, Name: name}
	obj, err := lookup(ctx, corev1.Resource("services"), ref.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, unavailable(ReasonServiceNotFound, fmt.Sprintf("service/%s in %q is not present", ref.Name, ref.Namespace))
	}
	if err != nil {
		return nil, unavailable(ReasonServiceAccessError, fmt.Sprintf("service/%s in %q cannot be read: %v", ref.Name, ref.Namespace, err))
	}
	svc := obj.(*corev1.Service)
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return &url.URL{Scheme: "https", Host: net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port)))}, apiregistrationv1.APIServiceCondition{}
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			sp = &svc.Spec.Ports[i]
			break
		}
	}
	if sp == nil {
		return nil, unavailable(ReasonServicePortError, fmt.Sprintf("service/%s in %q is not listening on port %d", ref.Name, ref.Namespace, port))
	}
	obj, err = lookup(ctx, corev1.Resource("endpoints"), ref.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, unavailable(ReasonEndpointsNotFound, fmt.Sprintf("cannot find endpoints for service/%s in %q", ref.Name, ref.Namespace))
	}
	if err != nil {
		return nil, unavailable(ReasonServiceAccessError, fmt.Sprintf("endpoints for service/%s in %q cannot be read: %v", ref.Name, ref.Namespace, err))
	}
	var hosts []string
	for _, ss := range obj.(*corev1.Endpoints).Subsets {
		for _, p := range ss.Ports {
			if p.Name != sp.Name {
				continue
			}
			for _, addr := range ss.Addresses {
				hosts = append(hosts, net.JoinHostPort(addr.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	if len(hosts) == 0 {
		return nil, unavailable(ReasonMissingEndpoints, fmt.Sprintf("endpoints for service/%s in %q have no addresses with port name %q", ref.Name, ref.Namespace, sp.Name))
	}
	return &url.URL{Scheme: "https", Host: hosts[rand.IntN(len(hosts))]}, apiregistrationv1.APIServiceCondition{}
}

// Discovery is the aggregated servers' part of the discovery documents.
type Discovery struct {
	// Gen changes whenever the rest does.
	Gen uint64
	// Versions lists every group version assigned to a Service with its priorities.
	Versions []Version
}

// Version is one aggregated group version.
type Version struct {
	GroupVersion                   schema.GroupVersion
	GroupPriority, VersionPriority int32
	// Resources is the server's document; nil while it has not answered a check.
	Resources *metav1.APIResourceList
}

// Generation returns the generation of what Discovery returns and how many group
// versions it lists, cheaply (every request asks).
func (a *Aggregator) Generation() (gen uint64, n int) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.gen, len(a.targets)
}

// Discovery returns the group versions served by aggregated servers.
func (a *Aggregator) Discovery() Discovery {
	a.mu.RLock()
	defer a.mu.RUnlock()
	d := Discovery{Gen: a.gen}
	for gv, t := range a.targets {
		d.Versions = append(d.Versions, Version{GroupVersion: gv, GroupPriority: t.spec.GroupPriorityMinimum,
			VersionPriority: t.spec.VersionPriority, Resources: t.resources})
	}
	return d
}

// ErrorWriter writes a Kubernetes Status error.
type ErrorWriter func(w http.ResponseWriter, req *http.Request, err error)

// Serve forwards req, a request for gv, to its aggregated server with the identity of
// user as front-proxy headers. It reports false when gv is not aggregated.
func (a *Aggregator) Serve(w http.ResponseWriter, req *http.Request, gv schema.GroupVersion, user, uid string, groups []string, extra map[string][]string, fail ErrorWriter) bool {
	a.mu.RLock()
	t := a.targets[gv]
	a.mu.RUnlock()
	if t == nil {
		return false
	}
	if t.transport == nil || t.condition.Status != apiregistrationv1.ConditionTrue {
		fail(w, req, apierrors.NewServiceUnavailable("service unavailable"))
		return true
	}
	u, cond := a.resolve(req.Context(), t.spec.Service)
	if u == nil {
		fail(w, req, apierrors.NewServiceUnavailable(cond.Message))
		return true
	}
	u.Path = req.URL.Path
	u.RawQuery = req.URL.RawQuery
	out := req.Clone(req.Context())
	// The client's credentials were for this server; the aggregated server learns who the
	// user is from the front-proxy headers, trusted through the client certificate.
	out.Header.Del("Authorization")
	for k := range out.Header {
		if strings.HasPrefix(k, "Impersonate-") {
			out.Header.Del(k)
		}
	}
	transport.SetAuthProxyHeaders(out, user, uid, groups, extra)
	h := proxy.NewUpgradeAwareHandler(u, t.transport, false, false, proxy.NewErrorResponder(proxyErrors{w: w, req: req, fail: fail, unreachable: a.cfg.Unreachable}))
	h.RejectForwardingRedirects = true
	h.ServeHTTP(w, out)
	return true
}

// proxyErrors answers a failure to reach an aggregated server with a 503 Status.
type proxyErrors struct {
	w           http.ResponseWriter
	req         *http.Request
	fail        ErrorWriter
	unreachable func()
}

// Error implements proxy.SimpleErrorResponder.
func (p proxyErrors) Error(err error) {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		p.fail(p.w, p.req, err)
		return
	}
	if p.unreachable != nil {
		p.unreachable()
	}
	p.fail(p.w, p.req, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
}
