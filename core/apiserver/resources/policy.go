package resources

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Kubernetes' priority constants (pkg/apis/scheduling).
const (
	// HighestUserDefinablePriority is the largest value a user PriorityClass may have.
	HighestUserDefinablePriority = int32(1000000000)
	// SystemCriticalPriority is the value of system-cluster-critical.
	SystemCriticalPriority = 2 * HighestUserDefinablePriority
	// SystemPriorityClassPrefix is reserved for the system classes.
	SystemPriorityClassPrefix = "system-"
)

// SystemPriorityClasses returns the classes every cluster has from its first start.
func SystemPriorityClasses() []*schedulingv1.PriorityClass {
	nc := &schedulingv1.PriorityClass{Value: SystemCriticalPriority + 1000, Description: "Used for system critical pods that must not be moved from their current node."}
	nc.Name = "system-node-critical"
	cc := &schedulingv1.PriorityClass{Value: SystemCriticalPriority, Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."}
	cc.Name = "system-cluster-critical"
	return []*schedulingv1.PriorityClass{nc, cc}
}

// Policy returns PriorityClass (scheduling.k8s.io/v1), LimitRange and ResourceQuota (v1),
// the resources the built-in admission plugins read.
func Policy() []Definition {
	return []Definition{priorityClasses(), limitRanges(), resourceQuotas()}
}

func priorityClasses() Definition {
	return Definition{Resource: &registry.Resource{
		AllowUnconditionalUpdate: true, GroupVersion: schedulingv1.SchemeGroupVersion, Name: "priorityclasses", SingularName: "priorityclass",
		Kind: "PriorityClass", ListKind: "PriorityClassList", ShortNames: []string{"pc"},
		NewFunc:     func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewListFunc: func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		Strategy: &strategy{
			defaults: func(obj runtime.Object) {
				pc := obj.(*schedulingv1.PriorityClass)
				if pc.PreemptionPolicy == nil {
					pc.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
				}
			},
			validate: func(obj runtime.Object) field.ErrorList {
				return validatePriorityClass(obj.(*schedulingv1.PriorityClass))
			},
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				pc, o := obj.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass)
				var errs field.ErrorList
				if pc.Value != o.Value {
					errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
				}
				errs = append(errs, apimachineryvalidation.ValidateImmutableField(pc.PreemptionPolicy, o.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
				return errs
			},
			validateOnUpdate: true,
		},
		DeleteNotAllowed: func(obj runtime.Object) error {
			pc := obj.(*schedulingv1.PriorityClass)
			for _, s := range SystemPriorityClasses() {
				if s.Name == pc.Name {
					return apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), pc.Name, errors.New("this is a system priority class and cannot be deleted"))
				}
			}
			return nil
		},
		Printer: &registry.Printer{
			Columns: []registry.TableColumn{endpoints.NameColumn,
				{Name: "Value", Type: "integer", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["value"]},
				{Name: "Global-Default", Type: "boolean", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["globalDefault"]},
				endpoints.AgeColumn,
				{Name: "PreemptionPolicy", Type: "string", Priority: 1, Description: schedulingv1.PriorityClass{}.SwaggerDoc()["preemptionPolicy"]},
			},
			Row: func(obj runtime.Object) []any {
				pc := obj.(*schedulingv1.PriorityClass)
				policy := ""
				if pc.PreemptionPolicy != nil {
					policy = string(*pc.PreemptionPolicy)
				}
				return []any{pc.Name, int64(pc.Value), pc.GlobalDefault, endpoints.Age(pc.CreationTimestamp, time.Now()), policy}
			},
		},
	}}
}

// validatePriorityClass is Kubernetes' ValidatePriorityClass (object meta is checked by
// the store).
func validatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(pc.Name, SystemPriorityClassPrefix) {
		if err := knownSystemClass(pc); err != nil {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"),
				"priority class names with '"+SystemPriorityClassPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > HighestUserDefinablePriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"), fmt.Sprintf("maximum allowed value of a user defined priority is %v", HighestUserDefinablePriority)))
	}
	if p := pc.PreemptionPolicy; p != nil && *p != corev1.PreemptLowerPriority && *p != corev1.PreemptNever {
		errs = append(errs, field.NotSupported(field.NewPath("preemptionPolicy"), *p, []string{string(corev1.PreemptLowerPriority), string(corev1.PreemptNever)}))
	}
	return errs
}

