package customresource

import (
	"context"

	"github.com/wasmplane/wasmplane/core/storage"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Versioned serves the objects of a CRD kept in its storage version as another of its
// versions. Conversion strategy None: only apiVersion changes, as Kubernetes'
// nopConverter does.
type Versioned struct {
	// Inner keeps the objects in the storage version.
	Inner storage.Interface
	// Served and Stored are the group versions read and written.
	Served, Stored schema.GroupVersion
	// Defaults, if set, fills in the served version's defaults in every object read, so
	// that objects stored before the schema gained a default are served with it.
	Defaults func(*unstructured.Unstructured)
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

func (v *Versioned) same() bool { return v.Served == v.Stored }

// rewrites reports whether objects read are changed on their way out; the watch cache
// shares its objects, so those must be copied first.
func (v *Versioned) rewrites() bool { return !v.same() || v.Defaults != nil }

// served turns obj, as storage has it (a copy the caller owns), into what a client of the
// served version gets.
func (v *Versioned) served(obj runtime.Object) {
	setVersion(obj, v.Served)
	if v.Defaults == nil {
		return
	}
	if u, ok := obj.(*unstructured.Unstructured); ok && u.Object != nil {
		v.Defaults(u)
	}
}

// Create implements storage.Interface.
func (v *Versioned) Create(ctx context.Context, key string, obj, out runtime.Object) error {
	if !v.same() {
		obj = obj.DeepCopyObject()
		setVersion(obj, v.Stored)
	}
	if err := v.Inner.Create(ctx, key, obj, out); err != nil {
		return err
	}
	v.served(out)
	return nil
}

// Get implements storage.Interface.
func (v *Versioned) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	if err := v.Inner.Get(ctx, key, opts, out); err != nil {
		return err
	}
	v.served(out)
	return nil
}

// GetList implements storage.Interface.
func (v *Versioned) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := v.Inner.GetList(ctx, key, opts, listObj); err != nil {
		return err
	}
	if !v.rewrites() {
		return nil
	}
	if l, ok := listObj.(*unstructured.UnstructuredList); ok {
		for i := range l.Items {
			// The watch cache shares its objects' maps with the list: copy first.
			if v.Defaults != nil || l.Items[i].GetAPIVersion() != v.Served.String() {
				l.Items[i] = *l.Items[i].DeepCopy()
				v.served(&l.Items[i])
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
			v.served(input)
		}
		out, err := tryUpdate(input, res)
		if err != nil || out == nil {
			return out, err
		}
		if !v.same() {
			out = out.DeepCopyObject()
			setVersion(out, v.Stored)
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	v.served(destination)
	return nil
}

// Delete implements storage.Interface.
func (v *Versioned) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions, validate storage.ValidateObjectFunc) error {
	if err := v.Inner.Delete(ctx, key, out, preconditions, validate); err != nil {
		return err
	}
	v.served(out)
	return nil
}

// Watch implements storage.Interface.
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
		} else {
			obj = obj.DeepCopyObject()
		}
		if _, err := meta.Accessor(obj); err == nil {
			v.served(obj)
		}
		e.Object = obj
		return e, true
	}), nil
}

// CurrentResourceVersion implements storage.Interface.
func (v *Versioned) CurrentResourceVersion(ctx context.Context) (uint64, error) {
	return v.Inner.CurrentResourceVersion(ctx)
}
