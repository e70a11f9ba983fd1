package plugins

import (
	"context"
	"fmt"
	"strings"

	"github.com/wasmplane/wasmplane/core/admission"
	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ModuleGetter reads WasmModules.
type ModuleGetter interface {
	// GetModule returns the WasmModule of that name; a NotFound error when it is missing.
	GetModule(ctx context.Context, name string) (*wasmv1.WasmModule, error)
}

// UserAuthorizer asks the cluster's authorizer whether user may verb the named object of
// a cluster-scoped resource.
type UserAuthorizer func(ctx context.Context, user admission.UserInfo, verb, group, resource, name string) (bool, error)

// ModuleAccess lets a namespaced WasmPlugin run only a module shared with its namespace:
// one uploaded in it, or one a cluster admin shared with it or with every namespace
// (wasmv1.ModuleNamespacesAnnotation). Without it any tenant could run any other tenant's
// module by its digest. A user who may update the module — a cluster admin, who could
// share it anyway — may pin any module, as RBAC lets a user bind only what it could grant.
type ModuleAccess struct {
	// Modules reads modules.
	Modules ModuleGetter
	// Authorize, when set, lets users who may update a module pin it anywhere.
	Authorize UserAuthorizer
}

// Name implements admission.Validator.
func (*ModuleAccess) Name() string { return "WasmModuleAccess" }

// Validate refuses, with 403, a namespaced plugin pinning a module its namespace may not
// run. An update is checked only when it changes the module.
func (m *ModuleAccess) Validate(ctx context.Context, a *admission.Attributes) error {
	p, ok := pluginOf(a)
	if !ok || p.Spec.Module.Digest == "" {
		return nil
	}
	digest := p.Spec.Module.Digest
	if old, ok := a.OldObject.(*wasmv1.WasmPlugin); ok && old.Spec.Module.Digest == digest {
		return nil
	}
	name := "sha256-" + strings.TrimPrefix(digest, "sha256:")
	mod, err := m.Modules.GetModule(ctx, name)
	switch {
	case err == nil && wasmv1.ModuleSharedWith(mod, a.Namespace):
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return apierrors.NewInternalError(fmt.Errorf("reading module %s: %w", name, err))
	}
	if m.Authorize != nil {
		allowed, err := m.Authorize(ctx, a.User, "update", wasmv1.GroupName, "wasmmodules", name)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("authorizing the use of module %s: %w", name, err))
		}
		if allowed {
			return nil
		}
	}
	// A missing module and another tenant's module read alike, so that a digest's
	// existence does not leak.
	return forbidden(a, fmt.Errorf("module %s is not shared with namespace %s: upload it there (wasmplane plugin push -n %s) or ask a cluster admin to share it",
		digest, a.Namespace, a.Namespace))
}
