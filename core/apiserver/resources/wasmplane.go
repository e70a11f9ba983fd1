package resources

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/storage/blobs"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ContentTypeWasm is the media type of an uploaded module.
const ContentTypeWasm = "application/wasm"

var validHooks = sets.New(wasmv1.HookAuthenticate, wasmv1.HookMutate, wasmv1.HookValidate, wasmv1.HookInitialize, wasmv1.HookFilter, wasmv1.HookScore)

// Wasmplane returns the wasmplane.io/v1alpha1 resources; bs keeps module bytes (nil =
// no module store).
func Wasmplane(bs *blobs.Store) []Definition {
	gv := wasmv1.SchemeGroupVersion
	pluginPrinter := &registry.Printer{
		Columns: []registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Hooks", Type: "string", Description: "The hooks the plugin is used for."},
			{Name: "Phase", Type: "string", Description: "Whether the module is loaded."},
			{Name: "Digest", Type: "string", Priority: 1, Description: "The pinned module digest."},
			endpoints.AgeColumn,
		},
	}
	row := func(m metav1.ObjectMeta, spec *wasmv1.WasmPluginSpec, st *wasmv1.WasmPluginStatus) []any {
		hooks := make([]string, 0, len(spec.Hooks))
		for _, h := range spec.Hooks {
			hooks = append(hooks, string(h))
		}
		phase := st.Phase
		if phase == "" {
			phase = "Pending"
		}
		return []any{m.Name, strings.Join(hooks, ","), phase, shortDigest(spec.SHA256), endpoints.Age(m.CreationTimestamp, time.Now())}
	}
	nsPrinter := *pluginPrinter
	nsPrinter.Row = func(obj runtime.Object) []any {
		p := obj.(*wasmv1.WasmPlugin)
		return row(p.ObjectMeta, &p.Spec, &p.Status)
	}
	clusterPrinter := *pluginPrinter
	clusterPrinter.Row = func(obj runtime.Object) []any {
		p := obj.(*wasmv1.ClusterWasmPlugin)
		return row(p.ObjectMeta, &p.Spec, &p.Status)
	}
	return []Definition{
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "wasmplugins", SingularName: "wasmplugin", Kind: "WasmPlugin", ListKind: "WasmPluginList",
			ShortNames: []string{"wp"}, Namespaced: true, TracksGeneration: true,
			NewFunc:     func() runtime.Object { return &wasmv1.WasmPlugin{} },
			NewListFunc: func() runtime.Object { return &wasmv1.WasmPluginList{} },
			Strategy: &strategy{
				prepareCreate: func(obj runtime.Object) { obj.(*wasmv1.WasmPlugin).Status = wasmv1.WasmPluginStatus{} },
				prepareUpdate: func(obj, old runtime.Object) { obj.(*wasmv1.WasmPlugin).Status = old.(*wasmv1.WasmPlugin).Status },
				validate: func(obj runtime.Object) field.ErrorList {
					return validatePluginSpec(&obj.(*wasmv1.WasmPlugin).Spec, true, field.NewPath("spec"))
				},
				validateOnUpdate: true,
			},
			StatusStrategy: statusOnly(),
			Printer:        &nsPrinter,
		}, Subresources: statusSub},
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "clusterwasmplugins", SingularName: "clusterwasmplugin", Kind: "ClusterWasmPlugin", ListKind: "ClusterWasmPluginList",
			ShortNames: []string{"cwp"}, TracksGeneration: true,
			NewFunc:     func() runtime.Object { return &wasmv1.ClusterWasmPlugin{} },
			NewListFunc: func() runtime.Object { return &wasmv1.ClusterWasmPluginList{} },
			Strategy: &strategy{
				prepareCreate: func(obj runtime.Object) { obj.(*wasmv1.ClusterWasmPlugin).Status = wasmv1.WasmPluginStatus{} },
				prepareUpdate: func(obj, old runtime.Object) {
					obj.(*wasmv1.ClusterWasmPlugin).Status = old.(*wasmv1.ClusterWasmPlugin).Status
				},
				validate: func(obj runtime.Object) field.ErrorList {
					return validatePluginSpec(&obj.(*wasmv1.ClusterWasmPlugin).Spec, false, field.NewPath("spec"))
				},
				validateOnUpdate: true,
			},
			StatusStrategy: statusOnly(),
			Printer:        &clusterPrinter,
		}, Subresources: statusSub},
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "wasmmodules", SingularName: "wasmmodule", Kind: "WasmModule", ListKind: "WasmModuleList",
			NewFunc:     func() runtime.Object { return &wasmv1.WasmModule{} },
			NewListFunc: func() runtime.Object { return &wasmv1.WasmModuleList{} },
			Strategy: &strategy{validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				if obj.(*wasmv1.WasmModule).Spec != old.(*wasmv1.WasmModule).Spec {
					return field.ErrorList{field.Forbidden(field.NewPath("spec"), "a stored module is immutable")}
				}
				return nil
			}},
			Printer: &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn, {Name: "Size", Type: "integer"}, endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					m := obj.(*wasmv1.WasmModule)
					return []any{m.Name, m.Spec.Size, endpoints.Age(m.CreationTimestamp, time.Now())}
				},
			},
		}, CreateHandler: func(s *endpoints.Scope) endpoints.HandlerFunc { return uploadModule(s, bs) },
			Subresources: func(s *endpoints.Scope) []endpoints.Subresource {
				return []endpoints.Subresource{{Name: "blob", Handlers: map[string]endpoints.HandlerFunc{http.MethodGet: downloadModule(s, bs)}}}
			}},
	}
}

