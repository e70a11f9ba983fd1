// Package storage is wasmplane's object store: Kubernetes objects kept in etcd under
// /registry/<resource>/<namespace>/<name>, with resourceVersion = etcd revision,
// optimistic concurrency, paged lists, and watches (served by a watch cache).
package storage

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// AttrFunc returns the label and field sets a selector is matched against.
type AttrFunc func(obj runtime.Object) (labels.Set, fields.Set, error)

// SelectionPredicate filters objects by label and field selectors, and carries paging.
type SelectionPredicate struct {
	// Label selects by labels; nil or empty matches everything.
	Label labels.Selector
	// Field selects by fields (metadata.name, metadata.namespace, plus what GetAttrs adds).
	Field fields.Selector
	// GetAttrs extracts the sets; nil means metadata.name/metadata.namespace and labels only.
	GetAttrs AttrFunc
	// Limit is the page size of a list (0 = no limit).
	Limit int64
	// Continue is the opaque token of a previous page.
	Continue string
	// AllowWatchBookmarks asks a watch to send BOOKMARK events.
	AllowWatchBookmarks bool
	// CountRemaining says that a page still gives remainingItemCount although Field is
	// not empty: the caller's own selector was empty and Field only hides rare objects
	// (wasmplane's uninitialized ones), so counting them too keeps the count the estimate
	// Kubernetes documents it to be, instead of leaving every paged list without one.
	CountRemaining bool
}

// Empty reports whether the predicate selects everything.
func (p SelectionPredicate) Empty() bool {
	return (p.Label == nil || p.Label.Empty()) && (p.Field == nil || p.Field.Empty())
}

// ListOptions are the storage-level options of a list or watch.
type ListOptions struct {
	// ResourceVersion follows Kubernetes semantics: "" = most recent (consistent),
	// "0" = any (served from cache), N = at least/exactly N according to ResourceVersionMatch;
	// for a watch, events after N.
	ResourceVersion string
	// ResourceVersionMatch is NotOlderThan, Exact, or "" (legacy semantics).
	ResourceVersionMatch metav1.ResourceVersionMatch
	// Predicate selects objects and pages.
	Predicate SelectionPredicate
	// Recursive lists/watches everything under the key as a prefix.
	Recursive bool
	// SendInitialEvents asks a watch to start with ADDED events for the current state,
	// followed by a BOOKMARK annotated "k8s.io/initial-events-end" (client-go's watch-list).
	SendInitialEvents *bool
}

// GetOptions are the storage-level options of a get.
type GetOptions struct {
	// IgnoreNotFound returns a zero object instead of a NotFound error.
	IgnoreNotFound bool
	// ResourceVersion "" = most recent, "0" = any (may come from cache).
	ResourceVersion string
}

// Preconditions must hold on the stored object for an update or delete to happen.
type Preconditions struct {
	// UID must equal the stored object's uid when set.
	UID *types.UID
	// ResourceVersion must equal the stored object's resourceVersion when set.
	ResourceVersion *string
}

// ResponseMeta describes the stored state tryUpdate is called with.
type ResponseMeta struct {
	// ResourceVersion is the revision of the stored object.
	ResourceVersion uint64
}

// UpdateFunc computes the new object from the current one. Returning an error aborts the
// update; it is retried with a fresh object on a concurrent write.
type UpdateFunc func(input runtime.Object, res ResponseMeta) (output runtime.Object, err error)

// ValidateObjectFunc is a last check on the stored object before a delete.
type ValidateObjectFunc func(ctx context.Context, obj runtime.Object) error

// Interface stores objects of one resource. Errors are k8s.io/apimachinery/pkg/api/errors
// values (NotFound, AlreadyExists, Conflict, Gone/Expired, Invalid) naming the resource.
type Interface interface {
	// Create stores obj at key if nothing is there, and decodes the stored object into out.
	// out may be obj itself when the caller has no use for obj once stored: the store
	// then fills it in place (for an unstructured object, without copying its content).
	Create(ctx context.Context, key string, obj, out runtime.Object) error
	// Get decodes the object at key into out.
	Get(ctx context.Context, key string, opts GetOptions, out runtime.Object) error
	// GetList fills listObj (a *XxxList) with the objects under key that match opts.
	GetList(ctx context.Context, key string, opts ListOptions, listObj runtime.Object) error
	// GuaranteedUpdate applies tryUpdate to the current object until the write succeeds
	// without a conflict, and decodes the result into destination.
	GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
		preconditions *Preconditions, tryUpdate UpdateFunc) error
	// Delete removes the object at key if the preconditions and validate hold, and decodes
	// the last state into out.
	Delete(ctx context.Context, key string, out runtime.Object, preconditions *Preconditions,
		validate ValidateObjectFunc) error
	// Watch streams changes under key from opts.ResourceVersion.
	Watch(ctx context.Context, key string, opts ListOptions) (watch.Interface, error)
	// CurrentResourceVersion is the latest revision the store has seen.
	CurrentResourceVersion(ctx context.Context) (uint64, error)
}

// ResourceConfig describes how one resource is stored.
type ResourceConfig struct {
	// GroupResource names the resource in errors.
	GroupResource schema.GroupResource
	// Prefix is the key prefix, e.g. "/registry/pods".
	Prefix string
	// NewFunc returns an empty object (e.g. &corev1.Pod{}).
	NewFunc func() runtime.Object
	// NewListFunc returns an empty list (e.g. &corev1.PodList{}).
	NewListFunc func() runtime.Object
	// Codec encodes objects for etcd and decodes them back.
	Codec runtime.Codec
	// GetAttrs extracts selector fields; nil = DefaultAttrs.
	GetAttrs AttrFunc
}
