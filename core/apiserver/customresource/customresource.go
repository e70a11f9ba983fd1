// Package customresource turns one version of a CustomResourceDefinition into a served
// resource: unstructured objects validated, pruned and defaulted by the CRD's structural
// schema and CEL rules (apiextensions-apiserver's own strategy does the checking), with
// the status and scale subresources, printer columns and selectable fields.
package customresource

import (
	"context"
	"fmt"
	"strings"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	crstrategy "k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/wasmplane/wasmplane/core/apiserver/customresource/rulecheck"
	"github.com/wasmplane/wasmplane/core/apiserver/customresource/schemacheck"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
)

// libStrategy is the part of apiextensions-apiserver's (unexported) custom resource
// strategy this package calls.
type libStrategy interface {
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
	GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error)
}

// Version is one served (or stored) version of a CRD.
type Version struct {
	// Resource is the descriptor served under the version's group version.
	Resource *registry.Resource
	// Served is the version's served flag; a version only stored is not routed.
	Served bool
	// StorageVersion is the version objects are written in.
	StorageVersion string
	// Status is the status subresource's strategy; nil when the version has none.
	Status registry.Strategy
	// Scale describes the scale subresource; nil when the version has none.
	Scale *apiextensionsv1.CustomResourceSubresourceScale
	// Deprecation is the Warning every request to a deprecated version gets; "" if none.
	Deprecation string
	// Coerce prunes an object decoded from a request, reporting the unknown fields.
	Coerce func(u *unstructured.Unstructured) (unknown []string, err error)
	// Read normalizes objects read from storage as kube-apiserver's storage decoder does
	// (pruned and defaulted by the schema in force); shared by all versions of one state
	// of the CRD.
	Read *ReadSchemas
}

// StoragePrefix is where a CRD's objects are kept in etcd, as Kubernetes keeps them.
func StoragePrefix(crd *apiextensionsv1.CustomResourceDefinition) string {
	return "/registry/" + crd.Spec.Group + "/" + crd.Status.AcceptedNames.Plural
}

// Build returns every served or stored version of crd, whose accepted names must be set.
func Build(crd *apiextensionsv1.CustomResourceDefinition) ([]*Version, error) {
	names := crd.Status.AcceptedNames
	if names.Plural == "" || names.Singular == "" || names.Kind == "" || names.ListKind == "" {
		return nil, fmt.Errorf("CustomResourceDefinition %s has no accepted names", crd.Name)
	}
	storageVersion, err := apiextensionshelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return nil, err
	}
	read, err := newReadSchemas(crd)
	if err != nil {
		return nil, err
	}
	var out []*Version
	for _, v := range crd.Spec.Versions {
		if !v.Served && !v.Storage {
			continue
		}
		ver, err := buildVersion(crd, v, storageVersion)
		if err != nil {
			return nil, fmt.Errorf("version %s: %w", v.Name, err)
		}
		ver.Read = read
		out = append(out, ver)
	}
	return out, nil
}

