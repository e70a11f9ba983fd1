package resources

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/util/shufflesharding"
	"k8s.io/utils/ptr"
)

// Kubernetes' flowcontrol.apiserver.k8s.io/v1 defaults.
const (
	defaultMatchingPrecedence       int32 = 1000
	defaultHandSize                 int32 = 8
	defaultQueues                   int32 = 64
	defaultQueueLengthLimit         int32 = 50
	defaultNominalConcurrencyShares int32 = 30
	// maxQueues bounds a priority level's queues as Kubernetes does (10^7).
	maxQueues int32 = 10_000_000
)

var (
	flowVerbs            = sets.New("get", "list", "create", "update", "delete", "deletecollection", "patch", "watch", "proxy")
	distinguisherMethods = []string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}
	subjectKinds         = []string{string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindUser)}
	priorityLevelTypes   = []string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}
	limitResponseTypes   = []string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}
)

// FlowControl returns flowcontrol.apiserver.k8s.io/v1 FlowSchemas and
// PriorityLevelConfigurations, cluster-scoped with their status, defaulted and validated
// as Kubernetes does (the mandatory "exempt" and "catch-all" objects keep their fixed
// specs). API Priority and Fairness reads them (core/server).
func FlowControl() []Definition {
	gv := flowcontrolv1.SchemeGroupVersion
	fs := stored(gv, "flowschemas", "FlowSchema", nil, false, true,
		func() runtime.Object { return &flowcontrolv1.FlowSchema{} }, func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
		&strategy{
			defaults:      func(obj runtime.Object) { DefaultFlowSchema(obj.(*flowcontrolv1.FlowSchema)) },
			prepareCreate: func(obj runtime.Object) { obj.(*flowcontrolv1.FlowSchema).Status = flowcontrolv1.FlowSchemaStatus{} },
			prepareUpdate: func(obj, old runtime.Object) {
				obj.(*flowcontrolv1.FlowSchema).Status = old.(*flowcontrolv1.FlowSchema).Status
			},
			validate:         func(obj runtime.Object) field.ErrorList { return ValidateFlowSchema(obj.(*flowcontrolv1.FlowSchema)) },
			validateOnUpdate: true,
		}, func(r *registry.Resource) {
			r.StatusStrategy = flowcontrolStatus(func(obj runtime.Object) field.ErrorList {
				return validateConditionTypes(field.NewPath("status", "conditions"), obj.(*flowcontrolv1.FlowSchema).Status.Conditions,
					func(c flowcontrolv1.FlowSchemaCondition) string { return string(c.Type) })
			})
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "PriorityLevel", Type: "string", Description: "name of the priority level this schema puts requests in"},
					{Name: "MatchingPrecedence", Type: "string", Description: "lower values match first"},
					{Name: "DistinguisherMethod", Type: "string", Description: "how flows are told apart"},
					endpoints.AgeColumn,
					{Name: "MissingPL", Type: "string", Description: "whether the priority level is missing (the Dangling condition)"}},
				Row: func(obj runtime.Object) []any {
					f := obj.(*flowcontrolv1.FlowSchema)
					dm := "<none>"
					if f.Spec.DistinguisherMethod != nil {
						dm = string(f.Spec.DistinguisherMethod.Type)
					}
					missing := "?"
					for _, c := range f.Status.Conditions {
						if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
							missing = string(c.Status)
						}
					}
					return []any{f.Name, f.Spec.PriorityLevelConfiguration.Name, fmt.Sprint(f.Spec.MatchingPrecedence), dm,
						endpoints.Age(f.CreationTimestamp, time.Now()), missing}
				},
			}
		})
	pl := stored(gv, "prioritylevelconfigurations", "PriorityLevelConfiguration", nil, false, true,
		func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
		func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
		&strategy{
			defaults: func(obj runtime.Object) {
				DefaultPriorityLevelConfiguration(obj.(*flowcontrolv1.PriorityLevelConfiguration))
			},
			prepareCreate: func(obj runtime.Object) {
				obj.(*flowcontrolv1.PriorityLevelConfiguration).Status = flowcontrolv1.PriorityLevelConfigurationStatus{}
			},
			prepareUpdate: func(obj, old runtime.Object) {
				obj.(*flowcontrolv1.PriorityLevelConfiguration).Status = old.(*flowcontrolv1.PriorityLevelConfiguration).Status
			},
			validate: func(obj runtime.Object) field.ErrorList {
				return ValidatePriorityLevelConfiguration(obj.(*flowcontrolv1.PriorityLevelConfiguration))
			},
			validateOnUpdate: true,
		}, func(r *registry.Resource) {
			r.StatusStrategy = flowcontrolStatus(func(obj runtime.Object) field.ErrorList {
				return validateConditionTypes(field.NewPath("status", "conditions"), obj.(*flowcontrolv1.PriorityLevelConfiguration).Status.Conditions,
					func(c flowcontrolv1.PriorityLevelConfigurationCondition) string { return string(c.Type) })
			})
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "Type", Type: "string", Description: "Exempt or Limited"},
					{Name: "NominalConcurrencyShares", Type: "string", Description: "the level's share of the server's concurrency"},
					{Name: "Queues", Type: "string", Description: "number of queues"},
					{Name: "HandSize", Type: "string", Description: "queues dealt to each flow"},
					{Name: "QueueLengthLimit", Type: "string", Description: "requests a queue may hold"},
					endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					p := obj.(*flowcontrolv1.PriorityLevelConfiguration)
					shares, queues, hand, qlen := "<none>", "<none>", "<none>", "<none>"
					if l := p.Spec.Limited; l != nil {
						shares = fmt.Sprint(ptr.Deref(l.NominalConcurrencyShares, 0))
						if q := l.LimitResponse.Queuing; q != nil {
							queues, hand, qlen = fmt.Sprint(q.Queues), fmt.Sprint(q.HandSize), fmt.Sprint(q.QueueLengthLimit)
						}
					}
					return []any{p.Name, string(p.Spec.Type), shares, queues, hand, qlen, endpoints.Age(p.CreationTimestamp, time.Now())}
				},
			}
		})
	// The status strategies above replace the ones stored() set; the routes follow them.
	fs.Subresources = statusSubFor(fs.Resource.StatusStrategy)
	pl.Subresources = statusSubFor(pl.Resource.StatusStrategy)
	return []Definition{fs, pl}
}

