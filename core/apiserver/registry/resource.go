// Package registry turns a storage.Interface into a Kubernetes REST resource: names and
// uids, defaults, validation, generation, finalizers, graceful deletion and the
// create/get/list/update/delete semantics the endpoint handlers serve.
package registry

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// PrunedDefaulter is a Strategy whose Default first prunes the object as the resource's
// Prune does. DefaultPruned is Default for an object Prune has just pruned (decoded from
// a request and unchanged since): pruning it again would change nothing, so it only
// defaults.
type PrunedDefaulter interface {
	DefaultPruned(obj runtime.Object)
}

// Strategy holds the per-resource rules of create and update.
type Strategy interface {
	// Default fills in defaulted fields, as Kubernetes' generated defaulters do.
	Default(obj runtime.Object)
	// PrepareForCreate resets what a client may not set on create (usually status).
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	// PrepareForUpdate keeps what a client may not change through this endpoint.
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	// Validate checks a new object (object meta is checked by the store).
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	// ValidateUpdate checks an update (object meta is checked by the store).
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// TableColumn is one column of `kubectl get` output.
type TableColumn = metav1.TableColumnDefinition

// Printer renders objects as Table rows for `kubectl get`.
type Printer struct {
	// Columns are all the columns, Name included where the resource shows it.
	Columns []TableColumn
	// Row returns every cell of one object's row.
	Row func(obj runtime.Object) []any
}

// Resource is the descriptor of one served resource, built-in or custom: the one place
// that says how the generic server, endpoints and store treat it (as Kubernetes'
// rest.RESTCreateStrategy and rest.RESTUpdateStrategy, plus the storage options of its
// registry). Generic code reads only this; it never checks a resource by name.
//
// The fields are stable: new ones are only ever added, with a zero value that keeps
// the behaviour of a descriptor written before them.
type Resource struct {
	// GroupVersion the resource is served under.
	GroupVersion schema.GroupVersion
	// Name is the plural resource name, e.g. "pods".
	Name string
	// SingularName is e.g. "pod".
	SingularName string
	// Kind and ListKind, e.g. "Pod", "PodList".
	Kind, ListKind string
	// ShortNames such as "po".
	ShortNames []string
	// Categories such as "all".
	Categories []string
	// Namespaced is true for namespace-scoped resources.
	Namespaced bool
	// NewFunc and NewListFunc make empty objects.
	NewFunc, NewListFunc func() runtime.Object
	// Strategy is the main resource's create/update rules.
	Strategy Strategy
	// StatusStrategy, when set, serves the status subresource.
	StatusStrategy Strategy
	// TracksGeneration bumps metadata.generation when the spec changes.
	TracksGeneration bool
	// GetAttrs adds the resource's supported field selectors; nil = name and namespace.
	GetAttrs func(obj runtime.Object) (labels.Set, fields.Set, error)
	// FieldLabels are the field selector keys GetAttrs supports besides metadata.*.
	FieldLabels []string
	// Printer renders Table output; nil = Name and Age.
	Printer *Printer
	// GracefulDelete, when set, returns the grace period to apply to a delete of obj
	// (pods); 0 means delete at once.
	GracefulDelete func(obj runtime.Object, opts *metav1.DeleteOptions) int64
	// DeleteNotAllowed lets a resource refuse deletion (e.g. the default namespaces).
	DeleteNotAllowed func(obj runtime.Object) error
	// OnDeleteMarked, when set, is called with the object a delete marks with a
	// deletionTimestamp, inside the write (namespaces enter Terminating here).
	OnDeleteMarked func(obj runtime.Object)
	// OrphanByDefault makes a delete that names no propagation policy orphan the
	// object's dependents, as Kubernetes keeps for core/v1 ReplicationControllers for
	// backward compatibility (their DefaultGarbageCollectionPolicy); other resources
	// delete dependents in the background.
	OrphanByDefault bool
	// Retain, when set, keeps an object whose deletion is otherwise complete (a namespace
	// whose spec.finalizers are not yet empty).
	Retain func(obj runtime.Object) bool
	// ValidateName, when set, replaces the DNS-subdomain check of metadata.name (RBAC
	// names such as "system:node" are path segments, namespaces are DNS labels).
	ValidateName func(name string, prefix bool) []string
	// CheckWrite, when set, runs after validation on create (old nil) and update; its error
	// is returned as is (RBAC's escalation check answers 403 Forbidden).
	CheckWrite func(ctx context.Context, obj, old runtime.Object) error
	// NoTable, when set, refuses Table output with 406 Not Acceptable: the resource has
	// no Table form, as Kubernetes' access and token reviews have no table convertor.
	NoTable bool
	// Verbs, when set, are the only verbs served and listed in discovery (create-only
	// reviews); nil = every verb.
	Verbs []string
	// TypeConverter gives the merge semantics of server-side apply and managedFields
	// (list types, map keys); nil = the server's converter for the kind. A custom resource
	// sets its structural schema's.
	TypeConverter managedfields.TypeConverter
	// Convertor converts the objects of a custom resource between its versions for
	// server-side apply and managedFields (a manager's fields are kept in the version it
	// wrote): its conversion webhook; nil = only apiVersion changes (conversion strategy
	// None).
	Convertor runtime.ObjectConvertor
	// ResetFields are, by subresource ("" for the object, "status"), the fields a write
	// through that endpoint cannot set and so does not own (Kubernetes' GetResetFields);
	// nil = status for the object and spec for its status when StatusStrategy is set.
	ResetFields map[string][]fieldpath.Path
	// StoragePrefix is the storage key prefix of the objects, e.g. "/registry/pods":
	// a namespaced object is kept at PREFIX/NAMESPACE/NAME, a cluster-scoped one at
	// PREFIX/NAME. Kubernetes' layout is "/registry/RESOURCE" for its built-in groups
	// and "/registry/GROUP/RESOURCE" for custom resources. Required.
	StoragePrefix string
	// AllowCreateOnUpdate lets a PUT of a missing object create it (Kubernetes'
	// AllowCreateOnUpdate: true for events, leases, limit ranges, RBAC, services…).
	AllowCreateOnUpdate bool
	// AllowUnconditionalUpdate lets a PUT without metadata.resourceVersion replace the
	// stored revision whatever it is (Kubernetes' AllowUnconditionalUpdate, true for
	// nearly every resource); when false such a PUT is refused as invalid. It applies to
	// the status subresource too.
	AllowUnconditionalUpdate bool
	// NoInitializers exempts new objects from pending initializers (the
	// InitializerConfigurations themselves).
	NoInitializers bool
	// Prune, when set, drops from a decoded object the fields its schema does not know
	// and returns their paths, which fieldValidation turns into warnings or an error
	// (custom resources' structural pruning).
	Prune func(obj runtime.Object) (unknownFields []string, err error)
	// DefaultOnlyIfAdmissionChanged tells the store that no built-in admission plugin
	// changes the resource's objects (custom resources), so that defaulting again after
	// mutating admission, which for custom resources prunes and coerces the whole object,
	// is only needed when a dynamic plugin changed it.
	DefaultOnlyIfAdmissionChanged bool
	// Warning, when set, is sent as a Warning header with every response of the resource
	// (a deprecated custom resource version).
	Warning string
	// Traced keeps the journey of each created object for the trace subresource
	// (`wasmplane trace`); the server gives the resource's store a trace store.
	Traced bool
	// StoredAs, when set, keeps the objects as another kind in that kind's storage: the
	// resource is a second version of objects another resource serves (events.k8s.io/v1
	// Events are core/v1 Events in storage, as in Kubernetes). StoragePrefix is then the
	// other resource's.
	StoredAs *StoredAs
	// Allocator, when set, reserves what objects claim from pools shared by every object
	// of the resource (a Service's cluster IP and node ports), as Kubernetes' BeginCreate,
	// BeginUpdate and AfterDelete hooks do.
	Allocator Allocator
}

// StoredAs is the kind a resource's objects are stored as, and how they convert.
type StoredAs struct {
	// NewFunc and NewListFunc make empty objects of the stored kind.
	NewFunc, NewListFunc func() runtime.Object
	// GetAttrs computes the stored kind's selector fields.
	GetAttrs func(obj runtime.Object) (labels.Set, fields.Set, error)
	// FieldLabels renames the resource's field selector labels to the stored kind's
	// ("reportingController" is "reportingComponent"); a label not named is the same.
	FieldLabels map[string]string
	// ToStored and FromStored convert one object; each returns a new object.
	ToStored, FromStored func(obj runtime.Object) (runtime.Object, error)
}

// Allocator reserves what an object claims from a shared pool around its write. Begin
// calls run after validation and may fill in the object (an allocated IP); the returned
// finish is called once with whether the write was stored, and releases what Begin
// reserved when it was not, so a failed write leaves nothing allocated.
type Allocator interface {
	// BeginCreate reserves what a new object claims; with dryRun it only checks.
	BeginCreate(ctx context.Context, obj runtime.Object, dryRun bool) (finish func(ctx context.Context, stored bool), err error)
	// BeginUpdate reserves what obj claims beyond old; a stored update releases what old
	// held that obj no longer does.
	BeginUpdate(ctx context.Context, obj, old runtime.Object, dryRun bool) (finish func(ctx context.Context, stored bool), err error)
	// Release frees what a deleted object held.
	Release(ctx context.Context, obj runtime.Object)
}

// GroupResource is the resource's group and plural name.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Name}
}

// GroupVersionKind is the resource's kind.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersion.WithKind(r.Kind)
}

// GroupVersionResource is the resource's group, version and plural name.
func (r *Resource) GroupVersionResource() schema.GroupVersionResource {
	return r.GroupVersion.WithResource(r.Name)
}
