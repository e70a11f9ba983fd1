package admissionregistration

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/environment"
)

const (
	maxAuditAnnotations = 20
	// maxAuditAnnotationValueExpressionLength is below the 10kB limit of an audit
	// annotation's value: concatenating strings often makes a value longer than its
	// expression.
	maxAuditAnnotationValueExpressionLength = 5 * 1024
)

var (
	supportedValidationActions = sets.New(string(admissionregistrationv1.Deny), string(admissionregistrationv1.Warn), string(admissionregistrationv1.Audit))
	supportedPolicyReasons     = sets.New(string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid), string(metav1.StatusReasonRequestEntityTooLarge))
	supportedPatchTypes        = sets.New(string(admissionregistrationv1.PatchTypeApplyConfiguration), string(admissionregistrationv1.PatchTypeJSONPatch))
	// supportedMutatingOperations leave out DELETE: a delete has no object to mutate.
	supportedMutatingOperations = sets.New(string(admissionregistrationv1.OperationAll), string(admissionregistrationv1.Create),
		string(admissionregistrationv1.Update), string(admissionregistrationv1.Connect))
	supportedParamNotFoundActions = []string{string(admissionregistrationv1.DenyAction), string(admissionregistrationv1.AllowAction)}
	celIdentifier                 = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
	celReserved                   = sets.New("true", "false", "null", "in", "as", "break", "const", "continue", "else",
		"for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while")
	newlines = regexp.MustCompile(`[\n\r]+`)
)

// policyCheck is what one policy's validation shares: its compiler, which keeps the
// policy's variables, and the expressions the stored object already had, which compile
// in the stored-expressions environment so that an accepted policy stays writable.
type policyCheck struct {
	compiler  *plugincel.CompositedCompiler
	hasParams bool
	stored    sets.Set[string]
}

func (c *policyCheck) envType(expr string) environment.Type {
	if c.stored.Has(expr) {
		return environment.StoredExpressions
	}
	return environment.NewExpressions
}

func (c *policyCheck) compile(acc plugincel.ExpressionAccessor, decls plugincel.OptionalVariableDeclarations, p *field.Path) field.ErrorList {
	return celErrors(p, acc.GetExpression(), c.compiler.CompileCELExpression(acc, decls, c.envType(acc.GetExpression())).Error)
}

// policyCommon is the part of a ValidatingAdmissionPolicySpec and a
// MutatingAdmissionPolicySpec validated alike.
type policyCommon struct {
	failurePolicy    *admissionregistrationv1.FailurePolicyType
	paramKind        *admissionregistrationv1.ParamKind
	matchConstraints *admissionregistrationv1.MatchResources
	matchConditions  []admissionregistrationv1.MatchCondition
	variables        []admissionregistrationv1.Variable
	mutating         bool
}

// validateCommon is the part of Kubernetes' validate{Validating,Mutating}AdmissionPolicySpec
// before the validations or mutations; it returns the checker they compile with.
func validateCommon(cel *celCompiler, spec, old *policyCommon, stored sets.Set[string], p *field.Path) (*policyCheck, field.ErrorList) {
	var errs field.ErrorList
	if spec.failurePolicy == nil {
		errs = append(errs, field.Required(p.Child("failurePolicy"), ""))
	} else if !supportedFailurePolicies.Has(string(*spec.failurePolicy)) {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *spec.failurePolicy, sets.List(supportedFailurePolicies)))
	}
	if spec.paramKind != nil {
		errs = append(errs, validateParamKind(spec.paramKind, p.Child("paramKind"))...)
	}
	if spec.matchConstraints == nil {
		errs = append(errs, field.Required(p.Child("matchConstraints"), ""))
	} else {
		mp := p.Child("matchConstraints")
		errs = append(errs, validateMatchResources(spec.matchConstraints, spec.mutating, mp)...)
		// The resource rules give the expressions their types.
		if len(spec.matchConstraints.ResourceRules) == 0 {
			errs = append(errs, field.Required(mp.Child("resourceRules"), ""))
		}
	}
	opts := options{cel: cel, storedExpressions: stored, allowParams: spec.paramKind != nil}
	if old == nil || !reflect.DeepEqual(old.matchConditions, spec.matchConditions) {
		errs = append(errs, validateMatchConditions(spec.matchConditions, opts, p.Child("matchConditions"))...)
	}
	compiler, err := cel.composited()
	if err != nil {
		return nil, append(errs, field.InternalError(p, fmt.Errorf("building the CEL environment: %w", err)))
	}
	check := &policyCheck{compiler: compiler, hasParams: spec.paramKind != nil, stored: stored}
	for i, v := range spec.variables {
		vp := p.Child("variables").Index(i)
		if strings.TrimSpace(v.Name) == "" {
			errs = append(errs, field.Required(vp.Child("name"), "name is not specified"))
		} else if !celIdentifier.MatchString(v.Name) || celReserved.Has(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, "must be a valid CEL identifier"))
		}
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(vp.Child("expression"), "expression is not specified"))
			continue
		}
		result := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression},
			plugincel.OptionalVariableDeclarations{HasParams: check.hasParams, HasAuthorizer: true}, check.envType(v.Expression))
		errs = append(errs, celErrors(vp.Child("expression"), v.Expression, result.Error)...)
	}
	return check, errs
}