// flowcontrolStatus is the status strategy of both kinds: Kubernetes' flowcontrol status
// strategies keep all of the stored metadata (the config controller's status writes
// must not move labels or annotations) and check the conditions.
func flowcontrolStatus(validate func(runtime.Object) field.ErrorList) registry.Strategy {
	st := statusStrategy(func(obj, old metav1.Object) {
		obj.SetLabels(old.GetLabels())
		obj.SetAnnotations(old.GetAnnotations())
		obj.SetFinalizers(old.GetFinalizers())
		obj.SetOwnerReferences(old.GetOwnerReferences())
	}).(*strategy)
	st.validate, st.validateOnUpdate = validate, true
	return st
}

// statusSubFor serves /status with st.
func statusSubFor(st registry.Strategy) func(*endpoints.Scope) []endpoints.Subresource {
	return func(s *endpoints.Scope) []endpoints.Subresource {
		return []endpoints.Subresource{endpoints.StatusSubresource(s, st)}
	}
}

// DefaultFlowSchema applies Kubernetes' v1 FlowSchema defaults.
func DefaultFlowSchema(fs *flowcontrolv1.FlowSchema) {
	fs.Spec.MatchingPrecedence = cmp.Or(fs.Spec.MatchingPrecedence, defaultMatchingPrecedence)
}

// DefaultPriorityLevelConfiguration applies Kubernetes' v1 PriorityLevelConfiguration
// defaults.
func DefaultPriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) {
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			l.NominalConcurrencyShares = ptr.To(defaultNominalConcurrencyShares)
		}
		if l.LendablePercent == nil {
			l.LendablePercent = ptr.To[int32](0)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			q.HandSize = cmp.Or(q.HandSize, defaultHandSize)
			q.Queues = cmp.Or(q.Queues, defaultQueues)
			q.QueueLengthLimit = cmp.Or(q.QueueLengthLimit, defaultQueueLengthLimit)
		}
	}
	if e := pl.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = ptr.To[int32](0)
		}
		if e.LendablePercent == nil {
			e.LendablePercent = ptr.To[int32](0)
		}
	}
}

// mandatoryFlowSchema returns the defaulted bootstrap object of a mandatory name.
func mandatoryFlowSchema(name string) (*flowcontrolv1.FlowSchema, bool) {
	for _, m := range bootstrap.MandatoryFlowSchemas {
		if m.Name == name {
			c := m.DeepCopy()
			DefaultFlowSchema(c)
			return c, true
		}
	}
	return nil, false
}

