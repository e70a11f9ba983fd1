// Package webhook calls the admission webhooks that ValidatingWebhookConfiguration and
// MutatingWebhookConfiguration objects declare, with kube-apiserver's own machinery
// (k8s.io/apiserver's MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins:
// rule, selector and match-condition matching, the AdmissionReview exchange, patches,
// failure policies, timeouts, dry-run and side effects, warnings, metrics). wasmplane's
// admission attributes are adapted to k8s.io/apiserver's, and the configurations,
// namespaces and services are read through informers on the server's loopback client.
package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/admission/adapter"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/configuration"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/generic"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Config is what the webhooks need from the server.
type Config struct {
	// Client reaches the server itself (its loopback client): the informers of webhook
	// configurations, namespaces and services read through it.
	Client kubernetes.Interface
	// Scheme creates and converts the objects sent to webhooks and decoded from patches.
	Scheme *runtime.Scheme
	// Equivalents says which served resources are the same objects in another version,
	// for matchPolicy Equivalent; nil = none.
	Equivalents runtime.EquivalentResourceMapper
	// Defaulter, when set, applies the resource's defaults to an object a webhook
	// patched, as kube-apiserver does.
	Defaulter func(obj runtime.Object)
	// Logger receives the audit annotations webhooks return (wasmplane keeps no audit log).
	Logger *slog.Logger
}

// Webhooks is the admission source of the webhook configurations: one mutator that
// calls every matching mutating webhook in order, one validator that calls the
// validating webhooks in parallel.
type Webhooks struct {
	factory    informers.SharedInformerFactory
	mutating   *mutating.Plugin
	validating *validating.Plugin
	objects    adapter.ObjectInterfaces
	// mutHooks, valHooks and namespaces answer whether a request concerns any mutating
	// or validating webhook (Concerns) with the plugins' own rule and selector matchers.
	mutHooks   generic.Source
	valHooks   generic.Source
	namespaces namespace.Matcher
	synced     []cache.InformerSynced
	log        *slog.Logger
}

// New builds the webhook plugins; Run starts their informers.
func New(cfg Config) (*Webhooks, error) {
	if cfg.Client == nil || cfg.Scheme == nil {
		return nil, fmt.Errorf("admission webhooks need a client and a scheme")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	factory := informers.NewSharedInformerFactory(cfg.Client, 0)
	mp, err := mutating.NewMutatingWebhook(nil)
	if err != nil {
		return nil, fmt.Errorf("building the mutating webhook plugin: %w", err)
	}
	vp, err := validating.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		return nil, fmt.Errorf("building the validating webhook plugin: %w", err)
	}
	services := factory.Core().V1().Services()
	for _, p := range []*generic.Webhook{mp.Webhook, vp.Webhook} {
		p.SetExternalKubeClientSet(cfg.Client)
		p.SetExternalKubeInformerFactory(factory)
		p.SetServiceResolver(clusterIPResolver{services.Lister()})
		if err := p.ValidateInitialization(); err != nil {
			return nil, fmt.Errorf("initializing the webhook plugins: %w", err)
		}
	}
	mc := factory.Admissionregistration().V1().MutatingWebhookConfigurations()
	vc := factory.Admissionregistration().V1().ValidatingWebhookConfigurations()
	equivalents := cfg.Equivalents
	if equivalents == nil {
		equivalents = runtime.NewEquivalentResourceRegistry()
	}
	mutHooks := configuration.NewMutatingWebhookConfigurationManager(factory, nil)
	valHooks := configuration.NewValidatingWebhookConfigurationManager(factory, nil)
	return &Webhooks{
		factory: factory, mutating: mp, validating: vp, log: log,
		objects:  adapter.ObjectInterfaces{Scheme: cfg.Scheme, Equivalents: equivalents, Defaulter: cfg.Defaulter},
		mutHooks: mutHooks, valHooks: valHooks,
		namespaces: namespace.Matcher{NamespaceLister: factory.Core().V1().Namespaces().Lister(), Client: cfg.Client},
		synced: []cache.InformerSynced{mc.Informer().HasSynced, vc.Informer().HasSynced, mutHooks.HasSynced, valHooks.HasSynced,
			services.Informer().HasSynced, factory.Core().V1().Namespaces().Informer().HasSynced},
	}, nil
}

