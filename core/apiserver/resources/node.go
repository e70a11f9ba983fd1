package resources

import (
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	nodev1 "k8s.io/api/node/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NodeAPI returns node.k8s.io/v1 RuntimeClasses. They are stored and validated as
// Kubernetes does; overhead and scheduling are kept for whoever reads them.
func NodeAPI() []Definition {
	return []Definition{stored(nodev1.SchemeGroupVersion, "runtimeclasses", "RuntimeClass", nil, false, false,
		func() runtime.Object { return &nodev1.RuntimeClass{} }, func() runtime.Object { return &nodev1.RuntimeClassList{} },
		&strategy{
			validate: func(obj runtime.Object) field.ErrorList { return validateRuntimeClass(obj.(*nodev1.RuntimeClass)) },
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return apimachineryvalidation.ValidateImmutableField(obj.(*nodev1.RuntimeClass).Handler, old.(*nodev1.RuntimeClass).Handler, field.NewPath("handler"))
			},
			validateOnUpdate: true,
		}, func(r *registry.Resource) {
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "Handler", Type: "string", Description: nodev1.RuntimeClass{}.SwaggerDoc()["handler"]}, endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					c := obj.(*nodev1.RuntimeClass)
					return []any{c.Name, c.Handler, endpoints.Age(c.CreationTimestamp, time.Now())}
				},
			}
		})}
}

// validateRuntimeClass follows Kubernetes' ValidateRuntimeClass: the handler is a DNS
// label, the pod overhead non-negative quantities, and scheduling valid node labels
// and tolerations.
func validateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	var errs field.ErrorList
	if rc.Handler == "" {
		errs = append(errs, field.Required(field.NewPath("handler"), ""))
	} else {
		errs = append(errs, dnsLabel(field.NewPath("handler"), rc.Handler)...)
	}
	if rc.Overhead != nil {
		p := field.NewPath("overhead", "podFixed")
		for name, q := range rc.Overhead.PodFixed {
			errs = append(errs, validateQuotaResourceValue(name, q, p.Key(string(name)), false)...)
		}
	}
	if s := rc.Scheduling; s != nil {
		p := field.NewPath("scheduling")
		errs = append(errs, validateLabelMap(s.NodeSelector, p.Child("nodeSelector"))...)
		errs = append(errs, validateTolerations(s.Tolerations, p.Child("tolerations"))...)
	}
	return errs
}
