package resources

import (
	"fmt"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// StorageMigration returns storagemigration.k8s.io/v1 StorageVersionMigrations, the
// requests to rewrite every stored object of a resource in the current storage version,
// with their status subresource. They are stored and validated as Kubernetes does; no
// wasmplane controller migrates anything yet (wasmplane stores one version per
// built-in resource), so a migration's status is whatever its writers set.
func StorageMigration() []Definition {
	d := stored(storagemigrationv1.SchemeGroupVersion, "storageversionmigrations", "StorageVersionMigration", nil, false, false,
		func() runtime.Object { return &storagemigrationv1.StorageVersionMigration{} },
		func() runtime.Object { return &storagemigrationv1.StorageVersionMigrationList{} },
		&strategy{
			prepareCreate: func(obj runtime.Object) {
				obj.(*storagemigrationv1.StorageVersionMigration).Status = storagemigrationv1.StorageVersionMigrationStatus{}
			},
			prepareUpdate: func(obj, old runtime.Object) {
				obj.(*storagemigrationv1.StorageVersionMigration).Status = old.(*storagemigrationv1.StorageVersionMigration).Status
			},
			validate: func(obj runtime.Object) field.ErrorList {
				if obj.(*storagemigrationv1.StorageVersionMigration).Spec.Resource.Resource == "" {
					return field.ErrorList{field.Required(field.NewPath("spec", "resource", "resource"), "resource is required")}
				}
				return nil
			},
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return apimachineryvalidation.ValidateImmutableField(obj.(*storagemigrationv1.StorageVersionMigration).Spec,
					old.(*storagemigrationv1.StorageVersionMigration).Spec, field.NewPath("spec"))
			},
		},
		func(r *registry.Resource) {
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "Resource", Type: "string", Description: storagemigrationv1.StorageVersionMigrationSpec{}.SwaggerDoc()["resource"]},
					endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					m := obj.(*storagemigrationv1.StorageVersionMigration)
					gr := m.Spec.Resource.Resource
					if m.Spec.Resource.Group != "" {
						gr += "." + m.Spec.Resource.Group
					}
					return []any{m.Name, gr, endpoints.Age(m.CreationTimestamp, time.Now())}
				},
			}
		})
	status := &strategy{
		prepareUpdate: func(obj, old runtime.Object) {
			obj.(*storagemigrationv1.StorageVersionMigration).Spec = old.(*storagemigrationv1.StorageVersionMigration).Spec
		},
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateMigrationStatus(&obj.(*storagemigrationv1.StorageVersionMigration).Status, &old.(*storagemigrationv1.StorageVersionMigration).Status)
		},
	}
	d.Resource.StatusStrategy = status
	d.Subresources = func(s *endpoints.Scope) []endpoints.Subresource {
		return []endpoints.Subresource{endpoints.StatusSubresource(s, status)}
	}
	return []Definition{d}
}

// validateMigrationStatus follows Kubernetes' status rules: valid conditions; a migration
// is not Running and finished (Succeeded or Failed) at once, nor both finished; a finished
// migration stays so; the resourceVersion it migrates up to does not change once set.
func validateMigrationStatus(st, old *storagemigrationv1.StorageVersionMigrationStatus) field.ErrorList {
	cp := field.NewPath("status", "conditions")
	errs := metav1validation.ValidateConditions(st.Conditions, cp)
	isTrue := func(conds []metav1.Condition, t storagemigrationv1.MigrationConditionType) bool {
		return meta.IsStatusConditionTrue(conds, string(t))
	}
	running, succeeded, failed := storagemigrationv1.MigrationRunning, storagemigrationv1.MigrationSucceeded, storagemigrationv1.MigrationFailed
	if isTrue(st.Conditions, running) && (isTrue(st.Conditions, succeeded) || isTrue(st.Conditions, failed)) {
		errs = append(errs, field.Invalid(cp, string(running), "a migration cannot be Running and Succeeded or Failed at the same time"))
	}
	if isTrue(st.Conditions, succeeded) && isTrue(st.Conditions, failed) {
		errs = append(errs, field.Invalid(cp, string(succeeded), "a migration cannot both succeed and fail"))
	}
	for _, t := range []storagemigrationv1.MigrationConditionType{succeeded, failed} {
		if isTrue(old.Conditions, t) && !isTrue(st.Conditions, t) {
			errs = append(errs, field.Invalid(cp, string(t), fmt.Sprintf("the %s condition of a finished migration cannot be removed or changed", t)))
		}
	}
	if old.ResourceVersion != "" && st.ResourceVersion != old.ResourceVersion {
		errs = append(errs, field.Invalid(field.NewPath("status", "resourceVersion"), st.ResourceVersion, "field is immutable once set"))
	}
	return errs
}