func buildVersion(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion, storageVersion string) (*Version, error) {
	names := crd.Status.AcceptedNames
	gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
	kind := gv.WithKind(names.Kind)
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped

	validation, err := apiextensionshelpers.GetSchemaForVersion(crd, v.Name)
	if err != nil {
		return nil, err
	}
	var internalSchema *apiextensionsinternal.JSONSchemaProps
	var structural *structuralschema.Structural
	if validation != nil {
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(validation, internal, nil); err != nil {
			return nil, fmt.Errorf("converting the schema: %w", err)
		}
		internalSchema = internal.OpenAPIV3Schema
		if structural, err = structuralschema.NewStructural(internalSchema); err != nil && !crd.Spec.PreserveUnknownFields {
			return nil, fmt.Errorf("the schema is not structural: %w", err)
		}
		if structural != nil {
			// The defaults are pruned in the copy served, as Kubernetes does.
			structural = structural.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(structural); err != nil {
				return nil, fmt.Errorf("pruning the schema's defaults: %w", err)
			}
		}
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internalSchema)
	if err != nil {
		return nil, fmt.Errorf("building the schema validator: %w", err)
	}
	subresources, err := apiextensionshelpers.GetSubresourcesForVersion(crd, v.Name)
	if err != nil {
		return nil, err
	}
	var statusSpec *apiextensionsinternal.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	var scaleSpec *apiextensionsinternal.CustomResourceSubresourceScale
	if subresources != nil && subresources.Status != nil {
		statusSpec = &apiextensionsinternal.CustomResourceSubresourceStatus{}
		if internalSchema != nil {
			if st, ok := internalSchema.Properties["status"]; ok {
				if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
					return nil, fmt.Errorf("building the status validator: %w", err)
				}
			}
		}
	}
	if subresources != nil && subresources.Scale != nil {
		scaleSpec = &apiextensionsinternal.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(subresources.Scale, scaleSpec, nil); err != nil {
			return nil, fmt.Errorf("converting the scale subresource: %w", err)
		}
	}
	typer := unstructuredTyper{}
	lib := crstrategy.NewStrategy(typer, namespaced, kind, validator, statusValidator, structural, statusSpec, scaleSpec, v.SelectableFields)
	co := &coercer{kind: kind, structural: structural, preserve: crd.Spec.PreserveUnknownFields, embedded: hasEmbedded(structural),
		pruned: newPruneIndex(structural), defaulted: hasDefaults(structural)}
	quick := newQuickValidation(typer, namespaced, kind, validator, statusValidator, structural, statusSpec, scaleSpec, v.SelectableFields)
	printer, err := newPrinter(columnsFor(v))
	if err != nil {
		return nil, err
	}
	res := &registry.Resource{
		GroupVersion: gv, Name: names.Plural, SingularName: names.Singular, Kind: names.Kind, ListKind: names.ListKind,
		ShortNames: names.ShortNames, Categories: names.Categories, Namespaced: namespaced,
		NewFunc: func() runtime.Object { return &unstructured.Unstructured{} },
		NewListFunc: func() runtime.Object {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gv.WithKind(names.ListKind))
			return l
		},
		Strategy: &strategy{lib: lib, coerce: co, quick: quick},
		GetAttrs: lib.GetAttrs,
		Printer:  printer,
	}
	for _, f := range v.SelectableFields {
		res.FieldLabels = append(res.FieldLabels, strings.TrimPrefix(f.JSONPath, "."))
	}
	ver := &Version{Resource: res, Served: v.Served, StorageVersion: storageVersion, Coerce: co.apply}
	if statusSpec != nil {
		ver.Status = &strategy{lib: crstrategy.NewStatusStrategy(lib), coerce: co}
	}
	if subresources != nil {
		ver.Scale = subresources.Scale
	}
	if v.Deprecated {
		ver.Deprecation = fmt.Sprintf("%s %s is deprecated", gv, names.Kind)
		if v.DeprecationWarning != nil {
			ver.Deprecation = *v.DeprecationWarning
		}
	}
	return ver, nil
}

// columnsFor returns the version's printer columns, or Age when it declares none (as
// Kubernetes' serveDefaultColumnsIfEmpty).
func columnsFor(v apiextensionsv1.CustomResourceDefinitionVersion) []apiextensionsv1.CustomResourceColumnDefinition {
	if len(v.AdditionalPrinterColumns) > 0 {
		return v.AdditionalPrinterColumns
	}
	return []apiextensionsv1.CustomResourceColumnDefinition{{
		Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
		Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"],
	}}
}

// newPrinter renders Table rows with apiextensions-apiserver's table convertor.
func newPrinter(cols []apiextensionsv1.CustomResourceColumnDefinition) (*registry.Printer, error) {
	conv, err := tableconvertor.New(cols)
	if err != nil {
		return nil, fmt.Errorf("printer columns: %w", err)
	}
	head, err := conv.ConvertToTable(context.Background(), &unstructured.Unstructured{Object: map[string]any{}}, nil)
	if err != nil {
		return nil, fmt.Errorf("printer columns: %w", err)
	}
	return &registry.Printer{Columns: head.ColumnDefinitions, Row: rowFunc(conv, len(head.ColumnDefinitions))}, nil
}

func rowFunc(conv rest.TableConvertor, n int) func(obj runtime.Object) []any {
	return func(obj runtime.Object) []any {
		t, err := conv.ConvertToTable(context.Background(), obj, &metav1.TableOptions{NoHeaders: true})
		if err != nil || len(t.Rows) != 1 {
			return make([]any, n)
		}
		return t.Rows[0].Cells
	}
}

// unstructuredTyper tells the kind of an unstructured object from its own apiVersion and kind.
type unstructuredTyper struct{}

func (unstructuredTyper) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		return nil, false, runtime.NewMissingKindErr("object has no kind field")
	}
	return []schema.GroupVersionKind{gvk}, false, nil
}

func (unstructuredTyper) Recognizes(schema.GroupVersionKind) bool { return true }

// coercer prunes and defaults objects by the structural schema, as Kubernetes'
// schema-coercing decoder and unstructured defaulter do.
type coercer struct {
	kind       schema.GroupVersionKind
	structural *structuralschema.Structural
	preserve   bool
	// embedded says the schema has embedded resources, whose metadata the coercion
	// walk coerces; without any, that walk changes and reports nothing.
	embedded bool
	// pruned tells the objects the prune and nulls walks would leave as they are (nil:
	// the walks always run).
	pruned *pruneIndex
	// defaulted says the schema has a default somewhere; without any, the defaulting
	// walk changes nothing (it only writes defaults), yet it copies a field's schema
	// for every field it visits.
	defaulted bool
}

