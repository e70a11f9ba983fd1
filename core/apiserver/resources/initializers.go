package resources

import (
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/api/initializers"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Initializers returns the admissionregistration.k8s.io/v1alpha1 InitializerConfiguration
// resource of the seed.
func Initializers() []Definition {
	return []Definition{{Resource: &registry.Resource{
		AllowUnconditionalUpdate: true, NoInitializers: true, GroupVersion: initializers.SchemeGroupVersion, Name: "initializerconfigurations", SingularName: "initializerconfiguration",
		Kind: "InitializerConfiguration", ListKind: "InitializerConfigurationList",
		NewFunc:     func() runtime.Object { return &initializers.InitializerConfiguration{} },
		NewListFunc: func() runtime.Object { return &initializers.InitializerConfigurationList{} },
		Strategy:    &strategy{validate: validateInitializerConfiguration, validateOnUpdate: true},
		Printer: &registry.Printer{
			Columns: []registry.TableColumn{endpoints.NameColumn, {Name: "Initializers", Type: "string"}, endpoints.AgeColumn},
			Row: func(obj runtime.Object) []any {
				c := obj.(*initializers.InitializerConfiguration)
				names := make([]string, 0, len(c.Initializers))
				for _, in := range c.Initializers {
					names = append(names, in.Name)
				}
				return []any{c.Name, strings.Join(names, ","), endpoints.Age(c.CreationTimestamp, time.Now())}
			},
		},
	}}}
}

func validateInitializerConfiguration(obj runtime.Object) field.ErrorList {
	c := obj.(*initializers.InitializerConfiguration)
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, in := range c.Initializers {
		p := field.NewPath("initializers").Index(i)
		for _, msg := range validation.IsDNS1123Subdomain(in.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), in.Name, msg))
		}
		if strings.Count(in.Name, ".") < 2 {
			errs = append(errs, field.Invalid(p.Child("name"), in.Name, "should be a domain with at least three segments separated by dots"))
		}
		if seen.Has(in.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), in.Name))
		}
		seen.Insert(in.Name)
		for j, r := range in.Rules {
			rp := p.Child("rules").Index(j)
			if len(r.APIGroups) == 0 {
				errs = append(errs, field.Required(rp.Child("apiGroups"), ""))
			}
			if len(r.APIVersions) == 0 {
				errs = append(errs, field.Required(rp.Child("apiVersions"), ""))
			}
			if len(r.Resources) == 0 {
				errs = append(errs, field.Required(rp.Child("resources"), ""))
			}
		}
	}
	return errs
}