func validatingCommon(p *admissionregistrationv1.ValidatingAdmissionPolicy) *policyCommon {
	if p == nil {
		return nil
	}
	s := &p.Spec
	return &policyCommon{failurePolicy: s.FailurePolicy, paramKind: s.ParamKind, matchConstraints: s.MatchConstraints,
		matchConditions: s.MatchConditions, variables: s.Variables}
}

func mutatingCommon(p *admissionregistrationv1.MutatingAdmissionPolicy) *policyCommon {
	if p == nil {
		return nil
	}
	s := &p.Spec
	return &policyCommon{failurePolicy: s.FailurePolicy, paramKind: s.ParamKind, matchConstraints: s.MatchConstraints,
		matchConditions: s.MatchConditions, variables: s.Variables, mutating: true}
}

// storedExpressions are every CEL expression of a stored policy.
func storedExpressions(common *policyCommon, more ...string) sets.Set[string] {
	out := sets.New(more...)
	if common == nil {
		return out
	}
	for _, mc := range common.matchConditions {
		out.Insert(mc.Expression)
	}
	for _, v := range common.variables {
		out.Insert(v.Expression)
	}
	return out
}

// validateValidatingPolicy is Kubernetes' validateValidatingAdmissionPolicySpec (old nil
// on create) without object meta, which the store checks.
func validateValidatingPolicy(cel *celCompiler, pol, old *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	p := field.NewPath("spec")
	var stored []string
	if old != nil {
		for _, v := range old.Spec.Validations {
			stored = append(stored, v.Expression, v.MessageExpression)
		}
		for _, a := range old.Spec.AuditAnnotations {
			stored = append(stored, a.ValueExpression)
		}
	}
	check, errs := validateCommon(cel, validatingCommon(pol), validatingCommon(old), storedExpressions(validatingCommon(old), stored...), p)
	if check == nil {
		return errs
	}
	spec := &pol.Spec
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		const msg = "validations or auditAnnotations must contain at least one item"
		return append(errs, field.Required(p.Child("validations"), msg), field.Required(p.Child("auditAnnotations"), msg))
	}
	decls := plugincel.OptionalVariableDeclarations{HasParams: check.hasParams, HasAuthorizer: true}
	for i, v := range spec.Validations {
		vp := p.Child("validations").Index(i)
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(vp.Child("expression"), "expression is not specified"))
		} else {
			errs = append(errs, check.compile(&validating.ValidationCondition{Expression: v.Expression}, decls, vp.Child("expression"))...)
		}
		if msgExpr := strings.TrimSpace(v.MessageExpression); v.MessageExpression != "" && msgExpr == "" {
			errs = append(errs, field.Invalid(vp.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
		} else if msgExpr != "" {
			// The message expression sees params (when the policy has them) but no authorizer.
			errs = append(errs, check.compile(&validating.MessageExpressionCondition{MessageExpression: v.MessageExpression},
				plugincel.OptionalVariableDeclarations{HasParams: check.hasParams}, vp.Child("messageExpression"))...)
		}
		if msg := strings.TrimSpace(v.Message); v.Message != "" && msg == "" {
			errs = append(errs, field.Invalid(vp.Child("message"), v.Message, "must be non-empty if specified"))
		} else if newlines.MatchString(msg) {
			errs = append(errs, field.Invalid(vp.Child("message"), v.Message, "must not contain line breaks"))
		}
		if v.Reason != nil && !supportedPolicyReasons.Has(string(*v.Reason)) {
			errs = append(errs, field.NotSupported(vp.Child("reason"), *v.Reason, sets.List(supportedPolicyReasons)))
		}
	}
	if len(spec.AuditAnnotations) > maxAuditAnnotations {
		errs = append(errs, field.Invalid(p.Child("auditAnnotations"), spec.AuditAnnotations,
			fmt.Sprintf("must not have more than %d auditAnnotations", maxAuditAnnotations)))
	}
	keys := sets.New[string]()
	for i, a := range spec.AuditAnnotations {
		ap := p.Child("auditAnnotations").Index(i)
		if pol.Name == "" {
			errs = append(errs, field.Invalid(ap.Child("key"), a.Key, "requires metadata.name be non-empty"))
		} else {
			for _, msg := range utilvalidation.IsQualifiedName(pol.Name + "/" + a.Key) {
				errs = append(errs, field.Invalid(ap.Child("key"), pol.Name+"/"+a.Key, msg))
			}
		}
		if keys.Has(a.Key) {
			errs = append(errs, field.Duplicate(ap.Child("key"), a.Key))
		}
		keys.Insert(a.Key)
		expr := strings.TrimSpace(a.ValueExpression)
		switch {
		case expr == "":
			errs = append(errs, field.Required(ap.Child("valueExpression"), "valueExpression is not specified"))
		case len(expr) > maxAuditAnnotationValueExpressionLength:
			errs = append(errs, field.Required(ap.Child("valueExpression"), fmt.Sprintf("must not exceed %d bytes in length", maxAuditAnnotationValueExpressionLength)))
		default:
			errs = append(errs, check.compile(&validating.AuditAnnotationCondition{ValueExpression: expr}, decls, ap.Child("valueExpression"))...)
		}
	}
	return errs
}