// apply drops what the schema does not know (returning the unknown field paths) and
// coerces metadata, keeping apiVersion and kind.
func (c *coercer) apply(u *unstructured.Unstructured) ([]string, error) {
	apiVersion, kind := u.GetAPIVersion(), u.GetKind()
	objectMeta, unknown, err := getObjectMeta(u.Object, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return nil, err
	}
	if c.structural != nil && !c.preserve && !c.pruned.unchanged(u.Object) {
		unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, c.structural)
	}
	if c.structural != nil && c.embedded {
		ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, c.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
		if ferr != nil {
			return nil, ferr
		}
		unknown = append(unknown, paths...)
	}
	if kind != "" {
		u.SetKind(kind)
	}
	if apiVersion != "" {
		u.SetAPIVersion(apiVersion)
	}
	if err := objectMeta.put(u.Object); err != nil {
		return nil, err
	}
	return unknown, nil
}

// defaults fills in the schema's defaults.
func (c *coercer) defaults(u *unstructured.Unstructured) {
	if c.structural != nil && c.defaulted {
		structuraldefaulting.Default(u.Object, c.structural)
	}
}

// strategy adapts apiextensions-apiserver's strategy to registry.Strategy. The store
// checks object metadata itself, so the library's metadata errors are dropped here
// rather than reported twice.
type strategy struct {
	lib    libStrategy
	coerce *coercer
	// quick, when set, answers for objects that are valid; lib still answers for every
	// object that is not, so errors keep the library's form.
	quick *quickValidation
}

// quickValidation validates an object that passes in three cheap steps: the library's
// strategy without the checks the two checkers stand in for (exactly as the full
// strategy runs the rest), the OpenAPI value validations by a checker built once for
// the version, and the CEL rules by another. All three finding nothing is exactly the
// case where the full strategy finds nothing.
type quickValidation struct {
	lib    libStrategy
	schema *schemacheck.Checker
	rules  *rulecheck.Checker
	// create, when set, stands in for lib.Validate (see createChecks).
	create func(u *unstructured.Unstructured) field.ErrorList
}

// newQuickValidation returns the quick validation of a version, or nil when neither
// checker can stand in for the library's validators on its schema.
func newQuickValidation(typer runtime.ObjectTyper, namespaced bool, kind schema.GroupVersionKind, validator, statusValidator apiservervalidation.SchemaValidator,
	structural *structuralschema.Structural, statusSpec *apiextensionsinternal.CustomResourceSubresourceStatus,
	scaleSpec *apiextensionsinternal.CustomResourceSubresourceScale, selectable []apiextensionsv1.SelectableField) *quickValidation {
	if structural == nil {
		return nil
	}
	q := &quickValidation{schema: schemacheck.New(structural), rules: rulecheck.New(structural, celconfig.PerCallLimit)}
	if q.schema == nil && q.rules == nil {
		return nil
	}
	if q.schema != nil {
		validator = nil
	}
	if q.rules != nil {
		structural = structural.DeepCopy()
		withoutRules(structural)
	}
	q.lib = crstrategy.NewStrategy(typer, namespaced, kind, validator, statusValidator, structural, statusSpec, scaleSpec, selectable)
	if q.schema != nil && q.rules != nil && scaleSpec == nil {
		q.create = createChecks(kind, structural)
	}
	return q
}

// createChecks is what lib.Validate checks of a new object when both checkers stand in
// for its validators and there is no scale subresource — type meta, embedded objects'
// metadata, list types — without the object's own metadata: the library converts it to
// ObjectMeta by reflection to validate it, and its errors are never reported (the store
// validates metadata itself and withoutMetadata drops them), so an object that fails only
// there passes either way.
func createChecks(kind schema.GroupVersionKind, structural *structuralschema.Structural) func(u *unstructured.Unstructured) field.ErrorList {
	apiVersion := kind.GroupVersion().String()
	// Both walks report only at embedded resources and at lists typed set or map: a
	// schema with neither can give no error, whatever the object.
	walks := hasEmbeddedOrListType(structural)
	return func(u *unstructured.Unstructured) field.ErrorList {
		if u.GetKind() != kind.Kind || u.GetAPIVersion() != apiVersion {
			// The library tells what is wrong.
			return field.ErrorList{field.Invalid(field.NewPath("kind"), u.GetKind(), "")}
		}
		if !walks {
			return nil
		}
		errs := schemaobjectmeta.Validate(context.Background(), nil, u.Object, structural, false)
		return append(errs, structurallisttype.ValidateListSetsAndMaps(nil, structural, u.Object)...)
	}
}

