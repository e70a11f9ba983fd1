package resources

import (
	"bytes"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// daemonSetsAndHistory returns apps/v1 daemonsets (+status) and controllerrevisions, the
// history DaemonSets and StatefulSets keep for `kubectl rollout history/undo`.
func daemonSetsAndHistory() []Definition {
	gv := appsv1.SchemeGroupVersion
	ds := stored(gv, "daemonsets", "DaemonSet", []string{"ds"}, true, true,
		func() runtime.Object { return &appsv1.DaemonSet{} }, func() runtime.Object { return &appsv1.DaemonSetList{} }, &strategy{
			defaults:      func(obj runtime.Object) { defaultDaemonSet(obj.(*appsv1.DaemonSet)) },
			prepareCreate: func(obj runtime.Object) { obj.(*appsv1.DaemonSet).Status = appsv1.DaemonSetStatus{} },
			prepareUpdate: func(obj, old runtime.Object) { obj.(*appsv1.DaemonSet).Status = old.(*appsv1.DaemonSet).Status },
			validate:      func(obj runtime.Object) field.ErrorList { return validateDaemonSet(obj.(*appsv1.DaemonSet)) },
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return apimachineryvalidation.ValidateImmutableField(obj.(*appsv1.DaemonSet).Spec.Selector, old.(*appsv1.DaemonSet).Spec.Selector, field.NewPath("spec", "selector"))
			},
			validateOnUpdate: true,
		}, inCategory("all"), func(r *registry.Resource) { r.Printer = daemonSetPrinter() })
	ds.Resource.StatusStrategy = workloadStatusOnly()
	ds.Subresources = func(s *endpoints.Scope) []endpoints.Subresource {
		return []endpoints.Subresource{endpoints.StatusSubresource(s, workloadStatusOnly())}
	}
	cr := stored(gv, "controllerrevisions", "ControllerRevision", nil, true, false,
		func() runtime.Object { return &appsv1.ControllerRevision{} }, func() runtime.Object { return &appsv1.ControllerRevisionList{} }, &strategy{
			validate: func(obj runtime.Object) field.ErrorList {
				r := obj.(*appsv1.ControllerRevision)
				var errs field.ErrorList
				if len(r.Data.Raw) == 0 && r.Data.Object == nil {
					errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
				}
				if r.Revision < 0 {
					errs = append(errs, field.Invalid(field.NewPath("revision"), r.Revision, "must be greater than or equal to 0"))
				}
				return errs
			},
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				if !bytes.Equal(obj.(*appsv1.ControllerRevision).Data.Raw, old.(*appsv1.ControllerRevision).Data.Raw) {
					return field.ErrorList{field.Invalid(field.NewPath("data"), nil, "field is immutable")}
				}
				return nil
			},
			validateOnUpdate: true,
		}, func(r *registry.Resource) { r.Printer = controllerRevisionPrinter() })
	return []Definition{ds, cr}
}

// defaultDaemonSet applies Kubernetes' apps/v1 DaemonSet defaults.
func defaultDaemonSet(ds *appsv1.DaemonSet) {
	if ds.Spec.UpdateStrategy.Type == "" {
		ds.Spec.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if ds.Spec.UpdateStrategy.RollingUpdate == nil {
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable == nil {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}
		if ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge == nil {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	defaultPodSpec(&ds.Spec.Template.Spec)
}

// validateDaemonSet is Kubernetes' ValidateDaemonSetSpec for the fields wasmplane checks.
func validateDaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	p := field.NewPath("spec")
	errs := validateWorkload(nil, ds.Spec.Selector, &ds.Spec.Template, p)
	if ds.Spec.MinReadySeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("minReadySeconds"), ds.Spec.MinReadySeconds, "must be greater than or equal to 0"))
	}
	if l := ds.Spec.RevisionHistoryLimit; l != nil && *l < 0 {
		errs = append(errs, field.Invalid(p.Child("revisionHistoryLimit"), *l, "must be greater than or equal to 0"))
	}
	sp := p.Child("updateStrategy")
	switch ds.Spec.UpdateStrategy.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
	case appsv1.RollingUpdateDaemonSetStrategyType:
		ru := ds.Spec.UpdateStrategy.RollingUpdate
		if ru == nil {
			return append(errs, field.Required(sp.Child("rollingUpdate"), ""))
		}
		rp := sp.Child("rollingUpdate")
		errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, rp.Child("maxUnavailable"))...)
		errs = append(errs, validateIntOrPercent(ru.MaxSurge, rp.Child("maxSurge"))...)
		if isZeroIntOrPercent(ru.MaxUnavailable) && isZeroIntOrPercent(ru.MaxSurge) {
			errs = append(errs, field.Invalid(rp.Child("maxUnavailable"), ru.MaxUnavailable.String(), "may not be 0 when `maxSurge` is 0"))
		}
	default:
		errs = append(errs, field.NotSupported(sp.Child("type"), ds.Spec.UpdateStrategy.Type,
			[]string{string(appsv1.OnDeleteDaemonSetStrategyType), string(appsv1.RollingUpdateDaemonSetStrategyType)}))
	}
	return errs
}

