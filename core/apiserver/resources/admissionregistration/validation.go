package admissionregistration

import (
	"fmt"
	"reflect"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/utils/ptr"
)

// hook is what validation reads of a ValidatingWebhook or a MutatingWebhook.
type hook struct {
	name                    string
	rules                   []admissionregistrationv1.RuleWithOperations
	failurePolicy           *admissionregistrationv1.FailurePolicyType
	matchPolicy             *admissionregistrationv1.MatchPolicyType
	sideEffects             *admissionregistrationv1.SideEffectClass
	timeoutSeconds          *int32
	namespaceSelector       *metav1.LabelSelector
	objectSelector          *metav1.LabelSelector
	clientConfig            admissionregistrationv1.WebhookClientConfig
	admissionReviewVersions []string
	matchConditions         []admissionregistrationv1.MatchCondition
	// mutating is set for a MutatingWebhook, with its reinvocationPolicy.
	mutating           bool
	reinvocationPolicy *admissionregistrationv1.ReinvocationPolicyType
}

func validatingHooks(in []admissionregistrationv1.ValidatingWebhook) []hook {
	out := make([]hook, len(in))
	for i, h := range in {
		out[i] = hook{name: h.Name, rules: h.Rules, failurePolicy: h.FailurePolicy, matchPolicy: h.MatchPolicy, sideEffects: h.SideEffects,
			timeoutSeconds: h.TimeoutSeconds, namespaceSelector: h.NamespaceSelector, objectSelector: h.ObjectSelector,
			clientConfig: h.ClientConfig, admissionReviewVersions: h.AdmissionReviewVersions, matchConditions: h.MatchConditions}
	}
	return out
}

func mutatingHooks(in []admissionregistrationv1.MutatingWebhook) []hook {
	out := make([]hook, len(in))
	for i, h := range in {
		out[i] = hook{name: h.Name, rules: h.Rules, failurePolicy: h.FailurePolicy, matchPolicy: h.MatchPolicy, sideEffects: h.SideEffects,
			timeoutSeconds: h.TimeoutSeconds, namespaceSelector: h.NamespaceSelector, objectSelector: h.ObjectSelector,
			clientConfig: h.ClientConfig, admissionReviewVersions: h.AdmissionReviewVersions, matchConditions: h.MatchConditions,
			mutating: true, reinvocationPolicy: h.ReinvocationPolicy}
	}
	return out
}

// options are Kubernetes' validationOptions: strict on create; on update a rule the
// stored object already broke is not enforced, so that an old object stays writable.
type options struct {
	cel                              *celCompiler
	ignoreMatchConditions            bool
	requireNoSideEffects             bool
	requireRecognizedReviewVersion   bool
	requireUniqueNames               bool
	allowInvalidLabelValueInSelector bool
	// allowParams declares params in match conditions (a policy with a paramKind).
	allowParams bool
	// storedExpressions compile in the stored-expressions environment (an expression
	// already accepted keeps compiling when the CEL library shrinks).
	storedExpressions sets.Set[string]
}

func strictOptions(cel *celCompiler) options {
	return options{cel: cel, requireNoSideEffects: true, requireRecognizedReviewVersion: true, requireUniqueNames: true,
		storedExpressions: sets.New[string]()}
}

// updateOptions is Kubernetes' Validate*WebhookConfigurationUpdate.
func updateOptions(cel *celCompiler, old, hooks []hook) options {
	o := options{cel: cel, requireNoSideEffects: true, requireRecognizedReviewVersion: true, requireUniqueNames: true,
		storedExpressions: sets.New[string]()}
	names := sets.New[string]()
	sameConditions := len(old) == len(hooks)
	for i, h := range old {
		if h.sideEffects == nil || !noSideEffectClasses.Has(string(*h.sideEffects)) {
			o.requireNoSideEffects = false
		}
		if len(h.admissionReviewVersions) > 0 && !hasAcceptedReviewVersion(h.admissionReviewVersions) {
			o.requireRecognizedReviewVersion = false
		}
		if names.Has(h.name) {
			o.requireUniqueNames = false
		}
		names.Insert(h.name)
		for _, sel := range []*metav1.LabelSelector{h.namespaceSelector, h.objectSelector} {
			if sel != nil && len(metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0 {
				o.allowInvalidLabelValueInSelector = true
			}
		}
		for _, mc := range h.matchConditions {
			o.storedExpressions.Insert(mc.Expression)
		}
		if sameConditions && !reflect.DeepEqual(h.matchConditions, hooks[i].matchConditions) {
			sameConditions = false
		}
	}
	o.ignoreMatchConditions = sameConditions
	return o
}

var (
	supportedFailurePolicies      = sets.New(string(admissionregistrationv1.Ignore), string(admissionregistrationv1.Fail))
	supportedMatchPolicies        = sets.New(string(admissionregistrationv1.Exact), string(admissionregistrationv1.Equivalent))
	supportedSideEffectClasses    = sets.New(string(admissionregistrationv1.SideEffectClassUnknown), string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassSome), string(admissionregistrationv1.SideEffectClassNoneOnDryRun))
	noSideEffectClasses           = sets.New(string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun))
	supportedOperations           = sets.New(string(admissionregistrationv1.OperationAll), string(admissionregistrationv1.Create), string(admissionregistrationv1.Update), string(admissionregistrationv1.Delete), string(admissionregistrationv1.Connect))
	supportedReinvocationPolicies = sets.New(string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy))
	validScopes                   = sets.New(string(admissionregistrationv1.ClusterScope), string(admissionregistrationv1.NamespacedScope), string(admissionregistrationv1.AllScopes))
	// acceptedReviewVersions are the AdmissionReview versions the server sends.
	acceptedReviewVersions = []string{"v1", "v1beta1"}
)