// validateMutatingPolicy is Kubernetes' validateMutatingAdmissionPolicySpec (old nil on
// create) without object meta.
func validateMutatingPolicy(cel *celCompiler, pol, old *admissionregistrationv1.MutatingAdmissionPolicy) field.ErrorList {
	p := field.NewPath("spec")
	var stored []string
	if old != nil {
		for _, m := range old.Spec.Mutations {
			if m.ApplyConfiguration != nil {
				stored = append(stored, m.ApplyConfiguration.Expression)
			}
			if m.JSONPatch != nil {
				stored = append(stored, m.JSONPatch.Expression)
			}
		}
	}
	check, errs := validateCommon(cel, mutatingCommon(pol), mutatingCommon(old), storedExpressions(mutatingCommon(old), stored...), p)
	if check == nil {
		return errs
	}
	spec := &pol.Spec
	if len(spec.Mutations) == 0 {
		errs = append(errs, field.Required(p.Child("mutations"), "mutations must contain at least one item"))
	}
	decls := plugincel.OptionalVariableDeclarations{HasParams: check.hasParams, HasAuthorizer: true, HasPatchTypes: true}
	for i, m := range spec.Mutations {
		mp := p.Child("mutations").Index(i)
		switch m.PatchType {
		case "":
			errs = append(errs, field.Required(mp.Child("patchType"), ""))
		case admissionregistrationv1.PatchTypeJSONPatch:
			if m.JSONPatch == nil {
				errs = append(errs, field.Required(mp.Child("jsonPatch"), "must be specified when patchType is JSONPatch"))
			} else if expr := strings.TrimSpace(m.JSONPatch.Expression); expr == "" {
				errs = append(errs, field.Required(mp.Child("jsonPatch", "expression"), ""))
			} else {
				errs = append(errs, check.compile(&patch.JSONPatchCondition{Expression: expr}, decls, mp.Child("jsonPatch", "expression"))...)
			}
			if m.ApplyConfiguration != nil {
				errs = append(errs, field.Invalid(mp.Child("applyConfiguration"), "{applyConfiguration}", "must not be specified when patchType is JSONPatch"))
			}
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			if m.ApplyConfiguration == nil {
				errs = append(errs, field.Required(mp.Child("applyConfiguration"), "must be specified when patchType is ApplyConfiguration"))
			} else if expr := strings.TrimSpace(m.ApplyConfiguration.Expression); expr == "" {
				errs = append(errs, field.Required(mp.Child("applyConfiguration", "expression"), ""))
			} else {
				errs = append(errs, check.compile(&patch.ApplyConfigurationCondition{Expression: expr}, decls, mp.Child("applyConfiguration", "expression"))...)
			}
			if m.JSONPatch != nil {
				errs = append(errs, field.Invalid(mp.Child("jsonPatch"), "{jsonPatch}", "must not be specified when patchType is ApplyConfiguration"))
			}
		default:
			errs = append(errs, field.NotSupported(mp.Child("patchType"), m.PatchType, sets.List(supportedPatchTypes)))
		}
	}
	if spec.ReinvocationPolicy == "" {
		errs = append(errs, field.Required(p.Child("reinvocationPolicy"), ""))
	} else if !supportedReinvocationPolicies.Has(string(spec.ReinvocationPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), spec.ReinvocationPolicy, sets.List(supportedReinvocationPolicies)))
	}
	return errs
}

