package resources

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/api/hpaconv"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/storage"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// hpaStoragePrefix is where both versions of HorizontalPodAutoscalers are kept (as v2).
var hpaStoragePrefix = builtinPrefix(autoscalingv2.GroupName, "horizontalpodautoscalers")

// AutoscalingV2 returns autoscaling/v2 HorizontalPodAutoscalers (+status), stored, with
// the v2 defaults and Kubernetes' validation (see validateHPA); core/controller/podautoscaler
// acts on them.
func AutoscalingV2() []Definition {
	d := stored(autoscalingv2.SchemeGroupVersion, "horizontalpodautoscalers", "HorizontalPodAutoscaler", []string{"hpa"}, true, true,
		func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} },
		&strategy{
			defaults: func(obj runtime.Object) { defaultHPA(obj.(*autoscalingv2.HorizontalPodAutoscaler)) },
			validate: func(obj runtime.Object) field.ErrorList {
				return validateHPA(obj.(*autoscalingv2.HorizontalPodAutoscaler))
			},
			validateOnUpdate: true,
		}, func(r *registry.Resource) {
			r.Categories = []string{"all"}
			r.StoragePrefix = hpaStoragePrefix
			r.Printer = hpaPrinter(func(obj runtime.Object) *autoscalingv2.HorizontalPodAutoscaler {
				return obj.(*autoscalingv2.HorizontalPodAutoscaler)
			})
		})
	return []Definition{d}
}

// AutoscalingV1 returns autoscaling/v1 HorizontalPodAutoscalers served from v2's storage
// v2 (the store of AutoscalingV2's resource), converted both ways as Kubernetes converts
// them: v1's targetCPUUtilizationPercentage is v2's CPU utilization metric.
func AutoscalingV1(v2 storage.Interface) []Definition {
	d := stored(autoscalingv1.SchemeGroupVersion, "horizontalpodautoscalers", "HorizontalPodAutoscaler", []string{"hpa"}, true, true,
		func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscaler{} },
		func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscalerList{} },
		&strategy{
			defaults: func(obj runtime.Object) {
				h := obj.(*autoscalingv1.HorizontalPodAutoscaler)
				if h.Spec.MinReplicas == nil {
					h.Spec.MinReplicas = ptr.To[int32](1)
				}
			},
			validate: func(obj runtime.Object) field.ErrorList {
				v2, err := hpaconv.ToV2(obj.(*autoscalingv1.HorizontalPodAutoscaler))
				if err != nil {
					return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key(hpaconv.Annotation), "", err.Error())}
				}
				return validateHPA(v2)
			},
			validateOnUpdate: true,
		}, func(r *registry.Resource) {
			r.Categories = []string{"all"}
			r.StoragePrefix = hpaStoragePrefix
			r.Printer = hpaPrinter(func(obj runtime.Object) *autoscalingv2.HorizontalPodAutoscaler {
				h, err := hpaconv.ToV2(obj.(*autoscalingv1.HorizontalPodAutoscaler))
				if err != nil {
					return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: obj.(*autoscalingv1.HorizontalPodAutoscaler).ObjectMeta}
				}
				return h
			})
		})
	d.Storage = &hpaV1Storage{inner: v2}
	return []Definition{d}
}

// defaultHPA applies autoscaling/v2's defaults: one replica at least, a CPU target of
// 80% when no metric is given, and the unset fields of a given behavior.
func defaultHPA(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptr.To[int32](1)
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{hpaconv.CPUUtilization(80)}
	}
	hpaconv.DefaultBehavior(h.Spec.Behavior)
}

// Kubernetes' bounds of scaling rules.
const (
	maxStabilizationWindowSeconds = 3600
	maxPolicyPeriodSeconds        = 1800
)

