// Package policy enforces the CEL admission policies (ValidatingAdmissionPolicy and
// MutatingAdmissionPolicy with their bindings) with kube-apiserver's own plugins,
// k8s.io/apiserver's ValidatingAdmissionPolicy and MutatingAdmissionPolicy: matching,
// params (by name or selector, ConfigMaps or custom resources), variables, match
// conditions, validation actions, failure policies, ApplyConfiguration and JSONPatch
// mutations, reinvocation. The policies, bindings and namespaces are read through
// informers on the server's loopback client; params through the plugins' own informers.
package policy

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/admission/adapter"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	policygeneric "k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/tools/cache"
)

// Config is what the policies need from the server.
type Config struct {
	// Client reaches the server itself (its loopback client): policies, bindings,
	// namespaces, ConfigMap params, discovery and OpenAPI are read through it.
	Client kubernetes.Interface
	// Dynamic reads custom-resource params.
	Dynamic dynamic.Interface
	// Authorizer answers the CEL authorizer library's checks.
	Authorizer authorizer.UnconditionalAuthorizer
	// Objects are the server's scheme, equivalent resources and defaults.
	Objects adapter.ObjectInterfaces
	// Logger receives the audit annotations of policies (wasmplane keeps no audit log).
	Logger *slog.Logger
}

// Policies is the admission source of the CEL admission policies: one mutator applying
// every matching mutating policy in order, one validator evaluating the validating ones.
type Policies struct {
	factory    informers.SharedInformerFactory
	mutating   *mutating.Plugin
	validating *validating.Plugin
	mapper     *refreshingMapper
	objects    adapter.ObjectInterfaces
	vapBinds   admissionlisters.ValidatingAdmissionPolicyBindingLister
	mapBinds   admissionlisters.MutatingAdmissionPolicyBindingLister
	// vaps, maps and matcher answer whether a request concerns any validating or
	// mutating policy (Concerns) with the plugins' own matcher.
	vaps    admissionlisters.ValidatingAdmissionPolicyLister
	maps    admissionlisters.MutatingAdmissionPolicyLister
	matcher policygeneric.PolicyMatcher
	synced  []cache.InformerSynced
	// started is closed once Run has initialized the plugins; until then their
	// dispatchers do not exist.
	started chan struct{}
	log     *slog.Logger
}