// Run starts the informers and stops them when ctx ends; it returns then.
func (w *Webhooks) Run(ctx context.Context) {
	w.factory.Start(ctx.Done())
	<-ctx.Done()
	w.factory.Shutdown()
}

func (w *Webhooks) allSynced() bool {
	for _, s := range w.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Acquire implements admission.Source. With no webhook of a kind the plugin is
// left out, so that a cluster without webhooks pays nothing; until the informers have
// synced both plugins run, and wait for them (kube-apiserver's readiness wait).
func (w *Webhooks) Acquire(*admission.Attributes) ([]admission.Mutator, []admission.Validator, func()) {
	synced := w.allSynced()
	var ms []admission.Mutator
	var vs []admission.Validator
	if !synced || len(w.mutHooks.Webhooks()) > 0 {
		ms = []admission.Mutator{mutator{w}}
	}
	if !synced || len(w.valHooks.Webhooks()) > 0 {
		vs = []admission.Validator{validator{w}}
	}
	return ms, vs, func() {}
}

// stateKey keeps a request's mutating state (its reinvocation context) between the
// first call and a reinvocation.
type stateKey struct{}

// mutator is the MutatingAdmissionWebhook plugin as a chain mutator.
type mutator struct{ w *Webhooks }

// Name implements admission.Mutator.
func (mutator) Name() string { return mutating.PluginName }

// Admit implements admission.Mutator.
func (m mutator) Admit(ctx context.Context, a *admission.Attributes) error {
	attrs, _ := a.Value(stateKey{}).(*adapter.Attributes)
	if attrs == nil {
		attrs = adapter.NewAttributes(a)
		a.SetValue(stateKey{}, attrs)
	}
	defer attrs.FlushAnnotations(ctx, m.w.log)
	return m.w.mutating.Admit(adapter.WithWarnings(ctx), attrs, m.w.objects)
}

// ReinvokeRequest implements admission.RequestReinvoker: a reinvocation round runs when
// a webhook or a later plugin changed the object after an IfNeeded webhook saw it; the
// plugin then calls only those webhooks, once.
func (m mutator) ReinvokeRequest(a *admission.Attributes, changedAfter bool) bool {
	attrs, _ := a.Value(stateKey{}).(*adapter.Attributes)
	return attrs != nil && adapter.Reinvoke(attrs, changedAfter)
}

// validator is the ValidatingAdmissionWebhook plugin as a chain validator.
type validator struct{ w *Webhooks }

// Name implements admission.Validator.
func (validator) Name() string { return validating.PluginName }

// Validate implements admission.Validator.
func (v validator) Validate(ctx context.Context, a *admission.Attributes) error {
	attrs := adapter.NewAttributes(a)
	defer attrs.FlushAnnotations(ctx, v.w.log)
	return v.w.validating.Validate(adapter.WithWarnings(ctx), attrs, v.w.objects)
}

// Concerns implements admission.Selective: a request concerns the validating webhooks
// when one of them would be called for it (concerns).
func (v validator) Concerns(_ context.Context, a *admission.Attributes) bool {
	return v.w.concerns(v.w.valHooks, a)
}

// Concerns implements admission.Selective: a request concerns the mutating webhooks, at
// their turn, when one of them would be called for it (concerns).
func (m mutator) Concerns(_ context.Context, a *admission.Attributes) bool {
	return m.w.concerns(m.w.mutHooks, a)
}

// concerns tells whether one of the webhooks of src would be called for a by its
// namespace and object selectors and its rules (with matchPolicy Equivalent, for an
// equivalent resource too), as k8s.io/apiserver's ShouldCallHook decides before it
// evaluates matchConditions, which only narrow the choice further. Until the
// configurations are read, and when a selector cannot be evaluated, every request
// concerns them: the plugin then waits or fails as kube-apiserver's does.
func (w *Webhooks) concerns(src generic.Source, a *admission.Attributes) bool {
	if !w.allSynced() {
		return true
	}
	hooks := src.Webhooks()
	if len(hooks) == 0 {
		return false
	}
	attrs := adapter.NewAttributes(a)
	// The configurations' own objects are never sent to webhooks (Dispatch returns first).
	if rules.IsExemptAdmissionConfigurationResource(attrs) {
		return false
	}
	for _, h := range hooks {
		if mayCall(h, attrs, &w.namespaces, w.objects) {
			return true
		}
	}
	return false
}

// mayCall tells whether webhook h may be called for attrs: ShouldCallHook's matching
// without the match conditions. A selector that cannot be evaluated counts as a match, so
// that the error is reported by the call.
func mayCall(h webhook.WebhookAccessor, attrs k8sadmission.Attributes, namespaces *namespace.Matcher, o k8sadmission.ObjectInterfaces) bool {
	if ok, err := namespaces.MatchNamespaceSelector(h, attrs); !ok && err == nil {
		return false
	}
	var objects object.Matcher
	if ok, err := objects.MatchObjectSelector(h, attrs); !ok && err == nil {
		return false
	}
	for _, r := range h.GetRules() {
		if (&rules.Matcher{Rule: r, Attr: attrs}).Matches() {
			return true
		}
	}
	if p := h.GetMatchPolicy(); p == nil || *p != admissionregistrationv1.Equivalent {
		return false
	}
	res := attrs.GetResource()
	for _, eq := range o.GetEquivalentResourceMapper().EquivalentResourcesFor(res, attrs.GetSubresource()) {
		if eq == res {
			continue
		}
		for _, r := range h.GetRules() {
			if (&rules.Matcher{Rule: r, Attr: resourceOverride{attrs, eq}}).Matches() {
				return true
			}
		}
	}
	return false
}

// resourceOverride is a request's attributes with another (equivalent) resource, which
// the rules of a webhook with matchPolicy Equivalent are matched against.
type resourceOverride struct {
	k8sadmission.Attributes
	resource schema.GroupVersionResource
}

// GetResource returns the equivalent resource.
func (r resourceOverride) GetResource() schema.GroupVersionResource { return r.resource }

// clusterIPResolver sends a webhook's clientConfig.service to the Service's cluster IP
// (ExternalName: its external name), as kube-apiserver does.
type clusterIPResolver struct{ services corelisters.ServiceLister }

// ResolveEndpoint implements webhookutil.ServiceResolver.
func (r clusterIPResolver) ResolveEndpoint(namespace, name string, port int32) (u *url.URL, err error) {
	return proxy.ResolveCluster(r.services, namespace, name, port)
}

// metricPrefixes are kube-apiserver's webhook and admission policy metrics, which
// k8s.io/apiserver's plugins all keep in one registry.
var metricPrefixes = []string{"apiserver_admission_webhook_", "apiserver_admission_match_condition_",
	"apiserver_validating_admission_policy_", "apiserver_mutating_admission_policy_"}

// Metrics returns kube-apiserver's webhook admission metrics
// (apiserver_admission_webhook_admission_duration_seconds,
// apiserver_admission_webhook_rejection_count, apiserver_admission_match_condition_*)
// and admission policy metrics (apiserver_validating_admission_policy_*,
// apiserver_mutating_admission_policy_*), which k8s.io/apiserver keeps in
// component-base's process-wide registry, for a server's /metrics.
func Metrics() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		all, err := legacyregistry.DefaultGatherer.Gather()
		out := all[:0]
		for _, mf := range all {
			for _, p := range metricPrefixes {
				if strings.HasPrefix(mf.GetName(), p) {
					out = append(out, mf)
					break
				}
			}
		}
		return out, err
	})
}
