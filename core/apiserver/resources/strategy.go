// Package resources defines every resource wasmplane serves: its defaults, validation,
// status and other subresources, field selectors and Table columns.
package resources

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// strategy assembles a registry.Strategy from optional functions.
type strategy struct {
	defaults         func(obj runtime.Object)
	prepareCreate    func(obj runtime.Object)
	prepareUpdate    func(obj, old runtime.Object)
	validate         func(obj runtime.Object) field.ErrorList
	validateCreate   func(obj runtime.Object) field.ErrorList // on create only, after validate
	validateUpdate   func(obj, old runtime.Object) field.ErrorList
	validateOnUpdate bool // run validate as well as validateUpdate on updates
}

func (s *strategy) Default(obj runtime.Object) {
	if s.defaults != nil {
		s.defaults(obj)
	}
}

func (s *strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if s.prepareCreate != nil {
		s.prepareCreate(obj)
	}
}

func (s *strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	if s.prepareUpdate != nil {
		s.prepareUpdate(obj, old)
	}
}

func (s *strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	var errs field.ErrorList
	if s.validate != nil {
		errs = s.validate(obj)
	}
	if s.validateCreate != nil {
		errs = append(errs, s.validateCreate(obj)...)
	}
	return errs
}

func (s *strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	var errs field.ErrorList
	if s.validate != nil && s.validateOnUpdate {
		errs = append(errs, s.validate(obj)...)
	}
	if s.validateUpdate != nil {
		errs = append(errs, s.validateUpdate(obj, old)...)
	}
	return errs
}
