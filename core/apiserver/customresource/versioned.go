package customresource

import (
	"context"
	"errors"

	"github.com/wasmplane/wasmplane/core/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Versioned serves the objects of a CRD kept in its storage version as another of its
// versions. Without a Converter (conversion strategy None) only apiVersion changes, as
// Kubernetes' nopConverter does; with one (strategy Webhook, apiextensions-apiserver's
// webhook converter) every object read or written in another version goes through it.
type Versioned struct {
	// Inner keeps the objects in the storage version.
	Inner storage.Interface
	// Served and Stored are the group versions read and written.
	Served, Stored schema.GroupVersion
	// Defaults, if set, fills in the served version's defaults in every object read, so
	// that objects stored before the schema gained a default are served with it.
	Defaults func(*unstructured.Unstructured)
	// Converter, if set, converts objects between versions; it must not change its input
	// (apiextensions-apiserver's "safe" converter).
	Converter runtime.ObjectConvertor
}

var _ storage.Interface = (*Versioned)(nil)

// setVersion rewrites obj's apiVersion to gv when it is an unstructured object of the
// CRD's group.
func setVersion(obj runtime.Object, gv schema.GroupVersion) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.Object == nil {
		return
	}
	if u.GetAPIVersion() != gv.String() {
		u.SetAPIVersion(gv.String())
	}
}

// convert turns obj, an object the caller owns, into version gv in place.
func (v *Versioned) convert(obj runtime.Object, gv schema.GroupVersion) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.Object == nil || u.GetAPIVersion() == gv.String() {
		return nil
	}
	if v.Converter == nil {
		u.SetAPIVersion(gv.String())
		return nil
	}
	out, err := v.Converter.ConvertToVersion(u, gv)
	if err != nil {
		return conversionError(err)
	}
	converted, ok := out.(*unstructured.Unstructured)
	if !ok {
		return apierrors.NewInternalError(errors.New("the converter did not return a custom object"))
	}
	*u = *converted
	return nil
}

// conversionError is how a failed conversion reaches the client: a 500, as
// kube-apiserver answers it, unless it already has a status.
func conversionError(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewInternalError(err)
}

// rewrites reports whether objects read are changed on their way out; the watch cache
// shares its objects, so those must be copied first.
func (v *Versioned) rewrites() bool {
	return v.Served != v.Stored || v.Defaults != nil || v.Converter != nil
}

// served turns obj, as storage has it (a copy the caller owns), into what a client of the
// served version gets.
func (v *Versioned) served(obj runtime.Object) error {
	if err := v.convert(obj, v.Served); err != nil {
		return err
	}
	if v.Defaults == nil {
		return nil
	}
	if u, ok := obj.(*unstructured.Unstructured); ok && u.Object != nil {
		v.Defaults(u)
	}
	return nil
}

// Create implements storage.Interface.
func (v *Versioned) Create(ctx context.Context, key string, obj, out runtime.Object) error {
	if v.Served != v.Stored {
		obj = obj.DeepCopyObject()
		if err := v.convert(obj, v.Stored); err != nil {
			return err
		}
	}
	if err := v.Inner.Create(ctx, key, obj, out); err != nil {
		return err
	}
	return v.served(out)
}

// Get implements storage.Interface.
func (v *Versioned) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	if err := v.Inner.Get(ctx, key, opts, out); err != nil {
		return err
	}
	return v.served(out)
}

// GetList implements storage.Interface.
func (v *Versioned) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if v.rewrites() {
		// The items are rewritten below: the watch cache must put them in the list rather
		// than hand its shared objects to the response writer.
		ctx = storage.WithCachedItems(ctx, nil)
	}
	if err := v.Inner.GetList(ctx, key, opts, listObj); err != nil {
		return err
	}
	l, ok := listObj.(*unstructured.UnstructuredList)
	if !ok || !v.rewrites() {
		return nil
	}
	// The watch cache shares its objects' maps with the list: copy what changes.
	var stale []int
	for i := range l.Items {
		if l.Items[i].GetAPIVersion() != v.Served.String() {
			stale = append(stale, i)
		}
	}
	if v.Converter != nil && len(stale) > 0 {
		// One conversion (one webhook call) for the whole page.
		batch := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": v.Served.String(), "kind": "List"}}
		for _, i := range stale {
			batch.Items = append(batch.Items, *l.Items[i].DeepCopy())
		}
		out, err := v.Converter.ConvertToVersion(batch, v.Served)
		if err != nil {
			return conversionError(err)
		}
		converted, ok := out.(*unstructured.UnstructuredList)
		if !ok || len(converted.Items) != len(stale) {
			return apierrors.NewInternalError(errors.New("the converter returned a list of another length"))
		}
		for j, i := range stale {
			l.Items[i] = converted.Items[j]
		}
	}
	for i := range l.Items {
		if v.Defaults != nil || l.Items[i].GetAPIVersion() != v.Served.String() {
			l.Items[i] = *l.Items[i].DeepCopy()
			if err := v.served(&l.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// GuaranteedUpdate implements storage.Interface.
func (v *Versioned) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc) error {
	err := v.Inner.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, error) {
		if v.rewrites() {
			input = input.DeepCopyObject()
			if err := v.served(input); err != nil {
				return nil, err
			}
		}
		out, err := tryUpdate(input, res)
		if err != nil || out == nil {
			return out, err
		}
		if v.Served != v.Stored {
			out = out.DeepCopyObject()
			if err := v.convert(out, v.Stored); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	return v.served(destination)
}

// Delete implements storage.Interface.
func (v *Versioned) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions, validate storage.ValidateObjectFunc) error {
	if err := v.Inner.Delete(ctx, key, out, preconditions, validate); err != nil {
		return err
	}
	// The object is gone; a failed conversion of the answer does not undo that.
	if err := v.served(out); err != nil {
		setVersion(out, v.Served)
	}
	return nil
}

// Watch implements storage.Interface. An object that cannot be converted becomes an
// ERROR event with the conversion's status, and the watch goes on.
func (v *Versioned) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := v.Inner.Watch(ctx, key, opts)
	if err != nil || !v.rewrites() {
		return w, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type == watch.Bookmark || e.Type == watch.Error {
			return e, true
		}
		obj := e.Object
		if co, ok := obj.(runtime.CacheableObject); ok {
			obj = co.GetObject()
		}
		// Other watchers share the event's object.
		obj = obj.DeepCopyObject()
		if _, err := meta.Accessor(obj); err == nil {
			if err := v.served(obj); err != nil {
				st := apierrors.NewInternalError(err).Status()
				var se apierrors.APIStatus
				if errors.As(err, &se) {
					st = se.Status()
				}
				return watch.Event{Type: watch.Error, Object: &st}, true
			}
		}
		e.Object = obj
		return e, true
	}), nil
}

// CurrentResourceVersion implements storage.Interface.
func (v *Versioned) CurrentResourceVersion(ctx context.Context) (uint64, error) {
	return v.Inner.CurrentResourceVersion(ctx)
}
