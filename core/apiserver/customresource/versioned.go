package customresource

import (
	"context"
	"errors"
	"sync"

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
	// Read, if set, prunes and defaults every object read as kube-apiserver's storage
	// decoder does, so that objects stored before the schema changed are served as it
	// now says; objects the watch cache holds are normalized once per Read (see
	// storage.CachingObject.View).
	Read *ReadSchemas
	// Converter, if set, converts objects between versions; it must not change its input
	// (apiextensions-apiserver's "safe" converter).
	Converter runtime.ObjectConvertor
	// Superseded, if set, is closed when the CRD's schema changes: the watches opened
	// through this storage then end (their clients watch again and read by the new
	// schema), as kube-apiserver ends them when it replaces a CRD's storage.
	Superseded <-chan struct{}
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

// served turns obj, as storage has it (a copy the caller owns), into what a client of the
// served version gets: normalized as stored, then converted and coerced to the served
// version.
func (v *Versioned) served(obj runtime.Object) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.Object == nil {
		return nil
	}
	if v.Read != nil {
		if err := v.Read.AsStored(u); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	return v.toServed(u)
}

// toServed converts u, normalized as stored, to the served version.
func (v *Versioned) toServed(u *unstructured.Unstructured) error {
	if u.GetAPIVersion() == v.Served.String() {
		return nil
	}
	if err := v.convert(u, v.Served); err != nil {
		return err
	}
	return v.coerceServed(u)
}

// coerceServed prunes u, just converted, by the served version's schema.
func (v *Versioned) coerceServed(u *unstructured.Unstructured) error {
	if v.Read == nil {
		return nil
	}
	if err := v.Read.Converted(u); err != nil {
		return apierrors.NewInternalError(err)
	}
	return nil
}

// view is a cached object as the served version's readers get it, shared when it is: the
// object normalized once per Read, and converted for this request when it is stored in
// another version.
func (v *Versioned) view(co *storage.CachingObject) (*storage.CachingObject, bool) {
	if v.Read != nil {
		co = co.View(v.Read, v.Read.StoredView)
	}
	// An object kept as its stored bytes is not decoded to learn its version: a list
	// that splices the bytes would otherwise decode every item it serves.
	if apiVersion, ok := co.StoredAPIVersion(); ok {
		return co, apiVersion == v.Served.String()
	}
	u, ok := co.Shared().(*unstructured.Unstructured)
	return co, !ok || u.Object == nil || u.GetAPIVersion() == v.Served.String()
}

// Create implements storage.Interface.
func (v *Versioned) Create(ctx context.Context, key string, obj, out runtime.Object) error {
	if v.Served != v.Stored {
		obj = obj.DeepCopyObject()
		if err := v.convert(obj, v.Stored); err != nil {
			return err
		}
	}
	if v.Served == v.Stored && v.Converter == nil {
		// Nothing below changes the object once stored: the registry and the handler
		// only read it (its name, its answer), so the watch cache may share it.
		ctx = storage.WithResultKept(ctx)
	}
	if err := v.Inner.Create(ctx, key, obj, out); err != nil {
		return err
	}
	if v.Served == v.Stored && v.Converter == nil {
		// The handler pruned and defaulted obj by this same schema (its routes and this
		// storage are swapped together): it is what the storage decoder makes of it.
		return nil
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

// GetList implements storage.Interface. From the watch cache, every object already
// normalized under the current schema and stored in the served version is served as the
// cache shares it (the caller may splice its bytes); only the others are rewritten.
func (v *Versioned) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	want := storage.CachedItemsFrom(ctx)
	got := &storage.CachedItems{}
	if err := v.Inner.GetList(storage.WithCachedItems(ctx, got), key, opts, listObj); err != nil {
		return err
	}
	if !got.Served {
		// Etcd answered: the items are the caller's own.
		l, ok := listObj.(*unstructured.UnstructuredList)
		if !ok {
			return nil
		}
		us := make([]*unstructured.Unstructured, len(l.Items))
		for i := range l.Items {
			us[i] = &l.Items[i]
			if v.Read != nil {
				if err := v.Read.AsStored(us[i]); err != nil {
					return apierrors.NewInternalError(err)
				}
			}
		}
		return v.convertItems(us)
	}
	items := make([]*storage.CachingObject, len(got.Items))
	var stale []*unstructured.Unstructured
	var staleAt []int
	for i, co := range got.Items {
		view, same := v.view(co)
		items[i] = view
		if !same {
			// Shared: converted in a copy.
			stale = append(stale, view.Shared().(*unstructured.Unstructured).DeepCopy())
			staleAt = append(staleAt, i)
		}
	}
	if len(stale) > 0 {
		if err := v.convertItems(stale); err != nil {
			return err
		}
		for j, i := range staleAt {
			items[i] = storage.NewCachingObject(stale[j])
		}
	}
	if want != nil {
		want.Served, want.Items = true, items
		return nil
	}
	objs := make([]runtime.Object, len(items))
	for i, co := range items {
		objs[i] = co.Shared()
	}
	if err := meta.SetList(listObj, objs); err != nil {
		return apierrors.NewInternalError(err)
	}
	return nil
}

// convertItems converts, in place, those of items (the caller's own, normalized as
// stored) that are in another version to the served version: a conversion webhook gets
// them all in one review.
func (v *Versioned) convertItems(items []*unstructured.Unstructured) error {
	var stale []*unstructured.Unstructured
	for _, u := range items {
		if u.Object != nil && u.GetAPIVersion() != v.Served.String() {
			stale = append(stale, u)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if v.Converter != nil {
		batch := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": v.Served.String(), "kind": "List"}}
		for _, u := range stale {
			batch.Items = append(batch.Items, *u)
		}
		out, err := v.Converter.ConvertToVersion(batch, v.Served)
		if err != nil {
			return conversionError(err)
		}
		converted, ok := out.(*unstructured.UnstructuredList)
		if !ok || len(converted.Items) != len(stale) {
			return apierrors.NewInternalError(errors.New("the converter returned a list of another length"))
		}
		for j, u := range stale {
			*u = converted.Items[j]
		}
	} else {
		for _, u := range stale {
			u.SetAPIVersion(v.Served.String())
		}
	}
	for _, u := range stale {
		if err := v.coerceServed(u); err != nil {
			return err
		}
	}
	return nil
}

// GuaranteedUpdate implements storage.Interface.
func (v *Versioned) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc) error {
	err := v.Inner.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, error) {
		// The input may be the watch cache's shared object.
		input = input.DeepCopyObject()
		if err := v.served(input); err != nil {
			return nil, err
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

// Watch implements storage.Interface. An event's object normalized under the current
// schema and stored in the served version goes out as the cache shares it (encoded once
// for all watchers); the others are rewritten per watcher. An object that cannot be
// converted becomes an ERROR event with the conversion's status, and the watch goes on.
func (v *Versioned) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := v.Inner.Watch(ctx, key, opts)
	if err != nil {
		return w, err
	}
	if v.Superseded != nil {
		w = endWhen(w, v.Superseded)
	}
	if v.Read == nil && v.Served == v.Stored && v.Converter == nil {
		return w, nil
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type == watch.Bookmark || e.Type == watch.Error {
			return e, true
		}
		var u *unstructured.Unstructured
		if co, ok := e.Object.(*storage.CachingObject); ok {
			view, same := v.view(co)
			if same {
				e.Object = view
				return e, true
			}
			u, _ = view.Shared().(*unstructured.Unstructured)
			if u == nil {
				return e, true
			}
			// Other watchers share the event's object.
			u = u.DeepCopy()
		} else {
			obj := e.Object
			if co, ok := obj.(runtime.CacheableObject); ok {
				obj = co.GetObject()
			} else {
				obj = obj.DeepCopyObject()
			}
			var ok bool
			if u, ok = obj.(*unstructured.Unstructured); !ok {
				e.Object = obj
				return e, true
			}
			if v.Read != nil {
				if err := v.Read.AsStored(u); err != nil {
					return errorEvent(apierrors.NewInternalError(err)), true
				}
			}
		}
		if err := v.toServed(u); err != nil {
			return errorEvent(err), true
		}
		e.Object = u
		return e, true
	}), nil
}

// endingWatch is a watch that also stops when done is closed.
type endingWatch struct {
	watch.Interface
	stopped chan struct{}
	once    sync.Once
}

// endWhen returns w, stopped as soon as done is closed; the goroutine that waits for it
// ends with the watch.
func endWhen(w watch.Interface, done <-chan struct{}) watch.Interface {
	e := &endingWatch{Interface: w, stopped: make(chan struct{})}
	go func() {
		select {
		case <-done:
			w.Stop()
		case <-e.stopped:
		}
	}()
	return e
}

// Stop implements watch.Interface.
func (e *endingWatch) Stop() {
	e.once.Do(func() { close(e.stopped) })
	e.Interface.Stop()
}

// errorEvent is the ERROR event a watcher gets for an object that cannot be served.
func errorEvent(err error) watch.Event {
	st := apierrors.NewInternalError(err).Status()
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st = se.Status()
	}
	return watch.Event{Type: watch.Error, Object: &st}
}

// CurrentResourceVersion implements storage.Interface.
func (v *Versioned) CurrentResourceVersion(ctx context.Context) (uint64, error) {
	return v.Inner.CurrentResourceVersion(ctx)
}