func knownSystemClass(pc *schedulingv1.PriorityClass) error {
	for _, s := range SystemPriorityClasses() {
		if s.Name != pc.Name {
			continue
		}
		if s.Value != pc.Value {
			return fmt.Errorf("value of %v PriorityClass must be %v", s.Name, s.Value)
		}
		if s.GlobalDefault != pc.GlobalDefault {
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", s.Name, s.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", pc.Name)
}

func limitRanges() Definition {
	d := simple(corev1.SchemeGroupVersion, "limitranges", "limitrange", "LimitRange", []string{"limits"},
		func() runtime.Object { return &corev1.LimitRange{} }, func() runtime.Object { return &corev1.LimitRangeList{} },
		&strategy{
			defaults: func(obj runtime.Object) {
				lr := obj.(*corev1.LimitRange)
				for i := range lr.Spec.Limits {
					defaultLimitRangeItem(&lr.Spec.Limits[i])
				}
			},
			validate:         func(obj runtime.Object) field.ErrorList { return validateLimitRange(obj.(*corev1.LimitRange)) },
			validateOnUpdate: true,
		},
		&registry.Printer{
			Columns: []registry.TableColumn{endpoints.NameColumn, {Name: "Created At", Type: "date", Description: "CreationTimestamp is a timestamp representing the server time when this object was created."}},
			Row: func(obj runtime.Object) []any {
				lr := obj.(*corev1.LimitRange)
				return []any{lr.Name, lr.CreationTimestamp.UTC().Format(time.RFC3339)}
			},
		})
	// Kubernetes' limitrange strategy lets a PUT create one.
	d.Resource.AllowCreateOnUpdate = true
	return d
}

// defaultLimitRangeItem is Kubernetes' SetDefaults_LimitRangeItem: a Container item's
// default limit falls back to max, its default request to the default limit, then to min.
func defaultLimitRangeItem(item *corev1.LimitRangeItem) {
	if item.Type != corev1.LimitTypeContainer {
		return
	}
	if item.Default == nil {
		item.Default = corev1.ResourceList{}
	}
	if item.DefaultRequest == nil {
		item.DefaultRequest = corev1.ResourceList{}
	}
	for k, v := range item.Max {
		if _, ok := item.Default[k]; !ok {
			item.Default[k] = v.DeepCopy()
		}
	}
	for k, v := range item.Default {
		if _, ok := item.DefaultRequest[k]; !ok {
			item.DefaultRequest[k] = v.DeepCopy()
		}
	}
	for k, v := range item.Min {
		if _, ok := item.DefaultRequest[k]; !ok {
			item.DefaultRequest[k] = v.DeepCopy()
		}
	}
}

var standardLimitTypes = sets.New(string(corev1.LimitTypePod), string(corev1.LimitTypeContainer), string(corev1.LimitTypePersistentVolumeClaim))

// validateLimitRange is Kubernetes' ValidateLimitRange.
func validateLimitRange(lr *corev1.LimitRange) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[corev1.LimitType]()
	for i := range lr.Spec.Limits {
		p := field.NewPath("spec", "limits").Index(i)
		item := &lr.Spec.Limits[i]
		typeErrs := field.ErrorList{}
		for _, msg := range validation.IsQualifiedName(string(item.Type)) {
			typeErrs = append(typeErrs, field.Invalid(p.Child("type"), item.Type, msg))
		}
		if len(typeErrs) == 0 && !strings.Contains(string(item.Type), "/") && !standardLimitTypes.Has(string(item.Type)) {
			typeErrs = append(typeErrs, field.Invalid(p.Child("type"), item.Type, "must be a standard limit type or fully qualified"))
		}
		errs = append(errs, typeErrs...)
		if seen.Has(item.Type) {
			errs = append(errs, field.Duplicate(p.Child("type"), item.Type))
		}
		seen.Insert(item.Type)
		keys := sets.New[corev1.ResourceName]()
		check := func(list corev1.ResourceList, child string) {
			for k, q := range list {
				errs = append(errs, validateQuotaResourceValue(k, q, p.Child(child).Key(string(k)), false)...)
				keys.Insert(k)
			}
		}
		check(item.Max, "max")
		check(item.Min, "min")
		if item.Type == corev1.LimitTypePod {
			if len(item.Default) > 0 {
				errs = append(errs, field.Forbidden(p.Child("default"), "may not be specified when `type` is 'Pod'"))
			}
			if len(item.DefaultRequest) > 0 {
				errs = append(errs, field.Forbidden(p.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
			}
		} else {
			check(item.Default, "default")
			check(item.DefaultRequest, "defaultRequest")
		}
		if item.Type == corev1.LimitTypePersistentVolumeClaim {
			_, hasMin := item.Min[corev1.ResourceStorage]
			_, hasMax := item.Max[corev1.ResourceStorage]
			if !hasMin && !hasMax {
				errs = append(errs, field.Required(p.Child("limits"), "either minimum or maximum storage value is required, but neither was provided"))
			}
		}
		check(item.MaxLimitRequestRatio, "maxLimitRequestRatio")
		for _, k := range sets.List(keys) {
			key := string(k)
			minQ, hasMin := item.Min[k]
			maxQ, hasMax := item.Max[k]
			defQ, hasDef := item.Default[k]
			reqQ, hasReq := item.DefaultRequest[k]
			ratio, hasRatio := item.MaxLimitRequestRatio[k]
			if hasMin && hasMax && minQ.Cmp(maxQ) > 0 {
				errs = append(errs, field.Invalid(p.Child("min").Key(key), minQ, fmt.Sprintf("min value %s is greater than max value %s", minQ.String(), maxQ.String())))
			}
			if hasReq && hasMin && minQ.Cmp(reqQ) > 0 {
				errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), reqQ, fmt.Sprintf("min value %s is greater than default request value %s", minQ.String(), reqQ.String())))
			}
			if hasReq && hasMax && reqQ.Cmp(maxQ) > 0 {
				errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), reqQ, fmt.Sprintf("default request value %s is greater than max value %s", reqQ.String(), maxQ.String())))
			}
			if hasReq && hasDef && reqQ.Cmp(defQ) > 0 {
				errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), reqQ, fmt.Sprintf("default request value %s is greater than default limit value %s", reqQ.String(), defQ.String())))
			}
			if hasDef && hasMin && minQ.Cmp(defQ) > 0 {
				errs = append(errs, field.Invalid(p.Child("default").Key(key), minQ, fmt.Sprintf("min value %s is greater than default value %s", minQ.String(), defQ.String())))
			}
			if hasDef && hasMax && defQ.Cmp(maxQ) > 0 {
				errs = append(errs, field.Invalid(p.Child("default").Key(key), maxQ, fmt.Sprintf("default value %s is greater than max value %s", defQ.String(), maxQ.String())))
			}
			if hasRatio && ratio.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0 {
				errs = append(errs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio, fmt.Sprintf("ratio %s is less than 1", ratio.String())))
			}
			if hasRatio && hasMin && hasMax && minQ.Sign() > 0 {
				r, lo, hi := float64(ratio.MilliValue())/1000, float64(minQ.MilliValue()), float64(maxQ.MilliValue())
				if bound := hi / lo; r > bound {
					errs = append(errs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio, fmt.Sprintf("ratio %s is greater than max/min = %f", ratio.String(), bound)))
				}
			}
		}
	}
	return errs
}

