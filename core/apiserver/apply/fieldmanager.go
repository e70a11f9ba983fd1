// Package apply serves server-side apply and keeps metadata.managedFields, with the
// libraries kube-apiserver uses: apimachinery's managedfields FieldManager over
// structured-merge-diff. It builds one field manager per resource and writing endpoint,
// parses the apply request, and decides which type schema gives a kind its merge semantics.
package apply

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// NewTypeConverter returns the converter for every kind of scheme. Kinds of
// k8s.io/api take their schema from client-go's embedded OpenAPI models, which carry
// the list-type and map-keys markers (a pod's containers merge by name, a service's
// ports by port and protocol). Other kinds (wasmplane's own) are deduced from the
// object: their OpenAPI is built by reflection, which cannot see those markers, so a
// schema built from it would give exactly the deduced semantics (lists atomic, struct
// fields and maps granular) at the cost of a schema parse; types are already checked
// when the merged object is decoded into its Go type.
func NewTypeConverter(scheme *runtime.Scheme) managedfields.TypeConverter {
	return &kindConverter{scheme: scheme, builtin: applyconfigurations.NewTypeConverter(scheme), deduced: managedfields.NewDeducedTypeConverter()}
}

// kindConverter chooses a converter by the Go package of the object's kind.
type kindConverter struct {
	scheme           *runtime.Scheme
	builtin, deduced managedfields.TypeConverter
}

func (c *kindConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	return c.forKind(obj.GetObjectKind().GroupVersionKind()).ObjectToTyped(obj, opts...)
}

func (c *kindConverter) TypedToObject(value *typed.TypedValue) (runtime.Object, error) {
	// Both answer an Unstructured.
	return c.deduced.TypedToObject(value)
}

func (c *kindConverter) forKind(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	if t, ok := c.scheme.AllKnownTypes()[gvk]; ok && strings.HasPrefix(t.PkgPath(), "k8s.io/api/") {
		return c.builtin
	}
	return c.deduced
}

// Subresources of an object whose writes keep managedFields: the object itself ("")
// and its status.
const (
	Main   = ""
	Status = "status"
)

// Config describes one resource to the field managers.
type Config struct {
	// Scheme creates and converts the resource's objects.
	Scheme *runtime.Scheme
	// Kind is the resource's kind in its served version.
	Kind schema.GroupVersionKind
	// TypeConverter gives the merge semantics; nil = NewTypeConverter(Scheme). A custom
	// resource passes its structural schema's.
	TypeConverter managedfields.TypeConverter
	// Default fills in defaults, so that applied and defaulted fields compare equal.
	Default func(obj runtime.Object)
	// ResetFields are, by subresource, the fields a write through that endpoint cannot set
	// and therefore does not own (Kubernetes' GetResetFields).
	ResetFields map[string][]fieldpath.Path
	// Subresources that write the object besides the object itself ("status"); those
	// named in ResetFields are added.
	Subresources []string
	// Custom says the objects are custom resources: Unstructured, of a kind Scheme does
	// not know, served without conversion between versions, and free to carry fields
	// their schema preserves without naming.
	Custom bool
	// Convertor converts custom objects between versions (the CRD's conversion webhook);
	// nil = only apiVersion changes. Built-in kinds convert through Scheme.
	Convertor runtime.ObjectConvertor
}

// Managers holds a resource's field managers by subresource.
type Managers struct {
	bySub map[string]*FieldManager
}

// FieldManager keeps the managedFields of the writes through one endpoint with
// Kubernetes' field manager, built three times over the same type converter: as
// kube-apiserver builds it (library), and over managerConverter for updates (update) and
// applies (apply), which give the same answers for less work whenever
// managedFieldsUnread holds for the objects of the write; when it does not, the write
// goes to library.
type FieldManager struct {
	library, update, apply *managedfields.FieldManager
	// custom: the objects are custom ones, whose managedFields an update writes back
	// through customObject.
	custom bool
	// fields keeps the fieldsV1 trees customObject decoded.
	fields fieldsCache
}

