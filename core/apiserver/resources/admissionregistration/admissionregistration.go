// Package admissionregistration serves the admissionregistration.k8s.io/v1 group: the
// webhook configurations (ValidatingWebhookConfiguration, MutatingWebhookConfiguration)
// and the CEL admission policies and their bindings (ValidatingAdmissionPolicy with its
// status, ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicy,
// MutatingAdmissionPolicyBinding), with Kubernetes' defaults and validation; CEL
// expressions are compiled with k8s.io/apiserver's compiler when they are written.
package admissionregistration

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"
)

// Definitions returns the webhook configuration resources of admissionregistration.k8s.io/v1.
func Definitions() []resources.Definition {
	// Building a CEL environment takes tens of milliseconds: done once, on the first
	// configuration with match conditions, and shared by both resources.
	cel := &celCompiler{}
	validating := definition(cel, "ValidatingWebhookConfiguration",
		func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
		func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
		func(obj runtime.Object) []hook {
			return validatingHooks(obj.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks)
		},
		func(obj runtime.Object) {
			c := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
			for i := range c.Webhooks {
				defaultValidating(&c.Webhooks[i])
			}
		})
	mutating := definition(cel, "MutatingWebhookConfiguration",
		func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
		func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
		func(obj runtime.Object) []hook {
			return mutatingHooks(obj.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks)
		},
		func(obj runtime.Object) {
			c := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
			for i := range c.Webhooks {
				defaultMutating(&c.Webhooks[i])
			}
		})
	return append([]resources.Definition{validating, mutating}, policyDefinitions(cel)...)
}

// definition describes one kind of webhook configuration: cluster-scoped, kept at
// Kubernetes' key (/registry/RESOURCE), its generation bumped when its webhooks change.
func definition(cel *celCompiler, kind string, newObj, newList func() runtime.Object,
	hooks func(obj runtime.Object) []hook, defaults func(obj runtime.Object)) resources.Definition {
	singular := strings.ToLower(kind)
	return resources.Definition{Resource: &registry.Resource{
		AllowUnconditionalUpdate: true, TracksGeneration: true, GroupVersion: admissionregistrationv1.SchemeGroupVersion,
		Name: singular + "s", SingularName: singular, Kind: kind, ListKind: kind + "List",
		Categories: []string{"api-extensions"}, StoragePrefix: "/registry/" + singular + "s",
		NewFunc: newObj, NewListFunc: newList,
		Strategy: strategy{defaults: defaults, validate: func(obj, old runtime.Object) field.ErrorList {
			opts := strictOptions(cel)
			if old != nil {
				opts = updateOptions(cel, hooks(old), hooks(obj))
			}
			return validateHooks(hooks(obj), opts)
		}},
		Printer: &registry.Printer{
			Columns: []registry.TableColumn{endpoints.NameColumn,
				{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks in the configuration"},
				endpoints.AgeColumn},
			Row: func(obj runtime.Object) []any {
				m := obj.(metav1.Object)
				return []any{m.GetName(), int64(len(hooks(obj))), endpoints.Age(m.GetCreationTimestamp(), time.Now())}
			},
		},
	}}
}

// strategy is a webhook configuration's create and update rules; validate gets old nil
// on create.
type strategy struct {
	defaults func(obj runtime.Object)
	validate func(obj, old runtime.Object) field.ErrorList
}

func (s strategy) Default(obj runtime.Object) { s.defaults(obj) }

func (strategy) PrepareForCreate(context.Context, runtime.Object) {}

func (strategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

func (s strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return s.validate(obj, nil)
}

func (s strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return s.validate(obj, old)
}

// defaultValidating is Kubernetes' SetDefaults_ValidatingWebhook with the rule and
// service reference defaults under it.
func defaultValidating(h *admissionregistrationv1.ValidatingWebhook) {
	defaultCommon(&h.FailurePolicy, &h.MatchPolicy, &h.NamespaceSelector, &h.ObjectSelector, &h.TimeoutSeconds, h.Rules, &h.ClientConfig)
}

// defaultMutating is Kubernetes' SetDefaults_MutatingWebhook with the rule and service
// reference defaults under it.
func defaultMutating(h *admissionregistrationv1.MutatingWebhook) {
	defaultCommon(&h.FailurePolicy, &h.MatchPolicy, &h.NamespaceSelector, &h.ObjectSelector, &h.TimeoutSeconds, h.Rules, &h.ClientConfig)
	if h.ReinvocationPolicy == nil {
		h.ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
	}
}

func defaultCommon(fp **admissionregistrationv1.FailurePolicyType, mp **admissionregistrationv1.MatchPolicyType,
	ns, obj **metav1.LabelSelector, timeout **int32, rules []admissionregistrationv1.RuleWithOperations, cc *admissionregistrationv1.WebhookClientConfig) {
	if *fp == nil {
		*fp = ptr.To(admissionregistrationv1.Fail)
	}
	if *mp == nil {
		*mp = ptr.To(admissionregistrationv1.Equivalent)
	}
	if *ns == nil {
		*ns = &metav1.LabelSelector{}
	}
	if *obj == nil {
		*obj = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		*timeout = ptr.To[int32](10)
	}
	for i := range rules {
		if rules[i].Scope == nil {
			rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
		}
	}
	if cc.Service != nil && cc.Service.Port == nil {
		cc.Service.Port = ptr.To[int32](443)
	}
}

// celCompiler is the CEL environment and the stateless compiler of match conditions,
// built on first use.
type celCompiler struct {
	once     sync.Once
	envSet   *environment.EnvSet
	compiler plugincel.Compiler
}

func (c *celCompiler) init() {
	c.once.Do(func() {
		c.envSet = environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
		c.compiler = plugincel.NewCompiler(c.envSet)
	})
}

func (c *celCompiler) get() plugincel.Compiler {
	c.init()
	return c.compiler
}

// composited returns a compiler of its own for one policy: it keeps the policy's
// variables, so that later expressions may name them.
func (c *celCompiler) composited() (*plugincel.CompositedCompiler, error) {
	c.init()
	return plugincel.NewCompositedCompiler(c.envSet)
}