// validateParamKind is Kubernetes' check of a paramKind: a group that is a DNS
// subdomain, a version that is a DNS-1035 label and a kind.
func validateParamKind(pk *admissionregistrationv1.ParamKind, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pk.APIVersion == "" {
		errs = append(errs, field.Required(p.Child("apiVersion"), ""))
	} else if strings.Count(pk.APIVersion, "/") > 1 {
		errs = append(errs, field.Invalid(p.Child("apiVersion"), pk.APIVersion, fmt.Sprintf("unexpected GroupVersion string: %v", pk.APIVersion)))
	} else if pk.APIVersion != "/" {
		group, version, ok := strings.Cut(pk.APIVersion, "/")
		if !ok {
			group, version = "", group
		}
		if group != "" {
			if msgs := utilvalidation.IsDNS1123Subdomain(group); len(msgs) > 0 {
				errs = append(errs, field.Invalid(p.Child("apiVersion"), group, strings.Join(msgs, ",")))
			}
		}
		if version == "" {
			errs = append(errs, field.Invalid(p.Child("apiVersion"), pk.APIVersion, "version must be specified"))
		} else if msgs := utilvalidation.IsDNS1035Label(version); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("apiVersion"), version, strings.Join(msgs, ",")))
		}
	}
	if pk.Kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("kind"), pk.Kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	return errs
}

// validateMatchResources is Kubernetes' validateMatchResources (selectors checked
// strictly); a mutating policy's rules may not name DELETE.
func validateMatchResources(m *admissionregistrationv1.MatchResources, mutating bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m == nil {
		return nil
	}
	if m.MatchPolicy == nil {
		errs = append(errs, field.Required(p.Child("matchPolicy"), ""))
	} else if !supportedMatchPolicies.Has(string(*m.MatchPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *m.MatchPolicy, sets.List(supportedMatchPolicies)))
	}
	selectors := []struct {
		name string
		sel  *metav1.LabelSelector
	}{{"namespaceSelector", m.NamespaceSelector}, {"objectSelector", m.ObjectSelector}}
	for _, s := range selectors {
		name, sel := s.name, s.sel
		if sel == nil {
			errs = append(errs, field.Required(p.Child(name), ""))
		} else {
			errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, p.Child(name))...)
		}
	}
	ruleLists := []struct {
		name  string
		rules []admissionregistrationv1.NamedRuleWithOperations
	}{{"resourceRules", m.ResourceRules}, {"excludeResourceRules", m.ExcludeResourceRules}}
	for _, l := range ruleLists {
		name, rules := l.name, l.rules
		for i := range rules {
			rp := p.Child(name).Index(i)
			names := sets.New[string]()
			for j, n := range rules[i].ResourceNames {
				for _, msg := range path.IsValidPathSegmentName(n) {
					errs = append(errs, field.Invalid(rp.Child("resourceNames").Index(j), n, msg))
				}
				if names.Has(n) {
					errs = append(errs, field.Duplicate(rp.Child("resourceNames").Index(j), n))
				}
				names.Insert(n)
			}
			errs = append(errs, validateRuleWithOperations(&rules[i].RuleWithOperations, rp)...)
		}
	}
	if mutating {
		for _, r := range m.ResourceRules {
			for _, op := range r.Operations {
				if !supportedMutatingOperations.Has(string(op)) {
					errs = append(errs, field.NotSupported(p.Child("resourceRules", "operations"), op, sets.List(supportedMutatingOperations)))
				}
			}
		}
	}
	return errs
}