// validateHPA holds Kubernetes' checks of the replica bounds (minReplicas 0 needs the
// HPAScaleToZero alpha gate, which wasmplane does not have), the scale target, each
// metric source and the behavior's scaling rules.
func validateHPA(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	ref := spec.Child("scaleTargetRef")
	if h.Spec.ScaleTargetRef.Kind == "" {
		errs = append(errs, field.Required(ref.Child("kind"), ""))
	}
	if h.Spec.ScaleTargetRef.Name == "" {
		errs = append(errs, field.Required(ref.Child("name"), ""))
	}
	minReplicas := int32(1)
	if h.Spec.MinReplicas != nil {
		minReplicas = *h.Spec.MinReplicas
		if minReplicas < 1 {
			errs = append(errs, field.Invalid(spec.Child("minReplicas"), minReplicas, "must be greater than or equal to 1"))
		}
	}
	if h.Spec.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(spec.Child("maxReplicas"), h.Spec.MaxReplicas, "must be greater than 0"))
	} else if h.Spec.MaxReplicas < minReplicas {
		errs = append(errs, field.Invalid(spec.Child("maxReplicas"), h.Spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	for i, m := range h.Spec.Metrics {
		errs = append(errs, validateMetricSpec(m, spec.Child("metrics").Index(i))...)
	}
	if b := h.Spec.Behavior; b != nil {
		p := spec.Child("behavior")
		errs = append(errs, validateScalingRules(b.ScaleUp, p.Child("scaleUp"))...)
		errs = append(errs, validateScalingRules(b.ScaleDown, p.Child("scaleDown"))...)
	}
	return errs
}

var metricSourceTypes = []string{string(autoscalingv2.ContainerResourceMetricSourceType), string(autoscalingv2.ExternalMetricSourceType),
	string(autoscalingv2.ObjectMetricSourceType), string(autoscalingv2.PodsMetricSourceType), string(autoscalingv2.ResourceMetricSourceType)}

// validateMetricSpec checks that the source the type names, and only it, is given and
// well formed.
func validateMetricSpec(m autoscalingv2.MetricSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric source type"))
	} else if !slices.Contains(metricSourceTypes, string(m.Type)) {
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, metricSourceTypes))
	}
	present := map[string]bool{"object": m.Object != nil, "pods": m.Pods != nil, "resource": m.Resource != nil,
		"containerResource": m.ContainerResource != nil, "external": m.External != nil}
	var expected string
	switch m.Type {
	case autoscalingv2.ObjectMetricSourceType:
		expected = "object"
		if m.Object != nil {
			errs = append(errs, validateObjectSource(m.Object, p.Child(expected))...)
		}
	case autoscalingv2.PodsMetricSourceType:
		expected = "pods"
		if m.Pods != nil {
			pp := p.Child(expected)
			errs = append(errs, validateMetricIdentifier(m.Pods.Metric, pp.Child("metric"))...)
			errs = append(errs, validateMetricTarget(m.Pods.Target, pp.Child("target"))...)
			if m.Pods.Target.AverageValue == nil {
				errs = append(errs, field.Required(pp.Child("target", "averageValue"), "must specify a positive target averageValue"))
			}
		}
	case autoscalingv2.ResourceMetricSourceType:
		expected = "resource"
		if m.Resource != nil {
			errs = append(errs, validateResourceTarget(m.Resource.Name, m.Resource.Target, p.Child(expected))...)
		}
	case autoscalingv2.ContainerResourceMetricSourceType:
		expected = "containerResource"
		if cr := m.ContainerResource; cr != nil {
			cp := p.Child(expected)
			errs = append(errs, validateResourceTarget(cr.Name, cr.Target, cp)...)
			if cr.Container == "" {
				errs = append(errs, field.Required(cp.Child("container"), "must populate container name"))
			} else {
				for _, msg := range validation.IsDNS1123Label(cr.Container) {
					errs = append(errs, field.Invalid(cp.Child("container"), cr.Container, msg))
				}
			}
		}
	case autoscalingv2.ExternalMetricSourceType:
		expected = "external"
		if e := m.External; e != nil {
			ep := p.Child(expected)
			errs = append(errs, validateMetricIdentifier(e.Metric, ep.Child("metric"))...)
			errs = append(errs, validateMetricTarget(e.Target, ep.Child("target"))...)
			if e.Target.Value == nil && e.Target.AverageValue == nil {
				errs = append(errs, field.Required(ep.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
			}
			if e.Target.Value != nil && e.Target.AverageValue != nil {
				errs = append(errs, field.Forbidden(ep.Child("target", "value"), "may not set both a target value for metric and a per-pod target"))
			}
		}
	}
	if expected != "" && !present[expected] {
		errs = append(errs, field.Required(p.Child(expected), "must populate information for the given metric source"))
	}
	for _, name := range []string{"object", "pods", "resource", "containerResource", "external"} {
		if present[name] && name != expected && expected != "" {
			errs = append(errs, field.Forbidden(p.Child(name), "must populate the given metric source only"))
		}
	}
	return errs
}

func validateObjectSource(o *autoscalingv2.ObjectMetricSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if o.DescribedObject.Kind == "" {
		errs = append(errs, field.Required(p.Child("describedObject", "kind"), ""))
	}
	if o.DescribedObject.Name == "" {
		errs = append(errs, field.Required(p.Child("describedObject", "name"), ""))
	}
	errs = append(errs, validateMetricIdentifier(o.Metric, p.Child("metric"))...)
	errs = append(errs, validateMetricTarget(o.Target, p.Child("target"))...)
	if o.Target.Value == nil && o.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value or averageValue"))
	}
	return errs
}