// standardQuotaResources are the resource names quota tracks without a "/" (Kubernetes'
// helper.IsStandardQuotaResourceName).
var standardQuotaResources = sets.New[corev1.ResourceName](
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsStorage, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourcePersistentVolumeClaims, corev1.ResourceConfigMaps,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
)

// integerQuotaResources may only hold whole numbers.
var integerQuotaResources = sets.New[corev1.ResourceName](
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
)

// validateQuotaResourceValue checks a resource name (a quota's when quota is set) and its
// quantity as Kubernetes' ValidateResourceQuotaResourceName and ValidateResourceQuantityValue do.
func validateQuotaResourceValue(name corev1.ResourceName, q resource.Quantity, p *field.Path, quota bool) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if len(errs) == 0 && quota && !strings.Contains(string(name), "/") &&
		!standardQuotaResources.Has(name) && !strings.HasPrefix(string(name), "requests."+corev1.ResourceHugePagesPrefix) {
		errs = append(errs, field.Invalid(p, name, "must be a standard resource for quota"))
	}
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
	}
	if (integerQuotaResources.Has(name) || strings.HasPrefix(string(name), "count/")) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(p, q.String(), "must be an integer"))
	}
	return errs
}

var standardQuotaScopes = sets.New(corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
	corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopePriorityClass,
	corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ResourceQuotaScopeVolumeAttributesClass)