func hasAcceptedReviewVersion(versions []string) bool {
	for _, v := range versions {
		if v == "v1" || v == "v1beta1" {
			return true
		}
	}
	return false
}

// validateHooks is Kubernetes' validate{Validating,Mutating}WebhookConfiguration without
// object meta (the store checks it).
func validateHooks(hooks []hook, opts options) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, h := range hooks {
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateHook(&h, opts, p)...)
		errs = append(errs, validateReviewVersions(h.admissionReviewVersions, opts.requireRecognizedReviewVersion, p.Child("admissionReviewVersions"))...)
		if opts.requireUniqueNames && h.name != "" {
			if names.Has(h.name) {
				errs = append(errs, field.Duplicate(p.Child("name"), h.name))
			}
			names.Insert(h.name)
		}
	}
	return errs
}

func validateHook(h *hook, opts options, p *field.Path) field.ErrorList {
	errs := utilvalidation.IsFullyQualifiedName(p.Child("name"), h.name)
	selectorOpts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.allowInvalidLabelValueInSelector}
	for i, r := range h.rules {
		errs = append(errs, validateRuleWithOperations(&r, p.Child("rules").Index(i))...)
	}
	if h.failurePolicy != nil && !supportedFailurePolicies.Has(string(*h.failurePolicy)) {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *h.failurePolicy, sets.List(supportedFailurePolicies)))
	}
	if h.matchPolicy != nil && !supportedMatchPolicies.Has(string(*h.matchPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *h.matchPolicy, sets.List(supportedMatchPolicies)))
	}
	allowedSideEffects := supportedSideEffectClasses
	if opts.requireNoSideEffects {
		allowedSideEffects = noSideEffectClasses
	}
	if h.sideEffects == nil {
		errs = append(errs, field.Required(p.Child("sideEffects"), fmt.Sprintf("must specify one of %v", strings.Join(sets.List(allowedSideEffects), ", "))))
	} else if !allowedSideEffects.Has(string(*h.sideEffects)) {
		errs = append(errs, field.NotSupported(p.Child("sideEffects"), *h.sideEffects, sets.List(allowedSideEffects)))
	}
	if h.timeoutSeconds != nil && (*h.timeoutSeconds > 30 || *h.timeoutSeconds < 1) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *h.timeoutSeconds, "the timeout value must be between 1 and 30 seconds"))
	}
	if h.namespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(h.namespaceSelector, selectorOpts, p.Child("namespaceSelector"))...)
	}
	if h.objectSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(h.objectSelector, selectorOpts, p.Child("objectSelector"))...)
	}
	if h.mutating && h.reinvocationPolicy != nil && !supportedReinvocationPolicies.Has(string(*h.reinvocationPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), *h.reinvocationPolicy, sets.List(supportedReinvocationPolicies)))
	}
	cc := h.clientConfig
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		errs = append(errs, field.Required(p.Child("clientConfig"), "exactly one of url or service is required"))
	case cc.URL != nil:
		errs = append(errs, webhook.ValidateWebhookURL(p.Child("clientConfig").Child("url"), *cc.URL, true)...)
	default:
		errs = append(errs, webhook.ValidateWebhookService(p.Child("clientConfig").Child("service"), cc.Service.Name, cc.Service.Namespace, cc.Service.Path, ptr.Deref(cc.Service.Port, 443))...)
	}
	if !opts.ignoreMatchConditions {
		errs = append(errs, validateMatchConditions(h.matchConditions, opts, p.Child("matchConditions"))...)
	}
	return errs
}