func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		return "sha256:" + d[:12]
	}
	return d
}

// ModuleName is the WasmModule object name of a digest.
func ModuleName(digest string) string { return "sha256-" + strings.TrimPrefix(digest, "sha256:") }

// uploadModule stores POSTed module bytes (Content-Type application/wasm) and creates
// the WasmModule object naming them; uploading the same bytes again returns the object.
func uploadModule(s *endpoints.Scope, bs *blobs.Store) endpoints.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		if !strings.HasPrefix(req.Header.Get("Content-Type"), ContentTypeWasm) {
			s.Create(w, req, r)
			return
		}
		code := http.StatusCreated
		s.CustomCode(w, req, func(ctx context.Context, _ func(runtime.Object) error, raw func(int64) ([]byte, error)) (runtime.Object, int, error) {
			if bs == nil {
				return nil, 0, apierrors.NewServiceUnavailable("this server has no module store")
			}
			data, err := raw(blobs.MaxBlobSize)
			if err != nil {
				return nil, 0, err
			}
			if len(data) < 8 || string(data[:4]) != "\x00asm" {
				return nil, 0, apierrors.NewBadRequest("the body is not a WebAssembly module (missing \\0asm magic)")
			}
			digest, chunks, err := bs.Put(ctx, data)
			if err != nil {
				return nil, 0, apierrors.NewInternalError(err)
			}
			m := &wasmv1.WasmModule{ObjectMeta: metav1.ObjectMeta{Name: ModuleName(digest)},
				Spec: wasmv1.WasmModuleSpec{Digest: digest, Size: int64(len(data)), Chunks: int32(chunks)}}
			out, err := s.Store.Create(ctx, "", m, s.WriteOptionsFor(req, r))
			if apierrors.IsAlreadyExists(err) {
				out, err = s.Store.Get(ctx, "", m.Name, nil)
				code = http.StatusOK
			}
			return out, code, err
		})
	}
}

// downloadModule serves a stored module's bytes.
func downloadModule(s *endpoints.Scope, bs *blobs.Store) endpoints.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		obj, err := s.Store.Get(req.Context(), "", r.Name, nil)
		if err != nil {
			s.Codecs.WriteError(w, req, err)
			return
		}
		if bs == nil {
			s.Codecs.WriteError(w, req, apierrors.NewServiceUnavailable("this server has no module store"))
			return
		}
		data, err := bs.Get(req.Context(), obj.(*wasmv1.WasmModule).Spec.Digest)
		if errors.Is(err, blobs.ErrNotFound) {
			s.Codecs.WriteError(w, req, apierrors.NewNotFound(wasmv1.SchemeGroupVersion.WithResource("wasmmodules").GroupResource(), r.Name))
			return
		}
		if err != nil {
			s.Codecs.WriteError(w, req, apierrors.NewInternalError(err))
			return
		}
		w.Header().Set("Content-Type", ContentTypeWasm)
		w.Header().Set("Docker-Content-Digest", obj.(*wasmv1.WasmModule).Spec.Digest)
		_, _ = w.Write(data)
	}
}

