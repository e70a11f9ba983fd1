package resources

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/validation"
)

// APIRegistration returns apiregistration.k8s.io/v1 APIServices (+status), stored and
// validated as kube-aggregator does. Which APIServices exist and what their status says
// is kept by the API server (Server.RunAPIServices), as kube-apiserver's autoregister
// and availability controllers do.
func APIRegistration() []Definition {
	d := stored(apiregistrationv1.SchemeGroupVersion, "apiservices", "APIService", nil, false, true,
		func() runtime.Object { return &apiregistrationv1.APIService{} },
		func() runtime.Object { return &apiregistrationv1.APIServiceList{} },
		&strategy{
			defaults: defaultAPIService,
			prepareCreate: func(obj runtime.Object) {
				s := obj.(*apiregistrationv1.APIService)
				s.Status = apiregistrationv1.APIServiceStatus{}
				// A local APIService is available from the start, as kube-aggregator marks it.
				if s.Spec.Service == nil {
					apiregistrationv1helper.SetAPIServiceCondition(s, apiregistrationv1helper.NewLocalAvailableAPIServiceCondition())
				}
			},
			prepareUpdate: func(obj, old runtime.Object) {
				obj.(*apiregistrationv1.APIService).Status = old.(*apiregistrationv1.APIService).Status
			},
			validate: func(obj runtime.Object) field.ErrorList {
				return validateInternal(func(in, _ *apiregistration.APIService) field.ErrorList {
					return validation.ValidateAPIService(context.Background(), in)
				})(obj, obj)
			},
			validateUpdate: validateInternal(func(in, was *apiregistration.APIService) field.ErrorList {
				return validation.ValidateAPIServiceUpdate(context.Background(), in, was)
			}),
		}, func(r *registry.Resource) {
			r.AllowUnconditionalUpdate = false
			// "v1." (the core group) is a valid name: kube-aggregator's validation asks for
			// "<version>.<group>", checked with the spec.
			r.ValidateName = func(name string, _ bool) []string { return path.IsValidPathSegmentName(name) }
			// An APIService has no generation in kube-aggregator.
			r.TracksGeneration = false
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "Service", Type: "string", Description: "The reference to the service that hosts this API endpoint."},
					{Name: "Available", Type: "string", Description: "Whether this service is available."},
					endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					s := obj.(*apiregistrationv1.APIService)
					service := "Local"
					if ref := s.Spec.Service; ref != nil {
						service = ref.Namespace + "/" + ref.Name
					}
					available := "Unknown"
					if c := apiregistrationv1helper.GetAPIServiceConditionByType(s, apiregistrationv1.Available); c != nil {
						available = string(c.Status)
						if c.Status != apiregistrationv1.ConditionTrue {
							available = fmt.Sprintf("%s (%s)", c.Status, c.Reason)
						}
					}
					return []any{s.Name, service, available, endpoints.Age(s.CreationTimestamp, time.Now())}
				},
			}
		})
	d.Resource.StatusStrategy = &strategy{
		prepareUpdate: func(obj, old runtime.Object) {
			s, was := obj.(*apiregistrationv1.APIService), old.(*apiregistrationv1.APIService)
			s.Spec = was.Spec
			s.Labels, s.Annotations = was.Labels, was.Annotations
			s.Finalizers, s.OwnerReferences = was.Finalizers, was.OwnerReferences
		},
		validateUpdate: validateInternal(func(in, was *apiregistration.APIService) field.ErrorList {
			return validation.ValidateAPIServiceStatusUpdate(context.Background(), in, was)
		}),
	}
	return []Definition{d}
}

// defaultAPIService applies apiregistration.k8s.io/v1's defaults: port 443.
func defaultAPIService(obj runtime.Object) {
	if ref := obj.(*apiregistrationv1.APIService).Spec.Service; ref != nil {
		apiregistrationv1.SetDefaults_ServiceReference(ref)
	}
}

// validateInternal runs one of kube-aggregator's validations, which read the internal
// type, on v1 objects.
func validateInternal(fn func(obj, old *apiregistration.APIService) field.ErrorList) func(obj, old runtime.Object) field.ErrorList {
	return func(obj, old runtime.Object) field.ErrorList {
		in, err := internalAPIService(obj)
		if err != nil {
			return field.ErrorList{field.InternalError(nil, err)}
		}
		was, err := internalAPIService(old)
		if err != nil {
			return field.ErrorList{field.InternalError(nil, err)}
		}
		return fn(in, was)
	}
}

// internalAPIService converts to the internal type kube-aggregator's validation reads.
func internalAPIService(obj runtime.Object) (*apiregistration.APIService, error) {
	out := &apiregistration.APIService{}
	if err := apiregistrationv1.Convert_v1_APIService_To_apiregistration_APIService(obj.(*apiregistrationv1.APIService), out, nil); err != nil {
		return nil, fmt.Errorf("converting the APIService: %w", err)
	}
	return out, nil
}
