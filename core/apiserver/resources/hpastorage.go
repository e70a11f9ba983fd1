package resources

import (
	"context"
	"fmt"

	"github.com/wasmplane/wasmplane/core/api/hpaconv"
	"github.com/wasmplane/wasmplane/core/storage"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// hpaV1Storage serves autoscaling/v1 HorizontalPodAutoscalers from the storage of the
// v2 ones, converting every object on its way in and out, so that both versions are
// views of the same objects, as in Kubernetes.
type hpaV1Storage struct {
	inner storage.Interface
}

var _ storage.Interface = (*hpaV1Storage)(nil)

func toV2(obj runtime.Object) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	h, ok := obj.(*autoscalingv1.HorizontalPodAutoscaler)
	if !ok {
		return nil, fmt.Errorf("autoscaling/v1 storage: unexpected %T", obj)
	}
	return hpaconv.ToV2(h)
}

// intoV1 converts the stored object from into out, an *autoscalingv1.HorizontalPodAutoscaler.
func intoV1(from runtime.Object, out runtime.Object) error {
	h, ok := from.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok {
		return fmt.Errorf("autoscaling/v1 storage: unexpected stored %T", from)
	}
	v1, err := hpaconv.ToV1(h)
	if err != nil {
		return err
	}
	dst, ok := out.(*autoscalingv1.HorizontalPodAutoscaler)
	if !ok {
		return fmt.Errorf("autoscaling/v1 storage: unexpected %T", out)
	}
	*dst = *v1
	return nil
}

// Create implements storage.Interface.
func (s *hpaV1Storage) Create(ctx context.Context, key string, obj, out runtime.Object) error {
	in, err := toV2(obj)
	if err != nil {
		return err
	}
	stored := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := s.inner.Create(ctx, key, in, stored); err != nil {
		return err
	}
	return intoV1(stored, out)
}

// Get implements storage.Interface.
func (s *hpaV1Storage) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	stored := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := s.inner.Get(ctx, key, opts, stored); err != nil {
		return err
	}
	return intoV1(stored, out)
}

// GetList implements storage.Interface.
func (s *hpaV1Storage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	list, ok := listObj.(*autoscalingv1.HorizontalPodAutoscalerList)
	if !ok {
		return fmt.Errorf("autoscaling/v1 storage: unexpected %T", listObj)
	}
	stored := &autoscalingv2.HorizontalPodAutoscalerList{}
	// The watch cache must not hand its shared (v2) objects to the caller's encoder.
	if err := s.inner.GetList(storage.WithCachedItems(ctx, nil), key, opts, stored); err != nil {
		return err
	}
	list.ListMeta = stored.ListMeta
	list.Items = make([]autoscalingv1.HorizontalPodAutoscaler, len(stored.Items))
	for i := range stored.Items {
		if err := intoV1(&stored.Items[i], &list.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// GuaranteedUpdate implements storage.Interface.
func (s *hpaV1Storage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc) error {
	stored := &autoscalingv2.HorizontalPodAutoscaler{}
	err := s.inner.GuaranteedUpdate(ctx, key, stored, ignoreNotFound, preconditions, func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, error) {
		cur := &autoscalingv1.HorizontalPodAutoscaler{}
		if err := intoV1(input, cur); err != nil {
			return nil, err
		}
		out, err := tryUpdate(cur, res)
		if err != nil || out == nil {
			return out, err
		}
		return toV2(out)
	})
	if err != nil {
		return err
	}
	return intoV1(stored, destination)
}

// Delete implements storage.Interface.
func (s *hpaV1Storage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions, validate storage.ValidateObjectFunc) error {
	stored := &autoscalingv2.HorizontalPodAutoscaler{}
	var check storage.ValidateObjectFunc
	if validate != nil {
		check = func(ctx context.Context, obj runtime.Object) error {
			cur := &autoscalingv1.HorizontalPodAutoscaler{}
			if err := intoV1(obj, cur); err != nil {
				return err
			}
			return validate(ctx, cur)
		}
	}
	if err := s.inner.Delete(ctx, key, stored, preconditions, check); err != nil {
		return err
	}
	return intoV1(stored, out)
}

// Watch implements storage.Interface.
func (s *hpaV1Storage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.inner.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		obj := e.Object
		if co, ok := obj.(runtime.CacheableObject); ok {
			obj = co.GetObject()
		}
		if _, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); !ok {
			// An ERROR event's Status.
			e.Object = obj
			return e, true
		}
		// Bookmarks too: the client decodes them as the watched kind.
		cur := &autoscalingv1.HorizontalPodAutoscaler{}
		if err := intoV1(obj, cur); err != nil {
			return watch.Event{Type: watch.Error, Object: &apierrors.NewInternalError(err).ErrStatus}, true
		}
		e.Object = cur
		return e, true
	}), nil
}

// CurrentResourceVersion implements storage.Interface.
func (s *hpaV1Storage) CurrentResourceVersion(ctx context.Context) (uint64, error) {
	return s.inner.CurrentResourceVersion(ctx)
}