// validatePluginSpec checks a plugin; namespaced plugins may not authenticate or select
// namespaces, since they act only inside their own namespace.
func validatePluginSpec(spec *wasmv1.WasmPluginSpec, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	sources := 0
	for _, s := range []string{spec.Module.Digest, spec.Module.File, spec.Module.URL} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 {
		errs = append(errs, field.Invalid(p.Child("module"), spec.Module, "exactly one of digest, file or url must be set"))
	}
	if namespaced && spec.Module.File != "" {
		errs = append(errs, field.Forbidden(p.Child("module", "file"), "a namespaced plugin may not load a file from the server; push the module and use its digest"))
	} else if spec.Module.File != "" && !strings.HasPrefix(spec.Module.File, "file://") && !strings.HasPrefix(spec.Module.File, "/") {
		errs = append(errs, field.Invalid(p.Child("module", "file"), spec.Module.File, "must be an absolute path or a file:// URL"))
	}
	if _, err := blobs.ParseDigest(spec.SHA256); err != nil {
		errs = append(errs, field.Invalid(p.Child("sha256"), spec.SHA256, "must be the module's sha256 as 64 lowercase hex digits"))
	} else if spec.Module.Digest != "" && strings.TrimPrefix(spec.Module.Digest, "sha256:") != strings.TrimPrefix(spec.SHA256, "sha256:") {
		errs = append(errs, field.Invalid(p.Child("module", "digest"), spec.Module.Digest, "must match spec.sha256"))
	}
	if len(spec.Hooks) == 0 {
		errs = append(errs, field.Required(p.Child("hooks"), "at least one hook"))
	}
	seen := sets.New[wasmv1.Hook]()
	for i, h := range spec.Hooks {
		hp := p.Child("hooks").Index(i)
		switch {
		case !validHooks.Has(h):
			errs = append(errs, field.NotSupported(hp, h, sets.List(validHooks)))
		case seen.Has(h):
			errs = append(errs, field.Duplicate(hp, h))
		case namespaced && h == wasmv1.HookAuthenticate:
			errs = append(errs, field.Forbidden(hp, "authenticate is cluster-wide: use a ClusterWasmPlugin"))
		}
		seen.Insert(h)
	}
	if seen.Has(wasmv1.HookInitialize) && spec.Initializer == "" {
		errs = append(errs, field.Required(p.Child("initializer"), "the initializer name the initialize hook serves"))
	}
	if namespaced && spec.NamespaceSelector != nil {
		errs = append(errs, field.Forbidden(p.Child("namespaceSelector"), "a namespaced plugin acts only in its own namespace"))
	}
	for i, r := range spec.Rules {
		if r.Scope != "" && !slices.Contains([]string{"*", "Cluster", "Namespaced"}, r.Scope) {
			errs = append(errs, field.NotSupported(p.Child("rules").Index(i).Child("scope"), r.Scope, []string{"*", "Cluster", "Namespaced"}))
		}
		for j, op := range r.Operations {
			if !slices.Contains([]wasmv1.Operation{wasmv1.OperationAll, wasmv1.OperationCreate, wasmv1.OperationUpdate, wasmv1.OperationDelete, wasmv1.OperationConnect}, op) {
				errs = append(errs, field.NotSupported(p.Child("rules").Index(i).Child("operations").Index(j), op, []string{"*", "CREATE", "UPDATE", "DELETE", "CONNECT"}))
			}
		}
	}
	if fp := spec.FailurePolicy; fp != nil && *fp != wasmv1.Fail && *fp != wasmv1.Ignore {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *fp, []string{"Fail", "Ignore"}))
	}
	if rp := spec.ReinvocationPolicy; rp != "" && rp != wasmv1.IfNeeded && rp != wasmv1.Never {
		errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), rp, []string{"IfNeeded", "Never"}))
	}
	if spec.Scheduler != nil && spec.Scheduler.Weight < 0 {
		errs = append(errs, field.Invalid(p.Child("scheduler", "weight"), spec.Scheduler.Weight, "must be >= 0"))
	}
	if l := spec.Limits; l != nil {
		if l.MemoryPages > 65536 {
			errs = append(errs, field.Invalid(p.Child("limits", "memoryPages"), l.MemoryPages, "must be at most 65536 (4 GiB)"))
		}
		if l.Timeout != nil && l.Timeout.Duration <= 0 {
			errs = append(errs, field.Invalid(p.Child("limits", "timeout"), l.Timeout.Duration.String(), "must be positive"))
		}
		if l.MaxInputBytes < 0 || l.MaxOutputBytes < 0 || l.MaxInstances < 0 {
			errs = append(errs, field.Invalid(p.Child("limits"), fmt.Sprint(*l), "limits must not be negative"))
		}
	}
	return errs
}