// validateIntOrPercent requires a non-negative integer or a percentage of at most 100%.
func validateIntOrPercent(v *intstr.IntOrString, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return field.ErrorList{field.Invalid(p, v.IntVal, "must be greater than or equal to 0")}
		}
		return nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, 100, false)
	if err != nil || !strings.HasSuffix(v.StrVal, "%") {
		return field.ErrorList{field.Invalid(p, v.StrVal, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")}
	}
	if n < 0 || n > 100 {
		return field.ErrorList{field.Invalid(p, v.StrVal, "must not be greater than 100%")}
	}
	return nil
}

func isZeroIntOrPercent(v *intstr.IntOrString) bool {
	if v == nil {
		return true
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, 100, false)
	return err == nil && n == 0
}

// daemonSetPrinter has kubectl's DaemonSet columns.
func daemonSetPrinter() *registry.Printer {
	st := appsv1.DaemonSetStatus{}.SwaggerDoc()
	return &registry.Printer{
		Columns: append([]registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Desired", Type: "integer", Description: st["desiredNumberScheduled"]},
			{Name: "Current", Type: "integer", Description: st["currentNumberScheduled"]},
			{Name: "Ready", Type: "integer", Description: st["numberReady"]},
			{Name: "Up-to-date", Type: "integer", Description: st["updatedNumberScheduled"]},
			{Name: "Available", Type: "integer", Description: st["numberAvailable"]},
			{Name: "Node Selector", Type: "string", Description: corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]},
			endpoints.AgeColumn,
		}, wideWorkloadColumns...),
		Row: func(obj runtime.Object) []any {
			ds := obj.(*appsv1.DaemonSet)
			c, i := containersAndImages(&ds.Spec.Template.Spec)
			sel := labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector)
			return []any{ds.Name, int64(ds.Status.DesiredNumberScheduled), int64(ds.Status.CurrentNumberScheduled),
				int64(ds.Status.NumberReady), int64(ds.Status.UpdatedNumberScheduled), int64(ds.Status.NumberAvailable),
				sel, endpoints.Age(ds.CreationTimestamp, time.Now()), c, i, selectorString(ds.Spec.Selector)}
		},
	}
}

// controllerRevisionPrinter has kubectl's ControllerRevision columns.
func controllerRevisionPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Controller", Type: "string", Description: "Controller of the object"},
			{Name: "Revision", Type: "integer", Description: appsv1.ControllerRevision{}.SwaggerDoc()["revision"]},
			endpoints.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			r := obj.(*appsv1.ControllerRevision)
			controller := "<none>"
			if ref := metav1.GetControllerOfNoCopy(r); ref != nil {
				// kubectl prints kind.group/name: daemonset.apps/web.
				kind := strings.ToLower(ref.Kind)
				if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.Group != "" {
					kind += "." + gv.Group
				}
				controller = kind + "/" + ref.Name
			}
			return []any{r.Name, controller, r.Revision, endpoints.Age(r.CreationTimestamp, time.Now())}
		},
	}
}
