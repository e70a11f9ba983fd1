package registry

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/wasmplane/wasmplane/core/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// StoredResource is the descriptor the storage of r is made from: r's own, or, when r is
// stored as another kind, one for that kind (its types and selector fields).
func StoredResource(r *Resource) *Resource {
	if r.StoredAs == nil {
		return r
	}
	cp := *r
	cp.NewFunc, cp.NewListFunc, cp.GetAttrs, cp.StoredAs = r.StoredAs.NewFunc, r.StoredAs.NewListFunc, r.StoredAs.GetAttrs, nil
	return &cp
}

// ConvertingStorage serves objects of a resource kept as another kind (Resource.StoredAs)
// over inner, the storage of that kind: writes are converted before they reach it, and
// everything it returns — objects, lists, watch events — after.
type ConvertingStorage struct {
	inner storage.Interface
	as    *StoredAs
}

var _ storage.Interface = (*ConvertingStorage)(nil)

// NewConvertingStorage returns storage for a resource stored as as, over inner.
func NewConvertingStorage(inner storage.Interface, as *StoredAs) *ConvertingStorage {
	return &ConvertingStorage{inner: inner, as: as}
}

// Stop stops inner if it has watches to end (a watch cache).
func (c *ConvertingStorage) Stop() {
	if s, ok := c.inner.(interface{ Stop() }); ok {
		s.Stop()
	}
}

// into converts a stored object and copies it into out, which the caller owns.
func (c *ConvertingStorage) into(stored, out runtime.Object) error {
	conv, err := c.as.FromStored(stored)
	if err != nil {
		return fmt.Errorf("converting a stored %T: %w", stored, err)
	}
	dst, src := reflect.ValueOf(out), reflect.ValueOf(conv)
	if dst.Kind() != reflect.Pointer || dst.Type() != src.Type() {
		return fmt.Errorf("converted a stored object to %T, want %T", conv, out)
	}
	dst.Elem().Set(src.Elem())
	return nil
}

// Create implements storage.Interface.
func (c *ConvertingStorage) Create(ctx context.Context, key string, obj, out runtime.Object) error {
	stored, err := c.as.ToStored(obj)
	if err != nil {
		return fmt.Errorf("converting %T for storage: %w", obj, err)
	}
	storedOut := c.as.NewFunc()
	if err := c.inner.Create(ctx, key, stored, storedOut); err != nil {
		return err
	}
	return c.into(storedOut, out)
}

// Get implements storage.Interface.
func (c *ConvertingStorage) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	stored := c.as.NewFunc()
	if err := c.inner.Get(ctx, key, opts, stored); err != nil {
		return err
	}
	return c.into(stored, out)
}

// options renames the field selector's labels to the stored kind's.
func (c *ConvertingStorage) options(opts storage.ListOptions) (storage.ListOptions, error) {
	if opts.Predicate.Field == nil || opts.Predicate.Field.Empty() || len(c.as.FieldLabels) == 0 {
		return opts, nil
	}
	sel, err := opts.Predicate.Field.Transform(func(label, value string) (string, string, error) {
		if to, ok := c.as.FieldLabels[label]; ok {
			return to, value, nil
		}
		return label, value, nil
	})
	if err != nil {
		return opts, fmt.Errorf("renaming field selector labels: %w", err)
	}
	opts.Predicate.Field = sel
	if opts.Predicate.GetAttrs != nil {
		opts.Predicate.GetAttrs = c.as.GetAttrs
	}
	return opts, nil
}