// hasEmbeddedOrListType reports whether any node of s (through properties, items and
// additionalProperties, the ways objectmeta.Validate and ValidateListSetsAndMaps walk)
// is an embedded resource or declares a list type.
func hasEmbeddedOrListType(s *structuralschema.Structural) bool {
	return anyNode(s, func(n *structuralschema.Structural) bool { return n.XEmbeddedResource || n.XListType != nil })
}

// hasEmbedded reports whether any node of s (as objectmeta.CoerceWithOptions walks it)
// is an embedded resource.
func hasEmbedded(s *structuralschema.Structural) bool {
	return anyNode(s, func(n *structuralschema.Structural) bool { return n.XEmbeddedResource })
}

// hasDefaults reports whether any node of s (as defaulting.Default walks it) has a
// default. Default writes nothing else: where a null stands for a value without a
// default, it writes a copy of the missing default, null again.
func hasDefaults(s *structuralschema.Structural) bool {
	return anyNode(s, func(n *structuralschema.Structural) bool { return n.Default.Object != nil })
}

// anyNode reports whether pred holds for a node of s reached through properties, items
// and additionalProperties.
func anyNode(s *structuralschema.Structural, pred func(*structuralschema.Structural) bool) bool {
	if s == nil {
		return false
	}
	if pred(s) || anyNode(s.Items, pred) {
		return true
	}
	if s.AdditionalProperties != nil && anyNode(s.AdditionalProperties.Structural, pred) {
		return true
	}
	for _, p := range s.Properties {
		if anyNode(&p, pred) {
			return true
		}
	}
	return false
}

// passes reports whether obj is valid; false means the full strategy must tell why.
func (q *quickValidation) passes(ctx context.Context, obj runtime.Object, libErrs func() field.ErrorList) bool {
	if q == nil {
		return false
	}
	u, ok := obj.(*unstructured.Unstructured)
	return ok && len(libErrs()) == 0 && q.schema.Passes(u.Object) && q.rules.Passes(ctx, u.Object, celconfig.RuntimeCELCostBudget)
}

// withoutRules drops every x-kubernetes-validations rule of s, in place.
func withoutRules(s *structuralschema.Structural) {
	if s == nil {
		return
	}
	s.XValidations = nil
	withoutRules(s.Items)
	if s.AdditionalProperties != nil {
		withoutRules(s.AdditionalProperties.Structural)
	}
	for k, p := range s.Properties {
		withoutRules(&p)
		s.Properties[k] = p
	}
}

func (s *strategy) Default(obj runtime.Object) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	// Mutating admission may have added fields the schema does not know: prune again, as
	// Kubernetes' storage encoder does, then default.
	_, _ = s.coerce.apply(u)
	s.coerce.defaults(u)
}

// DefaultPruned defaults an object the version's coercer has just pruned: coercing is
// idempotent (TestCoerceIsIdempotent), so Default's first pass would change nothing.
func (s *strategy) DefaultPruned(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		s.coerce.defaults(u)
	}
}

func (s *strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.lib.PrepareForCreate(ctx, obj)
}

func (s *strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.lib.PrepareForUpdate(ctx, obj, old)
}

func (s *strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	if s.quick.passes(ctx, obj, func() field.ErrorList {
		if u, ok := obj.(*unstructured.Unstructured); ok && s.quick.create != nil {
			return s.quick.create(u)
		}
		return s.quick.lib.Validate(ctx, obj)
	}) {
		return nil
	}
	return withoutMetadata(s.lib.Validate(ctx, obj))
}

func (s *strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	// The rule checker holds no rule that reads oldSelf, so the old object only matters to
	// ratcheting, which turns errors into warnings: with no errors it changes nothing.
	if s.quick.passes(ctx, obj, func() field.ErrorList { return s.quick.lib.ValidateUpdate(ctx, obj, old) }) {
		return nil
	}
	return withoutMetadata(s.lib.ValidateUpdate(ctx, obj, old))
}

// withoutMetadata drops the errors about the object's own metadata (the store reports
// them); embedded objects' metadata errors (spec.x.metadata) stay.
func withoutMetadata(errs field.ErrorList) field.ErrorList {
	out := errs[:0]
	for _, e := range errs {
		if e.Field == "metadata" || strings.HasPrefix(e.Field, "metadata.") || strings.HasPrefix(e.Field, "metadata[") {
			continue
		}
		out = append(out, e)
	}
	return out
}