// New builds the policy plugins; Run starts them.
func New(cfg Config) (*Policies, error) {
	if cfg.Client == nil || cfg.Dynamic == nil || cfg.Authorizer == nil || cfg.Objects.Scheme == nil {
		return nil, fmt.Errorf("admission policies need a client, a dynamic client, an authorizer and a scheme")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Objects.Equivalents == nil {
		cfg.Objects.Equivalents = runtime.NewEquivalentResourceRegistry()
	}
	vp, err := validating.NewPlugin(nil)
	if err != nil {
		return nil, fmt.Errorf("building the validating admission policy plugin: %w", err)
	}
	mp, err := mutating.NewPlugin(nil)
	if err != nil {
		return nil, fmt.Errorf("building the mutating admission policy plugin: %w", err)
	}
	// MutatingAdmissionPolicy is GA and on by default in Kubernetes 1.36 and later; the
	// plugin reads its gate only through InspectFeatureGates.
	mp.SetEnabled(true)
	factory := informers.NewSharedInformerFactory(cfg.Client, 0)
	mapper := newRefreshingMapper(cfg.Client.Discovery())
	for _, p := range []interface {
		SetExternalKubeInformerFactory(informers.SharedInformerFactory)
		SetExternalKubeClientSet(kubernetes.Interface)
		SetRESTMapper(mapper meta.RESTMapper)
		SetDynamicClient(dynamic.Interface)
		SetUnconditionalAuthorizer(authorizer.UnconditionalAuthorizer)
	}{vp.Plugin, mp.Plugin} {
		p.SetExternalKubeInformerFactory(factory)
		p.SetExternalKubeClientSet(cfg.Client)
		p.SetRESTMapper(mapper)
		p.SetDynamicClient(cfg.Dynamic)
		p.SetUnconditionalAuthorizer(cfg.Authorizer)
	}
	adm := factory.Admissionregistration().V1()
	vb, mb := adm.ValidatingAdmissionPolicyBindings(), adm.MutatingAdmissionPolicyBindings()
	return &Policies{
		factory: factory, validating: vp, mutating: mp, mapper: mapper, objects: cfg.Objects, log: log,
		vapBinds: vb.Lister(), mapBinds: mb.Lister(), started: make(chan struct{}),
		vaps: adm.ValidatingAdmissionPolicies().Lister(), maps: adm.MutatingAdmissionPolicies().Lister(),
		matcher: policygeneric.NewPolicyMatcher(matching.NewMatcher(factory.Core().V1().Namespaces().Lister(), cfg.Client)),
		synced: []cache.InformerSynced{vb.Informer().HasSynced, mb.Informer().HasSynced,
			adm.ValidatingAdmissionPolicies().Informer().HasSynced, adm.MutatingAdmissionPolicies().Informer().HasSynced,
			factory.Core().V1().Namespaces().Informer().HasSynced},
	}, nil
}

// Run initializes the plugins, starts their informers and stops them when ctx ends; it
// returns then. The plugins' own workers (policy compilation, param informers, OpenAPI
// refresh) stop with ctx too.
func (p *Policies) Run(ctx context.Context) error {
	for _, pl := range []interface {
		SetDrainedNotification(<-chan struct{})
		ValidateInitialization() error
	}{p.validating.Plugin, p.mutating.Plugin} {
		pl.SetDrainedNotification(ctx.Done())
		if err := pl.ValidateInitialization(); err != nil {
			return fmt.Errorf("initializing the admission policy plugins: %w", err)
		}
	}
	close(p.started)
	p.factory.Start(ctx.Done())
	<-ctx.Done()
	p.factory.Shutdown()
	return nil
}

func (p *Policies) allSynced() bool {
	select {
	case <-p.started:
	default:
		return false
	}
	for _, s := range p.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Acquire implements admission.Source. A policy acts only through a binding: with no
// binding of a kind the plugin is left out, so that a cluster without policies pays
// nothing. Until the informers have synced both plugins run, and wait for them.
func (p *Policies) Acquire(*admission.Attributes) ([]admission.Mutator, []admission.Validator, func()) {
	synced := p.allSynced()
	var ms []admission.Mutator
	var vs []admission.Validator
	if list, err := p.mapBinds.List(labels.Everything()); !synced || err != nil || len(list) > 0 {
		ms = []admission.Mutator{mutator{p}}
	}
	if list, err := p.vapBinds.List(labels.Everything()); !synced || err != nil || len(list) > 0 {
		vs = []admission.Validator{validator{p}}
	}
	return ms, vs, func() {}
}

// waitStarted waits for Run to have built the plugins' dispatchers.
func (p *Policies) waitStarted(ctx context.Context) error {
	select {
	case <-p.started:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("admission policies not started: %w", ctx.Err())
	}
}

// stateKey keeps a request's mutating state (its reinvocation context) between the
// first call and a reinvocation.
type stateKey struct{}

// mutator is the MutatingAdmissionPolicy plugin as a chain mutator.
type mutator struct{ p *Policies }

// Name implements admission.Mutator.
func (mutator) Name() string { return mutating.PluginName }

// Admit implements admission.Mutator.
func (m mutator) Admit(ctx context.Context, a *admission.Attributes) error {
	if err := m.p.waitStarted(ctx); err != nil {
		return err
	}
	attrs, _ := a.Value(stateKey{}).(*adapter.Attributes)
	if attrs == nil {
		attrs = adapter.NewAttributes(a)
		a.SetValue(stateKey{}, attrs)
	}
	defer attrs.FlushAnnotations(ctx, m.p.log)
	return m.p.mutating.Admit(adapter.WithWarnings(ctx), attrs, m.p.objects)
}

// Concerns implements admission.Selective: a request concerns the mutating policies, at
// their turn, when one of them applies to it through a binding (concerns).
func (m mutator) Concerns(_ context.Context, a *admission.Attributes) bool {
	if !m.p.allSynced() {
		return true
	}
	binds, err := m.p.mapBinds.List(labels.Everything())
	if err != nil {
		return true
	}
	return m.p.concerns(a, len(binds),
		func(i int) policygeneric.BindingAccessor {
			return mutating.NewMutatingAdmissionPolicyBindingAccessor(binds[i])
		},
		func(name string) (policygeneric.PolicyAccessor, error) {
			policy, err := m.p.maps.Get(name)
			if err != nil {
				return nil, err
			}
			return mutating.NewMutatingAdmissionPolicyAccessor(policy), nil
		})
}

// ReinvokeRequest implements admission.RequestReinvoker: policies with reinvocationPolicy
// IfNeeded run once more when a later plugin changed the object after they saw it.
func (m mutator) ReinvokeRequest(a *admission.Attributes, changedAfter bool) bool {
	attrs, _ := a.Value(stateKey{}).(*adapter.Attributes)
	return attrs != nil && adapter.Reinvoke(attrs, changedAfter)
}

// validator is the ValidatingAdmissionPolicy plugin as a chain validator.
type validator struct{ p *Policies }

// Name implements admission.Validator.
func (validator) Name() string { return validating.PluginName }

// Concerns implements admission.Selective: a request concerns the validating policies
// when one of them applies to it through a binding (concerns).
func (v validator) Concerns(_ context.Context, a *admission.Attributes) bool {
	if !v.p.allSynced() {
		return true
	}
	binds, err := v.p.vapBinds.List(labels.Everything())
	if err != nil {
		return true
	}
	return v.p.concerns(a, len(binds),
		func(i int) policygeneric.BindingAccessor {
			return validating.NewValidatingAdmissionPolicyBindingAccessor(binds[i])
		},
		func(name string) (policygeneric.PolicyAccessor, error) {
			policy, err := v.p.vaps.Get(name)
			if err != nil {
				return nil, err
			}
			return validating.NewValidatingAdmissionPolicyAccessor(policy), nil
		})
}

// concerns tells whether, for one of n bindings, both the bound policy's match
// constraints and the binding's match resources take a in, as k8s.io/apiserver's
// dispatcher decides before it evaluates matchConditions (which only narrow the choice).
// A policy whose constraints take it in but cannot have its params configured is refused
// by the dispatcher whatever its bindings say, so a policy with a paramKind concerns the
// request once its constraints do; bindings of policies that do not exist are skipped,
// as the dispatcher skips them. When a selector cannot be evaluated the request
// concerns them.
func (p *Policies) concerns(a *admission.Attributes, n int, binding func(int) policygeneric.BindingAccessor, policy func(name string) (policygeneric.PolicyAccessor, error)) bool {
	if n == 0 {
		return false
	}
	attrs := adapter.NewAttributes(a)
	for i := range n {
		b := binding(i)
		pol, err := policy(b.GetPolicyName().Name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return true
		}
		ok, _, _, err := p.matcher.DefinitionMatches(attrs, p.objects, pol)
		if err != nil || ok && pol.GetParamKind() != nil {
			return true
		}
		if !ok {
			continue
		}
		if ok, err := p.matcher.BindingMatches(attrs, p.objects, b); ok || err != nil {
			return true
		}
	}
	return false
}

// Validate implements admission.Validator. Warn actions become Warning headers, Audit
// actions and audit annotations go to the request's trace and the debug log.
func (v validator) Validate(ctx context.Context, a *admission.Attributes) error {
	if err := v.p.waitStarted(ctx); err != nil {
		return err
	}
	attrs := adapter.NewAttributes(a)
	defer attrs.FlushAnnotations(ctx, v.p.log)
	return v.p.validating.Validate(adapter.WithWarnings(ctx), attrs, v.p.objects)
}