func validateReviewVersions(versions []string, requireRecognized bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(versions) == 0 {
		return append(errs, field.Required(p, fmt.Sprintf("must specify one of %v", strings.Join(acceptedReviewVersions, ", "))))
	}
	seen := sets.New[string]()
	for i, v := range versions {
		if seen.Has(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
			continue
		}
		seen.Insert(v)
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
	}
	if requireRecognized && !hasAcceptedReviewVersion(versions) {
		errs = append(errs, field.Invalid(p, versions, fmt.Sprintf("must include at least one of %v", strings.Join(acceptedReviewVersions, ", "))))
	}
	return errs
}

func hasWildcard(s []string) bool {
	for _, v := range s {
		if v == "*" {
			return true
		}
	}
	return false
}

func validateRuleWithOperations(r *admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(p.Child("operations"), ""))
	}
	hasAll := false
	for _, op := range r.Operations {
		hasAll = hasAll || op == admissionregistrationv1.OperationAll
	}
	if len(r.Operations) > 1 && hasAll {
		errs = append(errs, field.Invalid(p.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range r.Operations {
		if !supportedOperations.Has(string(op)) {
			errs = append(errs, field.NotSupported(p.Child("operations").Index(i), op, sets.List(supportedOperations)))
		}
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && hasWildcard(r.APIGroups) {
		errs = append(errs, field.Invalid(p.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(p.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && hasWildcard(r.APIVersions) {
		errs = append(errs, field.Invalid(p.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(p.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateResources(r.Resources, p.Child("resources"))...)
	if r.Scope != nil && !validScopes.Has(string(*r.Scope)) {
		errs = append(errs, field.NotSupported(p.Child("scope"), *r.Scope, sets.List(validScopes)))
	}
	return errs
}

// validateResources is Kubernetes' check of resources and subresources with wildcards.
func validateResources(resources []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(p, ""))
	}
	wildcardSub := sets.New[string]() // x/*
	wildcardRes := sets.New[string]() // */x
	doubleWildcard, singleWildcard, plain := false, false, false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(p.Index(i), ""))
			continue
		}
		doubleWildcard = doubleWildcard || rs == "*/*"
		singleWildcard = singleWildcard || rs == "*"
		res, sub, ok := strings.Cut(rs, "/")
		if !ok {
			plain = rs != "*"
			continue
		}
		if wildcardSub.Has(res) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if wildcardRes.Has(sub) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			wildcardSub.Insert(res)
		}
		if res == "*" {
			wildcardRes.Insert(sub)
		}
	}
	if len(resources) > 1 && doubleWildcard {
		errs = append(errs, field.Invalid(p, resources, "if '*/*' is present, must not specify other resources"))
	}
	if singleWildcard && plain {
		errs = append(errs, field.Invalid(p, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

func validateMatchConditions(conds []admissionregistrationv1.MatchCondition, opts options, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conds) > 64 {
		errs = append(errs, field.TooMany(p, len(conds), 64))
	}
	names := sets.New[string]()
	for i, mc := range conds {
		cp := p.Index(i)
		if expr := strings.TrimSpace(mc.Expression); expr == "" {
			errs = append(errs, field.Required(cp.Child("expression"), ""))
		} else {
			errs = append(errs, compileMatchCondition(expr, opts, cp.Child("expression"))...)
		}
		if mc.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		} else {
			for _, msg := range utilvalidation.IsQualifiedName(mc.Name) {
				errs = append(errs, field.Invalid(cp.Child("name"), mc.Name, msg))
			}
			if names.Has(mc.Name) {
				errs = append(errs, field.Duplicate(cp.Child("name"), mc.Name))
			}
			names.Insert(mc.Name)
		}
	}
	return errs
}

// compileMatchCondition compiles one expression as kube-apiserver does (request, object,
// oldObject and authorizer declared, no params), turning a compile error into a field
// error.
func compileMatchCondition(expr string, opts options, p *field.Path) field.ErrorList {
	envType := environment.NewExpressions
	if opts.storedExpressions.Has(expr) {
		envType = environment.StoredExpressions
	}
	cond := &matchconditions.MatchCondition{Expression: expr}
	result := opts.cel.get().CompileCELExpression(cond, plugincel.OptionalVariableDeclarations{HasAuthorizer: true, HasParams: opts.allowParams}, envType)
	return celErrors(p, expr, result.Error)
}

// celErrors turns a CEL compile error into Kubernetes' field error: a missing
// expression is Required, a bad one Invalid with the compiler's message.
func celErrors(p *field.Path, expr string, err *apiservercel.Error) field.ErrorList {
	if err == nil {
		return nil
	}
	switch err.Type {
	case apiservercel.ErrorTypeRequired:
		return field.ErrorList{field.Required(p, err.Detail)}
	case apiservercel.ErrorTypeInvalid:
		return field.ErrorList{field.Invalid(p, expr, err.Detail)}
	}
	return field.ErrorList{field.InternalError(p, err)}
}
