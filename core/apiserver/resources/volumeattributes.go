package resources

import (
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The bounds of a class's parameters, as Kubernetes sets them for storage classes.
const (
	maxClassParameters     = 512
	maxClassParametersSize = 256 * 1024
)

// VolumeAttributes returns storage.k8s.io/v1 VolumeAttributesClasses: the mutable
// attributes (IOPS, throughput…) a CSI driver applies to a claim's volume. A class's
// driver and parameters never change once created, as in Kubernetes: a claim that names
// the class must keep meaning the same attributes.
func VolumeAttributes() []Definition {
	return []Definition{stored(storagev1.SchemeGroupVersion, "volumeattributesclasses", "VolumeAttributesClass", []string{"vac"}, false, false,
		func() runtime.Object { return &storagev1.VolumeAttributesClass{} },
		func() runtime.Object { return &storagev1.VolumeAttributesClassList{} },
		&strategy{
			validate: func(obj runtime.Object) field.ErrorList {
				c := obj.(*storagev1.VolumeAttributesClass)
				return append(csiDriverName(field.NewPath("driverName"), c.DriverName), validateClassParameters(c.Parameters, field.NewPath("parameters"))...)
			},
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				c, o := obj.(*storagev1.VolumeAttributesClass), old.(*storagev1.VolumeAttributesClass)
				var errs field.ErrorList
				if c.DriverName != o.DriverName {
					errs = append(errs, field.Forbidden(field.NewPath("driverName"), "updates to driverName are forbidden."))
				}
				if !apiequality.Semantic.DeepEqual(c.Parameters, o.Parameters) {
					errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
				}
				return errs
			},
		},
		func(r *registry.Resource) {
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "DriverName", Type: "string", Description: storagev1.VolumeAttributesClass{}.SwaggerDoc()["driverName"]},
					endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					c := obj.(*storagev1.VolumeAttributesClass)
					return []any{c.Name, c.DriverName, endpoints.Age(c.CreationTimestamp, time.Now())}
				},
			}
		})}
}

// validateClassParameters requires at least one parameter, non-empty keys, and bounds
// on their number and size.
func validateClassParameters(params map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(params) > maxClassParameters {
		errs = append(errs, field.TooMany(p, len(params), maxClassParameters))
	}
	size := 0
	for k, v := range params {
		if k == "" {
			errs = append(errs, field.Invalid(p, k, "field can not be empty."))
		}
		size += len(k) + len(v)
	}
	if size > maxClassParametersSize {
		errs = append(errs, field.TooLong(p, "", maxClassParametersSize))
	}
	if len(params) == 0 {
		errs = append(errs, field.Required(p, "must contain at least one key/value pair"))
	}
	return errs
}