// GetList implements storage.Interface.
func (c *ConvertingStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	opts, err := c.options(opts)
	if err != nil {
		return err
	}
	stored := c.as.NewListFunc()
	// The watch cache may hand its shared objects over instead of filling the list; they
	// are of the stored kind, so this list is filled and converted as usual.
	if err := c.inner.GetList(storage.WithCachedItems(ctx, nil), key, opts, stored); err != nil {
		return err
	}
	items, err := meta.ExtractList(stored)
	if err != nil {
		return fmt.Errorf("reading a stored list: %w", err)
	}
	out := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		conv, err := c.as.FromStored(item)
		if err != nil {
			return fmt.Errorf("converting a stored %T: %w", item, err)
		}
		out = append(out, conv)
	}
	if err := meta.SetList(listObj, out); err != nil {
		return fmt.Errorf("filling a list: %w", err)
	}
	from, err := meta.ListAccessor(stored)
	if err != nil {
		return fmt.Errorf("reading a stored list: %w", err)
	}
	to, err := meta.ListAccessor(listObj)
	if err != nil {
		return fmt.Errorf("filling a list: %w", err)
	}
	to.SetResourceVersion(from.GetResourceVersion())
	to.SetContinue(from.GetContinue())
	to.SetRemainingItemCount(from.GetRemainingItemCount())
	return nil
}

// GuaranteedUpdate implements storage.Interface: tryUpdate sees and returns objects of
// the served kind.
func (c *ConvertingStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc) error {
	stored := c.as.NewFunc()
	err := c.inner.GuaranteedUpdate(ctx, key, stored, ignoreNotFound, preconditions, func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, error) {
		in, err := c.as.FromStored(input)
		if err != nil {
			return nil, fmt.Errorf("converting a stored %T: %w", input, err)
		}
		out, err := tryUpdate(in, res)
		if err != nil {
			return nil, err
		}
		return c.as.ToStored(out)
	})
	if err != nil {
		return err
	}
	return c.into(stored, destination)
}

// Delete implements storage.Interface: validate sees the served kind.
func (c *ConvertingStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validate storage.ValidateObjectFunc) error {
	var check storage.ValidateObjectFunc
	if validate != nil {
		check = func(ctx context.Context, obj runtime.Object) error {
			conv, err := c.as.FromStored(obj)
			if err != nil {
				return fmt.Errorf("converting a stored %T: %w", obj, err)
			}
			return validate(ctx, conv)
		}
	}
	stored := c.as.NewFunc()
	if err := c.inner.Delete(ctx, key, stored, preconditions, check); err != nil {
		return err
	}
	return c.into(stored, out)
}

// Watch implements storage.Interface; the events' objects are converted.
func (c *ConvertingStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	opts, err := c.options(opts)
	if err != nil {
		return nil, err
	}
	inner, err := c.inner.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	w := &convertingWatch{inner: inner, from: c.as.FromStored, stored: reflect.TypeOf(c.as.NewFunc()),
		out: make(chan watch.Event), stop: make(chan struct{})}
	go w.run()
	return w, nil
}

// CurrentResourceVersion implements storage.Interface.
func (c *ConvertingStorage) CurrentResourceVersion(ctx context.Context) (uint64, error) {
	return c.inner.CurrentResourceVersion(ctx)
}

// convertingWatch relays a watch of the stored kind with its objects converted. Its
// goroutine ends when the inner watch ends or Stop is called.
type convertingWatch struct {
	inner  watch.Interface
	from   func(runtime.Object) (runtime.Object, error)
	stored reflect.Type
	out    chan watch.Event
	stop   chan struct{}
	once   sync.Once
}

func (w *convertingWatch) run() {
	defer close(w.out)
	for ev := range w.inner.ResultChan() {
		obj := ev.Object
		// The watch cache sends its shared objects wrapped for their encodings' sake;
		// conversion copies them.
		if co, ok := obj.(*storage.CachingObject); ok {
			obj = co.Shared()
		}
		// Error events carry a Status, not an object of the stored kind.
		if obj != nil && reflect.TypeOf(obj) == w.stored {
			conv, err := w.from(obj)
			if err != nil {
				ev = watch.Event{Type: watch.Error, Object: storageError(err)}
			} else {
				ev.Object = conv
			}
		}
		select {
		case w.out <- ev:
		case <-w.stop:
			return
		}
	}
}

// ResultChan implements watch.Interface.
func (w *convertingWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface.
func (w *convertingWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	w.inner.Stop()
}

// storageError is the Status a watch sends when an object cannot be converted.
func storageError(err error) runtime.Object {
	status := apierrors.NewInternalError(err).ErrStatus
	return &status
}