func validateMetricIdentifier(id autoscalingv2.MetricIdentifier, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if id.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a metric name"))
	}
	if id.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(id.Selector); err != nil {
			errs = append(errs, field.Invalid(p.Child("selector"), id.Selector, err.Error()))
		}
	}
	return errs
}

// validateResourceTarget checks a Resource or ContainerResource source: a resource
// name and exactly one of a utilization and an average value.
func validateResourceTarget(name corev1.ResourceName, t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	}
	errs = append(errs, validateMetricTarget(t, p.Child("target"))...)
	if t.AverageUtilization == nil && t.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("target", "averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return errs
}

func validateMetricTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch t.Type {
	case "":
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric target type"))
	case autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType:
	default:
		errs = append(errs, field.Invalid(p.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("value"), t.Value.String(), "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("averageValue"), t.AverageValue.String(), "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(p.Child("averageUtilization"), *t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

var (
	selectPolicies = []string{string(autoscalingv2.MaxChangePolicySelect), string(autoscalingv2.MinChangePolicySelect), string(autoscalingv2.DisabledPolicySelect)}
	policyTypes    = []string{string(autoscalingv2.PodsScalingPolicy), string(autoscalingv2.PercentScalingPolicy)}
)

// validateScalingRules checks one direction of a (defaulted) behavior.
func validateScalingRules(r *autoscalingv2.HPAScalingRules, p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil {
		if *w < 0 {
			errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w, "must be greater than or equal to zero"))
		} else if *w > maxStabilizationWindowSeconds {
			errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w, fmt.Sprintf("must be less than or equal to %d", maxStabilizationWindowSeconds)))
		}
	}
	if r.SelectPolicy != nil && !slices.Contains(selectPolicies, string(*r.SelectPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("selectPolicy"), *r.SelectPolicy, selectPolicies))
	}
	pp := p.Child("policies")
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(pp, "must specify at least one Policy"))
	}
	for i, pol := range r.Policies {
		ip := pp.Index(i)
		if !slices.Contains(policyTypes, string(pol.Type)) {
			errs = append(errs, field.NotSupported(ip.Child("type"), pol.Type, policyTypes))
		}
		if pol.Value <= 0 {
			errs = append(errs, field.Invalid(ip.Child("value"), pol.Value, "must be greater than zero"))
		}
		if pol.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), pol.PeriodSeconds, "must be greater than zero"))
		} else if pol.PeriodSeconds > maxPolicyPeriodSeconds {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), pol.PeriodSeconds, fmt.Sprintf("must be less than or equal to %d", maxPolicyPeriodSeconds)))
		}
	}
	if r.Tolerance != nil && r.Tolerance.Sign() < 0 {
		errs = append(errs, field.Invalid(p.Child("tolerance"), r.Tolerance.String(), "must be greater or equal to zero"))
	}
	return errs
}

