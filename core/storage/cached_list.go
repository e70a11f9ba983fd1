package storage

import "context"

// CachedItems receives the shared cached objects of a list the watch cache serves, instead
// of copies of them in the list's Items. A response encoder that understands it writes each
// object's remembered serialization (the bytes its watchers already got) rather than copying
// and encoding every item of every page again; see WithCachedItems.
type CachedItems struct {
	// Served is true when the cache answered: Items are the list's items, in order, and the
	// list object passed to GetList has only its metadata set. When false the list object
	// holds the items as usual (etcd answered).
	Served bool
	// Items are the cached objects, shared: nobody may mutate them.
	Items []*CachingObject
}

type cachedItemsKey struct{}

// WithCachedItems asks a Cacher's GetList under ctx to hand its items over in ci.
func WithCachedItems(ctx context.Context, ci *CachedItems) context.Context {
	return context.WithValue(ctx, cachedItemsKey{}, ci)
}

func cachedItemsFrom(ctx context.Context) *CachedItems {
	ci, _ := ctx.Value(cachedItemsKey{}).(*CachedItems)
	return ci
}

// CachedItemsFrom returns the CachedItems a caller asked for under ctx (see
// WithCachedItems), or nil: a storage layer that wraps a Cacher passes the request on.
func CachedItemsFrom(ctx context.Context) *CachedItems { return cachedItemsFrom(ctx) }