func mandatoryPriorityLevel(name string) (*flowcontrolv1.PriorityLevelConfiguration, bool) {
	for _, m := range bootstrap.MandatoryPriorityLevelConfigurations {
		if m.Name == name {
			c := m.DeepCopy()
			DefaultPriorityLevelConfiguration(c)
			return c, true
		}
	}
	return nil, false
}

// ValidateFlowSchema follows Kubernetes' ValidateFlowSchema: precedence in [1, 10000]
// (1 for "exempt" alone), a known distinguisher, a priority level name, and rules with
// subjects and resource or non-resource rules; the mandatory schemas' specs are fixed.
// Metadata is the store's to check.
func ValidateFlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	prec := spec.Child("matchingPrecedence")
	switch mp := fs.Spec.MatchingPrecedence; {
	case mp <= 0:
		errs = append(errs, field.Invalid(prec, mp, "must be a positive value"))
	case mp > flowcontrolv1.FlowSchemaMaxMatchingPrecedence:
		errs = append(errs, field.Invalid(prec, mp, fmt.Sprintf("must not be greater than %v", flowcontrolv1.FlowSchemaMaxMatchingPrecedence)))
	case mp == 1 && fs.Name != flowcontrolv1.FlowSchemaNameExempt:
		errs = append(errs, field.Invalid(prec, mp, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if dm := fs.Spec.DistinguisherMethod; dm != nil && !slices.Contains(distinguisherMethods, string(dm.Type)) {
		errs = append(errs, field.NotSupported(spec.Child("distinguisherMethod", "type"), dm.Type, distinguisherMethods))
	}
	plName := spec.Child("priorityLevelConfiguration", "name")
	if n := fs.Spec.PriorityLevelConfiguration.Name; n == "" {
		errs = append(errs, field.Required(plName, "must reference a priority level"))
	} else {
		errs = append(errs, dnsSubdomain(plName, n)...)
	}
	for i := range fs.Spec.Rules {
		errs = append(errs, validatePolicyRulesWithSubjects(&fs.Spec.Rules[i], spec.Child("rules").Index(i))...)
	}
	if mand, ok := mandatoryFlowSchema(fs.Name); ok && !apiequality.Semantic.DeepEqual(fs.Spec, mand.Spec) {
		errs = append(errs, field.Invalid(spec, fs.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
	}
	return append(errs, validateConditionTypes(field.NewPath("status", "conditions"), fs.Status.Conditions,
		func(c flowcontrolv1.FlowSchemaCondition) string { return string(c.Type) })...)
}

func validatePolicyRulesWithSubjects(r *flowcontrolv1.PolicyRulesWithSubjects, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Subjects) == 0 {
		errs = append(errs, field.Required(p.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range r.Subjects {
		errs = append(errs, validateSubject(&r.Subjects[i], p.Child("subjects").Index(i))...)
	}
	if len(r.ResourceRules) == 0 && len(r.NonResourceRules) == 0 {
		errs = append(errs, field.Required(p, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i := range r.ResourceRules {
		errs = append(errs, validateResourcePolicyRule(&r.ResourceRules[i], p.Child("resourceRules").Index(i))...)
	}
	for i := range r.NonResourceRules {
		errs = append(errs, validateNonResourcePolicyRule(&r.NonResourceRules[i], p.Child("nonResourceRules").Index(i))...)
	}
	return errs
}

// validateSubject checks that exactly the member of the subject's kind is set.
func validateSubject(s *flowcontrolv1.Subject, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbid := func(set bool, member, want string) {
		if set {
			errs = append(errs, field.Forbidden(p.Child(member), fmt.Sprintf("%s is forbidden when subject kind is not '%s'", member, want)))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		sa := p.Child("serviceAccount")
		if s.ServiceAccount == nil {
			errs = append(errs, field.Required(sa, "serviceAccount is required when subject kind is 'ServiceAccount'"))
		} else {
			if s.ServiceAccount.Name == "" {
				errs = append(errs, field.Required(sa.Child("name"), ""))
			} else if s.ServiceAccount.Name != flowcontrolv1.NameAll {
				for _, msg := range apimachineryvalidation.ValidateServiceAccountName(s.ServiceAccount.Name, false) {
					errs = append(errs, field.Invalid(sa.Child("name"), s.ServiceAccount.Name, msg))
				}
			}
			if s.ServiceAccount.Namespace == "" {
				errs = append(errs, field.Required(sa.Child("namespace"), "must specify namespace for service account"))
			} else {
				for _, msg := range apimachineryvalidation.ValidateNamespaceName(s.ServiceAccount.Namespace, false) {
					errs = append(errs, field.Invalid(sa.Child("namespace"), s.ServiceAccount.Namespace, msg))
				}
			}
		}
		forbid(s.User != nil, "user", "User")
		forbid(s.Group != nil, "group", "Group")
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			errs = append(errs, field.Required(p.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			errs = append(errs, field.Required(p.Child("user", "name"), ""))
		}
		forbid(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
		forbid(s.Group != nil, "group", "Group")
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			errs = append(errs, field.Required(p.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			errs = append(errs, field.Required(p.Child("group", "name"), ""))
		}
		forbid(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
		forbid(s.User != nil, "user", "User")
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, subjectKinds))
	}
	return errs
}

// validateFlowVerbs checks a rule's verbs: "*" alone, or known verbs.
func validateFlowVerbs(verbs []string, p *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(p, "verbs must contain at least one value")}
	case slices.Contains(verbs, flowcontrolv1.VerbAll):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(p, verbs, "if '*' is present, must not specify other verbs")}
		}
	case !flowVerbs.HasAll(verbs...):
		return field.ErrorList{field.NotSupported(p, verbs, sets.List(flowVerbs))}
	}
	return nil
}

// wildcardAlone refuses "*" beside other members of a non-empty list.
func wildcardAlone(list []string, p *field.Path, what string) field.ErrorList {
	if len(list) > 1 && slices.Contains(list, "*") {
		return field.ErrorList{field.Invalid(p, list, fmt.Sprintf("if '*' is present, must not specify other %s", what))}
	}
	return nil
}

func validateResourcePolicyRule(r *flowcontrolv1.ResourcePolicyRule, p *field.Path) field.ErrorList {
	errs := validateFlowVerbs(r.Verbs, p.Child("verbs"))
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	errs = append(errs, wildcardAlone(r.APIGroups, p.Child("apiGroups"), "api groups")...)
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	errs = append(errs, wildcardAlone(r.Resources, p.Child("resources"), "resources")...)
	switch {
	case len(r.Namespaces) == 0 && !r.ClusterScope:
		errs = append(errs, field.Required(p.Child("namespaces"), "resource rules that are not cluster scoped must supply at least one namespace"))
	case slices.Contains(r.Namespaces, flowcontrolv1.NamespaceEvery):
		errs = append(errs, wildcardAlone(r.Namespaces, p.Child("namespaces"), "namespaces")...)
	default:
		for i, ns := range r.Namespaces {
			for _, msg := range apimachineryvalidation.ValidateNamespaceName(ns, false) {
				errs = append(errs, field.Invalid(p.Child("namespaces").Index(i), ns, "each member of this list must be '*' or a DNS-1123 label; "+msg))
			}
		}
	}
	return errs
}

func validateNonResourcePolicyRule(r *flowcontrolv1.NonResourcePolicyRule, p *field.Path) field.ErrorList {
	errs := validateFlowVerbs(r.Verbs, p.Child("verbs"))
	urls := p.Child("nonResourceURLs")
	switch {
	case len(r.NonResourceURLs) == 0:
		errs = append(errs, field.Required(urls, "nonResourceURLs must contain at least one value"))
	case slices.Contains(r.NonResourceURLs, flowcontrolv1.NonResourceAll):
		errs = append(errs, wildcardAlone(r.NonResourceURLs, urls, "non-resource URLs")...)
	default:
		for i, u := range r.NonResourceURLs {
			if msg := nonResourceURLProblem(u); msg != "" {
				errs = append(errs, field.Invalid(urls.Index(i), u, msg))
			}
		}
	}
	return errs
}

// nonResourceURLProblem says what is wrong with a non-resource URL of a rule: it starts
// with a slash, has no blanks or double slashes, and a wildcard only as a "/*" suffix.
func nonResourceURLProblem(u string) string {
	switch {
	case u == "":
		return "must not be empty"
	case u == "/":
		return ""
	case !strings.HasPrefix(u, "/"):
		return "must start with slash"
	case strings.Contains(u, " "):
		return "must not contain white-space"
	case strings.Contains(u, "//"):
		return "must not contain double slash"
	}
	if n := strings.Count(u, "*"); n > 1 || (n == 1 && !strings.HasSuffix(u, "/*")) {
		return "wildcard can only do suffix matching"
	}
	return ""
}

// ValidatePriorityLevelConfiguration follows Kubernetes' validation: type Exempt if and
// only if the name is "exempt", the member of the type and no other, non-negative
// shares, percentages in range, and a queuing configuration whose shuffle sharding fits
// in 60 bits. The mandatory levels' specs are fixed, except the exempt level's
// spec.exempt, which administrators may tune.
func ValidatePriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if (pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		errs = append(errs, field.Invalid(spec.Child("type"), pl.Spec.Type, "type must be 'Exempt' if and only if name is 'exempt'"))
	}
	switch pl.Spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if pl.Spec.Limited != nil {
			errs = append(errs, field.Forbidden(spec.Child("limited"), "must be nil if the type is not Limited"))
		}
		if e := pl.Spec.Exempt; e != nil {
			p := spec.Child("exempt")
			errs = append(errs, nonNegative(e.NominalConcurrencyShares, p.Child("nominalConcurrencyShares"))...)
			errs = append(errs, percent(e.LendablePercent, p.Child("lendablePercent"))...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if pl.Spec.Exempt != nil {
			errs = append(errs, field.Forbidden(spec.Child("exempt"), "must be nil if the type is Limited"))
		}
		if pl.Spec.Limited == nil {
			errs = append(errs, field.Required(spec.Child("limited"), "must not be empty when type is Limited"))
		} else {
			errs = append(errs, validateLimited(pl.Spec.Limited, spec.Child("limited"))...)
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), pl.Spec.Type, priorityLevelTypes))
	}
	if mand, ok := mandatoryPriorityLevel(pl.Name); ok {
		have, msg := pl.Spec.DeepCopy(), fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name)
		if pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
			have.Exempt = mand.Spec.Exempt
			msg = fmt.Sprintf("spec of '%s' except the 'spec.exempt' field must equal the fixed value", pl.Name)
		}
		if !apiequality.Semantic.DeepEqual(*have, mand.Spec) {
			errs = append(errs, field.Invalid(spec, pl.Spec, msg))
		}
	}
	return append(errs, validateConditionTypes(field.NewPath("status", "conditions"), pl.Status.Conditions,
		func(c flowcontrolv1.PriorityLevelConfigurationCondition) string { return string(c.Type) })...)
}

func validateLimited(l *flowcontrolv1.LimitedPriorityLevelConfiguration, p *field.Path) field.ErrorList {
	errs := nonNegative(l.NominalConcurrencyShares, p.Child("nominalConcurrencyShares"))
	errs = append(errs, percent(l.LendablePercent, p.Child("lendablePercent"))...)
	if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
		errs = append(errs, field.Invalid(p.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
	}
	lr := p.Child("limitResponse")
	switch l.LimitResponse.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if l.LimitResponse.Queuing != nil {
			errs = append(errs, field.Forbidden(lr.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited"))
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if q := l.LimitResponse.Queuing; q == nil {
			errs = append(errs, field.Required(lr.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited"))
		} else {
			errs = append(errs, validateQueuing(q, lr.Child("queuing"))...)
		}
	default:
		errs = append(errs, field.NotSupported(lr.Child("type"), l.LimitResponse.Type, limitResponseTypes))
	}
	return errs
}

func validateQueuing(q *flowcontrolv1.QueuingConfiguration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		errs = append(errs, field.Invalid(p.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		errs = append(errs, field.Invalid(p.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > maxQueues {
		errs = append(errs, field.Invalid(p.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
	}
	switch {
	case q.HandSize <= 0:
		errs = append(errs, field.Invalid(p.Child("handSize"), q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		errs = append(errs, field.Invalid(p.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	case shufflesharding.RequiredEntropyBits(int(q.Queues), int(q.HandSize)) > shufflesharding.MaxHashBits:
		errs = append(errs, field.Invalid(p.Child("handSize"), q.HandSize,
			fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, shufflesharding.MaxHashBits)))
	}
	return errs
}

func nonNegative(v *int32, p *field.Path) field.ErrorList {
	if v != nil && *v < 0 {
		return field.ErrorList{field.Invalid(p, *v, "must be a non-negative integer")}
	}
	return nil
}

func percent(v *int32, p *field.Path) field.ErrorList {
	if v != nil && (*v < 0 || *v > 100) {
		return field.ErrorList{field.Invalid(p, *v, "must be between 0 and 100, inclusive")}
	}
	return nil
}

// validateConditionTypes refuses empty and repeated condition types.
func validateConditionTypes[C any](p *field.Path, conds []C, typeOf func(C) string) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range conds {
		t := typeOf(c)
		if seen.Has(t) {
			errs = append(errs, field.Duplicate(p.Index(i).Child("type"), t))
		}
		seen.Insert(t)
		if t == "" {
			errs = append(errs, field.Required(p.Index(i).Child("type"), "must not be empty"))
		}
	}
	return errs
}