func hpaPrinter(v2 func(runtime.Object) *autoscalingv2.HorizontalPodAutoscaler) *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{endpoints.NameColumn,
			{Name: "Reference", Type: "string", Description: "The scale target."},
			{Name: "Targets", Type: "string", Description: "Each metric's current value and target (the first two)."},
			{Name: "MinPods", Type: "string", Description: "The lower limit of replicas."},
			{Name: "MaxPods", Type: "string", Description: "The upper limit of replicas."},
			{Name: "Replicas", Type: "string", Description: "The current number of replicas."},
			endpoints.AgeColumn},
		Row: func(obj runtime.Object) []any {
			h := v2(obj)
			minPods := "<unset>"
			if h.Spec.MinReplicas != nil {
				minPods = fmt.Sprint(*h.Spec.MinReplicas)
			}
			return []any{h.Name, h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name, hpaTargets(h.Spec.Metrics, h.Status.CurrentMetrics), minPods,
				fmt.Sprint(h.Spec.MaxReplicas), fmt.Sprint(h.Status.CurrentReplicas), endpoints.Age(h.CreationTimestamp, time.Now())}
		},
	}
}

// hpaTargets is kubectl's TARGETS column as Kubernetes' printer writes it: "current/target"
// per metric ("cpu: 40%/80%", "<unknown>" before the controller measured), the first two
// and a count of the rest.
func hpaTargets(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	status := func(i int) *autoscalingv2.MetricStatus {
		if i < len(statuses) {
			return &statuses[i]
		}
		return nil
	}
	var list []string
	for i, m := range specs {
		st := status(i)
		cur := "<unknown>"
		switch {
		case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
			list = append(list, valueOrAverage(m.External.Target, st != nil && st.External != nil, func() autoscalingv2.MetricValueStatus { return st.External.Current }))
		case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
			list = append(list, valueOrAverage(m.Object.Target, st != nil && st.Object != nil, func() autoscalingv2.MetricValueStatus { return st.Object.Current }))
		case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
			if st != nil && st.Pods != nil && st.Pods.Current.AverageValue != nil {
				cur = st.Pods.Current.AverageValue.String()
			}
			list = append(list, fmt.Sprintf("%s/%s", cur, m.Pods.Target.AverageValue.String()))
		case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
			var c *autoscalingv2.MetricValueStatus
			if st != nil && st.Resource != nil {
				c = &st.Resource.Current
			}
			list = append(list, string(m.Resource.Name)+": "+resourceTarget(m.Resource.Target, c))
		case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
			var c *autoscalingv2.MetricValueStatus
			if st != nil && st.ContainerResource != nil {
				c = &st.ContainerResource.Current
			}
			list = append(list, string(m.ContainerResource.Name)+": "+resourceTarget(m.ContainerResource.Target, c))
		default:
			list = append(list, "<unknown type>")
		}
	}
	if len(list) > 2 {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:2], ", "), len(list)-2)
	}
	return strings.Join(list, ", ")
}

// valueOrAverage prints an Object or External metric: its per-pod average "(avg)" if
// targeted, else its value.
func valueOrAverage(t autoscalingv2.MetricTarget, measured bool, current func() autoscalingv2.MetricValueStatus) string {
	cur := "<unknown>"
	if t.AverageValue != nil {
		if measured && current().AverageValue != nil {
			cur = current().AverageValue.String()
		}
		return fmt.Sprintf("%s/%s (avg)", cur, t.AverageValue.String())
	}
	if measured && current().Value != nil {
		cur = current().Value.String()
	}
	return fmt.Sprintf("%s/%s", cur, t.Value.String())
}

// resourceTarget prints a Resource or ContainerResource metric against its average value
// or utilization target.
func resourceTarget(t autoscalingv2.MetricTarget, current *autoscalingv2.MetricValueStatus) string {
	cur := "<unknown>"
	if t.AverageValue != nil {
		if current != nil && current.AverageValue != nil {
			cur = current.AverageValue.String()
		}
		return cur + "/" + t.AverageValue.String()
	}
	if current != nil && current.AverageUtilization != nil {
		cur = fmt.Sprintf("%d%%", *current.AverageUtilization)
	}
	target := "<auto>"
	if t.AverageUtilization != nil {
		target = fmt.Sprintf("%d%%", *t.AverageUtilization)
	}
	return cur + "/" + target
}