// validateBinding is the part of Kubernetes' validate{Validating,Mutating}AdmissionPolicyBindingSpec
// both kinds share.
func validateBinding(policyName string, pr *admissionregistrationv1.ParamRef, m *admissionregistrationv1.MatchResources, mutating bool) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if policyName == "" {
		errs = append(errs, field.Required(p.Child("policyName"), ""))
	} else {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(policyName) {
			errs = append(errs, field.Invalid(p.Child("policyName"), policyName, msg))
		}
	}
	if pr != nil {
		pp := p.Child("paramRef")
		if pr.Name != "" {
			for _, msg := range path.IsValidPathSegmentName(pr.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), pr.Name, msg))
			}
		}
		if pr.Selector != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(pr.Selector, metav1validation.LabelSelectorValidationOptions{}, pp.Child("selector"))...)
		}
		if pr.Name != "" && pr.Selector != nil {
			errs = append(errs, field.Forbidden(pp.Child("name"), "name and selector are mutually exclusive"),
				field.Forbidden(pp.Child("selector"), "name and selector are mutually exclusive"))
		}
		if pr.Name == "" && pr.Selector == nil {
			errs = append(errs, field.Required(pp, "one of name or selector must be specified"))
		}
		if pr.ParameterNotFoundAction == nil || *pr.ParameterNotFoundAction == "" {
			errs = append(errs, field.Required(pp.Child("parameterNotFoundAction"), ""))
		} else if a := *pr.ParameterNotFoundAction; a != admissionregistrationv1.DenyAction && a != admissionregistrationv1.AllowAction {
			errs = append(errs, field.NotSupported(pp.Child("parameterNotFoundAction"), a, supportedParamNotFoundActions))
		}
	}
	return append(errs, validateMatchResources(m, mutating, p.Child("matchResources"))...)
}

// validateValidatingBinding is Kubernetes' validateValidatingAdmissionPolicyBindingSpec.
func validateValidatingBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	errs := validateBinding(b.Spec.PolicyName, b.Spec.ParamRef, b.Spec.MatchResources, false)
	p := field.NewPath("spec", "validationActions")
	actions := sets.New[string]()
	for i, a := range b.Spec.ValidationActions {
		if !supportedValidationActions.Has(string(a)) {
			errs = append(errs, field.NotSupported(p.Index(i), a, sets.List(supportedValidationActions)))
		}
		if actions.Has(string(a)) {
			errs = append(errs, field.Duplicate(p.Index(i), a))
		}
		actions.Insert(string(a))
	}
	if actions.Has(string(admissionregistrationv1.Deny)) && actions.Has(string(admissionregistrationv1.Warn)) {
		errs = append(errs, field.Invalid(p, b.Spec.ValidationActions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	if len(actions) == 0 {
		errs = append(errs, field.Required(p, "at least one validation action is required"))
	}
	return errs
}

// validateMutatingBinding is Kubernetes' validateMutatingAdmissionPolicyBindingSpec.
func validateMutatingBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) field.ErrorList {
	return validateBinding(b.Spec.PolicyName, b.Spec.ParamRef, b.Spec.MatchResources, true)
}

// validatePolicyStatus is Kubernetes' validateValidatingAdmissionPolicyStatus: each
// type-checking warning names its field and says something.
func validatePolicyStatus(s *admissionregistrationv1.ValidatingAdmissionPolicyStatus, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.TypeChecking == nil {
		return nil
	}
	for i, w := range s.TypeChecking.ExpressionWarnings {
		wp := p.Child("typeChecking", "expressionWarnings").Index(i)
		if w.FieldRef == "" {
			errs = append(errs, field.Required(wp.Child("fieldRef"), ""))
		}
		if w.Warning == "" {
			errs = append(errs, field.Required(wp.Child("warning"), ""))
		}
	}
	return errs
}
