// Package apiextensions serves the apiextensions.k8s.io group: CustomResourceDefinitions,
// defaulted, prepared and validated by apiextensions-apiserver's own strategies (which
// work on the internal types; this package converts to and from v1 around them).
package apiextensions

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdstrategy "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// internalStrategy is the part of the library's CRD strategies this package calls.
type internalStrategy interface {
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// Definitions returns the resources of apiextensions.k8s.io/v1.
func Definitions() []resources.Definition {
	typer := runtime.NewScheme()
	main := &strategy{lib: crdstrategy.NewStrategy(typer)}
	status := &strategy{lib: statusOnly{crdstrategy.NewStatusStrategy(typer)}}
	res := &registry.Resource{
		GroupVersion: apiextensionsv1.SchemeGroupVersion, Name: "customresourcedefinitions", SingularName: "customresourcedefinition",
		Kind: "CustomResourceDefinition", ListKind: "CustomResourceDefinitionList", ShortNames: []string{"crd", "crds"},
		Categories:    []string{"api-extensions"},
		StoragePrefix: "/registry/apiextensions.k8s.io/customresourcedefinitions",
		NewFunc:       func() runtime.Object { return &apiextensionsv1.CustomResourceDefinition{} },
		NewListFunc:   func() runtime.Object { return &apiextensionsv1.CustomResourceDefinitionList{} },
		Strategy:      main, StatusStrategy: status,
		// A deleted CRD stays until its objects are gone (the API server's CRD serving
		// deletes them, then removes the finalizer), as in Kubernetes' CRD storage.
		OnDeleteMarked: func(obj runtime.Object) {
			crd := obj.(*apiextensionsv1.CustomResourceDefinition)
			if !apiextensionshelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
				crd.Finalizers = append(crd.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
			}
			apiextensionshelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
				Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionPending",
				Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
			})
		},
		Printer: &registry.Printer{
			Columns: []registry.TableColumn{endpoints.NameColumn, {Name: "Created At", Type: "date", Description: "the time the CustomResourceDefinition was created"}},
			Row: func(obj runtime.Object) []any {
				crd := obj.(*apiextensionsv1.CustomResourceDefinition)
				return []any{crd.Name, crd.CreationTimestamp.UTC().Format(time.RFC3339)}
			},
		},
	}
	return []resources.Definition{{Resource: res, Subresources: func(s *endpoints.Scope) []endpoints.Subresource {
		return []endpoints.Subresource{endpoints.StatusSubresource(s, status)}
	}}}
}

// statusUpdater is the library's status strategy, which serves updates only.
type statusUpdater interface {
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// statusOnly completes a statusUpdater: the status subresource never creates.
type statusOnly struct{ statusUpdater }

func (statusOnly) PrepareForCreate(context.Context, runtime.Object) {}

func (statusOnly) Validate(context.Context, runtime.Object) field.ErrorList { return nil }

// strategy runs an internal-version strategy on v1 objects.
type strategy struct {
	lib internalStrategy
}

func toInternal(obj runtime.Object) *apiextensionsinternal.CustomResourceDefinition {
	out := &apiextensionsinternal.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(obj.(*apiextensionsv1.CustomResourceDefinition), out, nil); err != nil {
		// The conversion fails only on values v1 cannot hold, which decoding has refused.
		panic(fmt.Sprintf("converting a CustomResourceDefinition to the internal version: %v", err))
	}
	return out
}

// fromInternal writes in back into obj.
func fromInternal(in *apiextensionsinternal.CustomResourceDefinition, obj runtime.Object) {
	out := obj.(*apiextensionsv1.CustomResourceDefinition)
	tm := out.TypeMeta
	*out = apiextensionsv1.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_apiextensions_CustomResourceDefinition_To_v1_CustomResourceDefinition(in, out, nil); err != nil {
		panic(fmt.Sprintf("converting a CustomResourceDefinition from the internal version: %v", err))
	}
	out.TypeMeta = tm
}

func (s *strategy) Default(obj runtime.Object) {
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(obj.(*apiextensionsv1.CustomResourceDefinition))
}

func (s *strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	in := toInternal(obj)
	s.lib.PrepareForCreate(ctx, in)
	fromInternal(in, obj)
}

func (s *strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	in := toInternal(obj)
	s.lib.PrepareForUpdate(ctx, in, toInternal(old))
	fromInternal(in, obj)
}

func (s *strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return s.lib.Validate(ctx, toInternal(obj))
}

func (s *strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return s.lib.ValidateUpdate(ctx, toInternal(obj), toInternal(old))
}