func resourceQuotas() Definition {
	d := simple(corev1.SchemeGroupVersion, "resourcequotas", "resourcequota", "ResourceQuota", []string{"quota"},
		func() runtime.Object { return &corev1.ResourceQuota{} }, func() runtime.Object { return &corev1.ResourceQuotaList{} },
		&strategy{
			// Status belongs to the quota controller and the ResourceQuota admission plugin.
			prepareCreate:    func(obj runtime.Object) { obj.(*corev1.ResourceQuota).Status = corev1.ResourceQuotaStatus{} },
			prepareUpdate:    func(obj, old runtime.Object) { obj.(*corev1.ResourceQuota).Status = old.(*corev1.ResourceQuota).Status },
			validate:         func(obj runtime.Object) field.ErrorList { return validateQuotaSpec(&obj.(*corev1.ResourceQuota).Spec) },
			validateOnUpdate: true,
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				q, o := obj.(*corev1.ResourceQuota), old.(*corev1.ResourceQuota)
				if !sets.New(q.Spec.Scopes...).Equal(sets.New(o.Spec.Scopes...)) {
					return field.ErrorList{field.Invalid(field.NewPath("spec", "scopes"), q.Spec.Scopes, "field is immutable")}
				}
				return nil
			},
		}, quotaPrinter())
	d.Resource.StatusStrategy = quotaStatusStrategy()
	d.Subresources = func(s *endpoints.Scope) []endpoints.Subresource {
		return []endpoints.Subresource{endpoints.StatusSubresource(s, quotaStatusStrategy())}
	}
	return d
}

// quotaStatusStrategy lets only status change, and checks it.
func quotaStatusStrategy() registry.Strategy {
	st := statusOnly().(*strategy)
	st.validateUpdate = func(obj, _ runtime.Object) field.ErrorList {
		status := obj.(*corev1.ResourceQuota).Status
		var errs field.ErrorList
		for k, v := range status.Hard {
			errs = append(errs, validateQuotaResourceValue(k, v, field.NewPath("status", "hard").Key(string(k)), true)...)
		}
		for k, v := range status.Used {
			errs = append(errs, validateQuotaResourceValue(k, v, field.NewPath("status", "used").Key(string(k)), true)...)
		}
		return errs
	}
	return st
}

// validateQuotaSpec is Kubernetes' ValidateResourceQuotaSpec (scopes without scope selectors'
// operator rules).
func validateQuotaSpec(spec *corev1.ResourceQuotaSpec) field.ErrorList {
	var errs field.ErrorList
	for k, v := range spec.Hard {
		errs = append(errs, validateQuotaResourceValue(k, v, field.NewPath("spec", "hard").Key(string(k)), true)...)
	}
	scopes := sets.New[corev1.ResourceQuotaScope]()
	for _, sc := range spec.Scopes {
		if !standardQuotaScopes.Has(sc) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "scopes"), spec.Scopes, "unsupported scope"))
		}
		scopes.Insert(sc)
	}
	if scopes.HasAll(corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort) ||
		scopes.HasAll(corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "scopes"), spec.Scopes, "conflicting scopes"))
	}
	if spec.ScopeSelector != nil {
		for i, req := range spec.ScopeSelector.MatchExpressions {
			p := field.NewPath("spec", "scopeSelector", "matchExpressions").Index(i)
			if !standardQuotaScopes.Has(req.ScopeName) {
				errs = append(errs, field.Invalid(p.Child("scopeName"), req.ScopeName, "unsupported scope"))
			}
			switch req.Operator {
			case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
				if len(req.Values) == 0 {
					errs = append(errs, field.Required(p.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
				}
			case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
				if len(req.Values) != 0 {
					errs = append(errs, field.Invalid(p.Child("values"), req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
				}
			default:
				errs = append(errs, field.Invalid(p.Child("operator"), req.Operator, "not a valid selector operator"))
			}
		}
	}
	return errs
}

// quotaPrinter renders `kubectl get quota`: NAME AGE REQUEST LIMIT, the cells as
// kube-apiserver fills them ("pods: 1/10, requests.cpu: 0/2").
func quotaPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{endpoints.NameColumn, endpoints.AgeColumn,
			{Name: "Request", Type: "string", Description: "Request represents a minimum amount of cpu/memory that a container may consume."},
			{Name: "Limit", Type: "string", Description: "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."},
		},
		Row: func(obj runtime.Object) []any {
			q := obj.(*corev1.ResourceQuota)
			names := make([]string, 0, len(q.Status.Hard))
			for k := range q.Status.Hard {
				names = append(names, string(k))
			}
			sort.Strings(names)
			var req, lim bytes.Buffer
			for _, n := range names {
				w := &req
				if strings.HasPrefix(n, "limits.") {
					w = &lim
				}
				used, hard := q.Status.Used[corev1.ResourceName(n)], q.Status.Hard[corev1.ResourceName(n)]
				fmt.Fprintf(w, "%s: %s/%s, ", n, used.String(), hard.String())
			}
			return []any{q.Name, endpoints.Age(q.CreationTimestamp, time.Now()),
				strings.TrimSuffix(req.String(), ", "), strings.TrimSuffix(lim.String(), ", ")}
		},
	}
}
