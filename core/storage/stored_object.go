package storage

import (
	"fmt"
	"sync"
	"sync/atomic"
	"weak"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// storedObject is a cached unstructured object kept as the bytes etcd holds rather than
// decoded. A decoded unstructured object (nested maps of strings) takes about three times
// its JSON size, and the watch cache holds every object of a resource: for custom
// resources, which are unstructured, keeping the bytes divides the cache's memory by
// about three. The decoded form is kept behind a weak pointer, so that everyone who reads
// the object while somebody still uses it (the watchers of one event, the items of a
// list being written) shares one decoding; once nobody does, the garbage collector frees
// it and the next reader decodes again.
type storedObject struct {
	key  string
	data []byte // the etcd value; never modified
	rev  int64
	dec  *Etcd

	decoded atomic.Pointer[weak.Pointer[unstructured.Unstructured]]
	mu      sync.Mutex // serializes decodings, so that concurrent readers share one
}

// newStoredObject keeps data, the value of key at revision rev, with obj, its decoding,
// as the decoded form to start with (it is usually read again right away, by the watchers
// of the event that brought it).
func newStoredObject(s *Etcd, key string, data []byte, rev int64, obj *unstructured.Unstructured) *storedObject {
	so := &storedObject{key: key, data: data, rev: rev, dec: s}
	wp := weak.Make(obj)
	so.decoded.Store(&wp)
	return so
}

// get returns the decoded object, shared and immutable, decoding the bytes if nobody
// holds the last decoding any more.
func (so *storedObject) get() runtime.Object {
	if u := so.live(); u != nil {
		return u
	}
	so.mu.Lock()
	defer so.mu.Unlock()
	if u := so.live(); u != nil {
		return u
	}
	u := &unstructured.Unstructured{}
	if err := so.dec.decode(so.key, so.data, so.rev, u); err != nil {
		// The same bytes were decoded by the same codec when the object was cached: a
		// failure now is a broken invariant, not an input error.
		panic(fmt.Sprintf("storage: decoding cached %s again: %v", so.key, err))
	}
	wp := weak.Make(u)
	so.decoded.Store(&wp)
	return u
}

func (so *storedObject) live() *unstructured.Unstructured {
	if wp := so.decoded.Load(); wp != nil {
		return wp.Value()
	}
	return nil
}
