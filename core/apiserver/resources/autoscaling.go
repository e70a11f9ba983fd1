package resources

import (
	"fmt"
	"time"

	"github.com/wasmplane/wasmplane/core/api/hpaconv"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/storage"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// hpaStoragePrefix is where both versions of HorizontalPodAutoscalers are kept (as v2).
var hpaStoragePrefix = builtinPrefix(autoscalingv2.GroupName, "horizontalpodautoscalers")

// AutoscalingV2 returns autoscaling/v2 HorizontalPodAutoscalers (+status), stored, with
// the v2 defaults and the basic checks of Kubernetes' validation (see validateHPA). No
// controller acts on them in wasmplane.
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

// defaultHPA applies autoscaling/v2's defaults: one replica at least, and a CPU target of
// 80% when no metric is given. (The default scaling behavior is not filled in.)
func defaultHPA(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptr.To[int32](1)
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{hpaconv.CPUUtilization(80)}
	}
}

// validateHPA holds Kubernetes' checks of the replica bounds, the scale target and the
// metric types; the contents of each metric source are not checked.
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
	types := []string{string(autoscalingv2.ContainerResourceMetricSourceType), string(autoscalingv2.ExternalMetricSourceType),
		string(autoscalingv2.ObjectMetricSourceType), string(autoscalingv2.PodsMetricSourceType), string(autoscalingv2.ResourceMetricSourceType)}
	for i, m := range h.Spec.Metrics {
		p := spec.Child("metrics").Index(i).Child("type")
		switch m.Type {
		case "":
			errs = append(errs, field.Required(p, "must specify a metric source type"))
		case autoscalingv2.ContainerResourceMetricSourceType, autoscalingv2.ExternalMetricSourceType,
			autoscalingv2.ObjectMetricSourceType, autoscalingv2.PodsMetricSourceType, autoscalingv2.ResourceMetricSourceType:
		default:
			errs = append(errs, field.NotSupported(p, m.Type, types))
		}
	}
	return errs
}

func hpaPrinter(v2 func(runtime.Object) *autoscalingv2.HorizontalPodAutoscaler) *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{endpoints.NameColumn,
			{Name: "Reference", Type: "string", Description: "The scale target."},
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
			return []any{h.Name, h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name, minPods,
				fmt.Sprint(h.Spec.MaxReplicas), fmt.Sprint(h.Status.CurrentReplicas), endpoints.Age(h.CreationTimestamp, time.Now())}
		},
	}
}
