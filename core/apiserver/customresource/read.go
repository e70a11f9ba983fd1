package customresource

import (
	"fmt"
	"reflect"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ReadSchemas is what reading a CRD's objects from storage needs of one state of its
// spec: the structural schema of every version. kube-apiserver decodes a stored custom
// object with a schema-coercing decoder (prune unknown fields and non-nullable nulls,
// coerce metadata, by the schema of the version the object was stored in), defaults it
// by that same schema, converts it to the version read and prunes it again by that
// version's schema; objects stored before the schema changed come back as the schema now
// says. One ReadSchemas is built per CRD change and shared by all its versions, so its
// identity tells objects already normalized under it (see storage.CachingObject.View)
// from those that are not.
type ReadSchemas struct {
	gk      schema.GroupKind
	schemas map[string]*structuralschema.Structural // by version, defaults pruned
	// defaulted: by version, whether its schema has a default (hasDefaults)
	defaulted map[string]bool
	// pruned: by version, the objects its prune and nulls walks leave alone
	pruned   map[string]*pruneIndex
	preserve bool
}

// newReadSchemas returns crd's read schemas.
func newReadSchemas(crd *apiextensionsv1.CustomResourceDefinition) (*ReadSchemas, error) {
	r := &ReadSchemas{
		gk:        schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Status.AcceptedNames.Kind},
		schemas:   map[string]*structuralschema.Structural{},
		defaulted: map[string]bool{},
		pruned:    map[string]*pruneIndex{},
		preserve:  crd.Spec.PreserveUnknownFields,
	}
	for _, v := range crd.Spec.Versions {
		validation, err := apiextensionshelpers.GetSchemaForVersion(crd, v.Name)
		if err != nil {
			return nil, err
		}
		if validation == nil {
			continue
		}
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(validation, internal, nil); err != nil {
			return nil, fmt.Errorf("version %s: converting the schema: %w", v.Name, err)
		}
		s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil && !crd.Spec.PreserveUnknownFields {
			return nil, fmt.Errorf("version %s: the schema is not structural: %w", v.Name, err)
		}
		if !crd.Spec.PreserveUnknownFields {
			s = s.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(s); err != nil {
				return nil, fmt.Errorf("version %s: pruning the schema's defaults: %w", v.Name, err)
			}
		}
		// With preserveUnknownFields a non-structural schema is kept as nil: metadata is
		// still coerced, nothing pruned or defaulted, as in kube-apiserver.
		r.schemas[v.Name] = s
		r.defaulted[v.Name] = hasDefaults(s)
		r.pruned[v.Name] = newPruneIndex(s)
	}
	return r, nil
}

// AsStored turns u, an object as storage keeps it (which the caller owns), into what
// kube-apiserver's storage decoder makes of it: pruned, coerced and defaulted by the
// schema of the version it was stored in.
func (r *ReadSchemas) AsStored(u *unstructured.Unstructured) error {
	if err := r.coerce(u, true); err != nil {
		return err
	}
	if gv, err := schema.ParseGroupVersion(u.GetAPIVersion()); err == nil && r.ours(gv, u.GetKind()) && r.defaulted[gv.Version] {
		structuraldefaulting.Default(u.Object, r.schemas[gv.Version])
	}
	return nil
}

// Converted prunes and coerces u, just converted to another version, by that version's
// schema, as kube-apiserver's schema-coercing converter does.
func (r *ReadSchemas) Converted(u *unstructured.Unstructured) error {
	return r.coerce(u, false)
}

// StoredView is AsStored for a shared object: nil when the object is already as the
// storage decoder would make it, else the normalized copy. This is what lets the watch
// cache keep serving the bytes it has for every object written under the current schema.
func (r *ReadSchemas) StoredView(obj runtime.Object) runtime.Object {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.Object == nil {
		return nil
	}
	c := u.DeepCopy()
	if err := r.AsStored(c); err != nil || reflect.DeepEqual(c.Object, u.Object) {
		// An object the decoder cannot coerce is served as it is (a get of it fails
		// the same way through AsStored).
		return nil
	}
	return c
}

func (r *ReadSchemas) ours(gv schema.GroupVersion, kind string) bool {
	return gv.Group == r.gk.Group && kind == r.gk.Kind
}

// coerce is kube-apiserver's unstructuredSchemaCoercer.apply: dropInvalid is set for
// the storage decoder (which also repairs a missing generation), not for the converter.
func (r *ReadSchemas) coerce(u *unstructured.Unstructured, dropInvalid bool) error {
	kind, foundKind, err := unstructured.NestedString(u.Object, "kind")
	if err != nil {
		return err
	}
	apiVersion, foundAPIVersion, err := unstructured.NestedString(u.Object, "apiVersion")
	if err != nil {
		return err
	}
	objectMeta, _, err := getObjectMeta(u.Object, schemaobjectmeta.ObjectMetaOptions{DropMalformedFields: dropInvalid})
	if err != nil {
		return err
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return err
	}
	if r.ours(gv, kind) {
		s := r.schemas[gv.Version]
		if !r.preserve && !r.pruned[gv.Version].unchanged(u.Object) {
			structuralpruning.PruneWithOptions(u.Object, s, true, structuralschema.UnknownFieldPathOptions{})
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s)
		}
		if ferr, _ := schemaobjectmeta.CoerceWithOptions(nil, u.Object, s, false, schemaobjectmeta.CoerceOptions{DropInvalidFields: dropInvalid}); ferr != nil {
			return ferr
		}
		if dropInvalid {
			objectMeta.repairGeneration()
		}
	}
	if foundKind {
		u.SetKind(kind)
	}
	if foundAPIVersion {
		u.SetAPIVersion(apiVersion)
	}
	return objectMeta.put(u.Object)
}