// UpdateNoErrors records that manager set what differs between liveObj and newObj
// (managedfields.FieldManager.UpdateNoErrors).
func (f *FieldManager) UpdateNoErrors(liveObj, newObj runtime.Object, manager string) runtime.Object {
	if !managedFieldsUnread(liveObj) || !managedFieldsUnread(newObj) {
		return f.library.UpdateNoErrors(liveObj, newObj, manager)
	}
	u, ok := newObj.(*unstructured.Unstructured)
	if !f.custom || !ok {
		return f.update.UpdateNoErrors(liveObj, newObj, manager)
	}
	out := f.update.UpdateNoErrors(liveObj, customObject{Unstructured: u, fields: &f.fields}, manager)
	if c, ok := out.(customObject); ok {
		return c.Unstructured
	}
	return out
}

// Apply merges appliedObj into liveObj for manager (managedfields.FieldManager.Apply).
func (f *FieldManager) Apply(liveObj, appliedObj runtime.Object, manager string, force bool) (runtime.Object, error) {
	if managedFieldsUnread(liveObj) {
		return f.apply.Apply(liveObj, appliedObj, manager, force)
	}
	return f.library.Apply(liveObj, appliedObj, manager, force)
}

// NewManagers builds the field managers of one resource.
func NewManagers(cfg Config) (*Managers, error) {
	tc := cfg.TypeConverter
	if tc == nil {
		tc = NewTypeConverter(cfg.Scheme)
	}
	m := &Managers{bySub: map[string]*FieldManager{}}
	def := defaulter(cfg.Default)
	subs := append([]string{Main}, cfg.Subresources...)
	for sub := range cfg.ResetFields {
		if !slices.Contains(subs, sub) {
			subs = append(subs, sub)
		}
	}
	for _, sub := range subs {
		var reset map[fieldpath.APIVersion]fieldpath.Filter
		if paths := cfg.ResetFields[sub]; len(paths) > 0 {
			reset = map[fieldpath.APIVersion]fieldpath.Filter{
				fieldpath.APIVersion(cfg.Kind.GroupVersion().String()): fieldpath.NewExcludeSetFilter(fieldpath.NewSet(paths...)),
			}
		}
		build := func(tc managedfields.TypeConverter) (*managedfields.FieldManager, error) {
			if cfg.Custom {
				return managedfields.NewDefaultCRDFieldManager(tc, customConvertor{webhook: cfg.Convertor}, def, customCreater{}, cfg.Kind, cfg.Kind.GroupVersion(), sub, reset)
			}
			return managedfields.NewDefaultFieldManager(tc, versionedConvertor{scheme: cfg.Scheme}, def, cfg.Scheme, cfg.Kind, cfg.Kind.GroupVersion(), sub, reset)
		}
		fm := &FieldManager{custom: cfg.Custom}
		var err error
		if fm.library, err = build(tc); err != nil {
			return nil, fmt.Errorf("field manager of %s %q: %w", cfg.Kind, sub, err)
		}
		if fm.update, err = build(managerConverter{TypeConverter: tc}); err != nil {
			return nil, fmt.Errorf("field manager of %s %q: %w", cfg.Kind, sub, err)
		}
		// Custom objects are Unstructured already.
		fm.apply = fm.update
		if !cfg.Custom {
			if fm.apply, err = build(managerConverter{TypeConverter: tc, viaUnstructured: true}); err != nil {
				return nil, fmt.Errorf("field manager of %s %q: %w", cfg.Kind, sub, err)
			}
		}
		m.bySub[sub] = fm
	}
	return m, nil
}

// For returns the field manager of a subresource, nil when its writes keep none.
func (m *Managers) For(subresource string) *FieldManager {
	if m == nil {
		return nil
	}
	return m.bySub[subresource]
}

// StatusResetFields is Kubernetes' usual split of ownership for a resource with a status
// subresource: a write of the object cannot set status, a write of status cannot set
// spec. extra adds paths per subresource (a pod's status endpoint also resets
// metadata.deletionTimestamp and metadata.ownerReferences).
func StatusResetFields(extra map[string][]fieldpath.Path) map[string][]fieldpath.Path {
	out := map[string][]fieldpath.Path{
		Main:   {fieldpath.MakePathOrDie("status")},
		Status: {fieldpath.MakePathOrDie("spec")},
	}
	for sub, paths := range extra {
		out[sub] = append(out[sub], paths...)
	}
	return out
}

// defaulter adapts a strategy's defaulting to runtime.ObjectDefaulter.
type defaulter func(obj runtime.Object)

func (d defaulter) Default(obj runtime.Object) {
	if d != nil {
		d(obj)
	}
}
