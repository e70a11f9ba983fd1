// Package controllerref implements ControllerRef adoption and release, shared by the
// ReplicaSet controller (which claims pods) and the Deployment controller (which claims
// ReplicaSets): an owner adopts orphans its selector matches and releases the objects it owns
// whose labels no longer match.
package controllerref

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Manager claims objects of type T for one owner.
type Manager[T metav1.Object] struct {
	// Owner is the controller object (as read from the cache).
	Owner metav1.Object
	// Kind is the owner's group/version/kind, written into ownerReferences.
	Kind schema.GroupVersionKind
	// Selector is the owner's label selector.
	Selector labels.Selector
	// CanAdopt re-reads the owner with a quorum read and fails when it is being deleted, so
	// that a stale cache never lets a dying owner adopt (and then take down) new objects.
	CanAdopt func(ctx context.Context) error
	// Patch applies a strategic-merge patch to the named object.
	Patch func(ctx context.Context, name string, patch []byte) error

	once     sync.Once
	adoptErr error
}

// Claim returns the objects the owner should manage, adopting and releasing as needed.
func (m *Manager[T]) Claim(ctx context.Context, objs []T) ([]T, error) {
	var claimed []T
	var errs []error
	for _, obj := range objs {
		ok, err := m.claimOne(ctx, obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			claimed = append(claimed, obj)
		}
	}
	if len(errs) > 0 {
		return claimed, fmt.Errorf("claiming objects for %s: %w", m.Owner.GetName(), joinErrs(errs))
	}
	return claimed, nil
}

func (m *Manager[T]) claimOne(ctx context.Context, obj T) (bool, error) {
	match := m.Selector.Matches(labels.Set(obj.GetLabels()))
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		if ref.UID != m.Owner.GetUID() {
			return false, nil // someone else's
		}
		if match {
			return true, nil
		}
		// Ours but no longer selected: let it go, unless we are going away anyway (then the
		// garbage collector decides what happens to it).
		if m.Owner.GetDeletionTimestamp() != nil {
			return false, nil
		}
		if err := m.Patch(ctx, obj.GetName(), ReleasePatch(m.Owner.GetUID(), obj.GetUID())); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
				return false, nil // gone, or changed under us: the next sync looks again
			}
			return false, fmt.Errorf("releasing %s: %w", obj.GetName(), err)
		}
		return false, nil
	}
	// An orphan.
	if !match || m.Owner.GetDeletionTimestamp() != nil || obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	if obj.GetNamespace() != m.Owner.GetNamespace() {
		return false, nil
	}
	m.once.Do(func() {
		if m.CanAdopt != nil {
			m.adoptErr = m.CanAdopt(ctx)
		}
	})
	if m.adoptErr != nil {
		return false, fmt.Errorf("cannot adopt %s: %w", obj.GetName(), m.adoptErr)
	}
	patch, err := AdoptPatch(m.Owner, m.Kind, obj.GetUID())
	if err != nil {
		return false, err
	}
	if err := m.Patch(ctx, obj.GetName(), patch); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
			return false, nil
		}
		return false, fmt.Errorf("adopting %s: %w", obj.GetName(), err)
	}
	return true, nil
}

// NewControllerRef returns a controller ownerReference to owner that blocks its deletion.
func NewControllerRef(owner metav1.Object, gvk schema.GroupVersionKind) *metav1.OwnerReference {
	t := true
	return &metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.GetName(), UID: owner.GetUID(),
		Controller: &t, BlockOwnerDeletion: &t,
	}
}

// AdoptPatch is a strategic-merge patch adding a controller reference to owner; the object's
// own UID is included so that the patch fails on a recreated object of the same name.
func AdoptPatch(owner metav1.Object, gvk schema.GroupVersionKind, uid types.UID) ([]byte, error) {
	p := map[string]any{"metadata": map[string]any{
		"ownerReferences": []*metav1.OwnerReference{NewControllerRef(owner, gvk)},
		"uid":             uid,
	}}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding adoption patch: %w", err)
	}
	return b, nil
}

// ReleasePatch is a strategic-merge patch removing the reference to ownerUID.
func ReleasePatch(ownerUID, uid types.UID) []byte {
	return fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"uid":%q}}`, ownerUID, uid)
}

func joinErrs(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("%w (and %d more)", errs[0], len(errs)-1)
}

// Recheck returns a CanAdopt for owner (of kind) that re-reads it through get and fails
// when it was recreated under the same name or is being deleted.
func Recheck[T metav1.Object](owner metav1.Object, kind string, get func(ctx context.Context) (T, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		fresh, err := get(ctx)
		if err != nil {
			return fmt.Errorf("re-reading %s: %w", kind, err)
		}
		if fresh.GetUID() != owner.GetUID() {
			return fmt.Errorf("%s %s/%s was recreated (uid %s, want %s)", kind, owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
		}
		if fresh.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%s %s/%s is being deleted", kind, owner.GetNamespace(), owner.GetName())
		}
		return nil
	}
}

// PodPatcher returns a Manager's Patch for the pods of namespace ns.
func PodPatcher(client kubernetes.Interface, ns string) func(ctx context.Context, name string, patch []byte) error {
	return func(ctx context.Context, name string, patch []byte) error {
		_, err := client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	}
}

// Resolve returns the owner ref names, read by get from the informer's cache, if ref is a
// controller reference of kind gvk and the cached owner has ref's UID (an owner deleted
// and created again under the same name is another owner).
func Resolve[T metav1.Object](ref *metav1.OwnerReference, gvk schema.GroupVersionKind, get func(name string) (T, error)) (T, bool) {
	var zero T
	if ref == nil || ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() {
		return zero, false
	}
	owner, err := get(ref.Name)
	if err != nil || owner.GetUID() != ref.UID {
		return zero, false
	}
	return owner, true
}

// Selecting returns the owners whose non-empty selector matches set: the candidates to
// adopt an orphan with those labels.
func Selecting[T any](owners []T, selector func(T) *metav1.LabelSelector, set labels.Set) []T {
	var out []T
	for _, o := range owners {
		sel, err := metav1.LabelSelectorAsSelector(selector(o))
		if err != nil || sel.Empty() || !sel.Matches(set) {
			continue
		}
		out = append(out, o)
	}
	return out
}
