package storage

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CachingObject wraps a shared, immutable object so that serializers encode it once per
// encoder rather than once per watcher. The JSON, protobuf and versioning serializers of
// apimachinery recognize it (runtime.CacheableObject). Use GetObject for a private copy.
type CachingObject struct {
	obj runtime.Object
	// stored, when set, replaces obj: the object is kept as its stored (etcd) bytes and
	// decoded when read (see newStoredObject).
	stored *storedObject

	// first is the first encoder's encoding, read without a lock: almost every object is
	// only ever encoded by one encoder (protobuf, which client-go and the in-process clients
	// speak), and the 1,000 watchers of one event would otherwise queue on mu, and every
	// cached object would carry a map.
	first atomic.Pointer[encoding]

	mu  sync.Mutex
	enc map[runtime.Identifier]*encoding // the other encoders' encodings

	view atomic.Pointer[view] // see View
}

type encoding struct {
	id   runtime.Identifier
	once sync.Once
	done atomic.Bool // set once data and err are final
	data []byte
	err  error
}

var _ runtime.CacheableObject = (*CachingObject)(nil)

// NewCachingObject wraps obj, which nobody may mutate afterwards.
func NewCachingObject(obj runtime.Object) *CachingObject { return &CachingObject{obj: obj} }

// lookup returns the encoding entry of id, creating it when create is set (else nil).
func (o *CachingObject) lookup(id runtime.Identifier, create bool) *encoding {
	if f := o.first.Load(); f != nil && f.id == id {
		return f
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if f := o.first.Load(); f != nil && f.id == id {
		return f
	}
	if e := o.enc[id]; e != nil || !create {
		return e
	}
	e := &encoding{id: id}
	if o.first.Load() == nil {
		o.first.Store(e)
		return e
	}
	if o.enc == nil {
		o.enc = make(map[runtime.Identifier]*encoding, 1)
	}
	o.enc[id] = e
	return e
}

// object is the wrapped object, decoding it first if it is kept as stored bytes.
func (o *CachingObject) object() runtime.Object {
	if o.stored != nil {
		return o.stored.get()
	}
	return o.obj
}

// CacheEncode implements runtime.CacheableObject: the first call per encoder identifier
// encodes (a private copy, since encoders set the kind on what they are given), later
// calls write the remembered bytes.
func (o *CachingObject) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	e := o.lookup(id, true)
	e.once.Do(func() {
		var buf bytes.Buffer
		e.err = encode(o.object().DeepCopyObject(), &buf)
		e.data = buf.Bytes()
		e.done.Store(true)
	})
	if e.err != nil {
		return e.err
	}
	_, err := w.Write(e.data)
	return err
}

// Encoded returns what CacheEncode wrote for the encoder id, if it has already run: a list
// response reuses the bytes its watchers got without making the object keep bytes for
// every encoder a list is asked in. The bytes are shared: nobody may modify them.
func (o *CachingObject) Encoded(id runtime.Identifier) ([]byte, bool) {
	e := o.lookup(id, false)
	if e == nil || !e.done.Load() || e.err != nil {
		return nil, false
	}
	return e.data, true
}

// listItemJSON identifies, among an object's encodings, its JSON as an item of a list.
const listItemJSON runtime.Identifier = "wasmplane:list-item-json"

// ListItemJSON returns the object as encoding/json writes it among a typed list's items
// (what the JSON serializer writes for the item: no encoder sets its kind), computed
// once per object version, so that a LIST answered in JSON from the cache does not
// encode every item again. The bytes are shared: nobody may modify them. The price is
// that the object keeps them in memory as long as it is cached.
func (o *CachingObject) ListItemJSON() ([]byte, error) {
	e := o.lookup(listItemJSON, true)
	e.once.Do(func() {
		// Marshalling only reads the shared object.
		e.data, e.err = json.Marshal(o.object())
		e.done.Store(true)
	})
	return e.data, e.err
}

// GetObject implements runtime.CacheableObject: a deep copy the caller owns.
func (o *CachingObject) GetObject() runtime.Object { return o.object().DeepCopyObject() }

// GetObjectKind returns a copy of the wrapped object's kind, so that setting it on the
// result cannot race with other users of the shared object.
func (o *CachingObject) GetObjectKind() schema.ObjectKind {
	tm := &metav1.TypeMeta{}
	tm.SetGroupVersionKind(o.object().GetObjectKind().GroupVersionKind())
	return tm
}

// DeepCopyObject returns a deep copy of the wrapped object (unwrapped).
func (o *CachingObject) DeepCopyObject() runtime.Object { return o.object().DeepCopyObject() }

// shared is the wrapped object itself, for read-only use inside the package.
func (o *CachingObject) shared() runtime.Object { return o.object() }

// Shared returns the wrapped object itself, without a copy, for callers that only read it
// (its type, or to marshal it); nobody may mutate it.
func (o *CachingObject) Shared() runtime.Object { return o.object() }

// StoredJSON returns the bytes etcd holds for the object and its revision, when the cache
// keeps it as stored JSON (custom resources, see storedObject): a JSON response can carry
// them as they are, once the resourceVersion (never stored) is put back. ok is false for
// objects kept decoded.
func (o *CachingObject) StoredJSON() (data []byte, rev int64, ok bool) {
	if o.stored == nil || len(o.stored.data) == 0 || o.stored.data[0] != '{' {
		return nil, 0, false
	}
	return o.stored.data, o.stored.rev, true
}

// StoredAPIVersion returns the apiVersion of an object kept as stored JSON, read from the
// bytes without decoding them, when the JSON opens with it as a plain string (every
// writer of sorted keys puts it first). ok is false otherwise; the caller then reads the
// decoded object.
func (o *CachingObject) StoredAPIVersion() (apiVersion string, ok bool) {
	data, _, ok := o.StoredJSON()
	if !ok {
		return "", false
	}
	return leadingAPIVersion(data)
}

// leadingAPIVersion reads `{"apiVersion":"V"` followed by `,` or `}` at the start of
// data: V must need no unescaping.
func leadingAPIVersion(data []byte) (string, bool) {
	const prefix = `{"apiVersion":"`
	if !bytes.HasPrefix(data, []byte(prefix)) {
		return "", false
	}
	rest := data[len(prefix):]
	for i, c := range rest {
		switch {
		case c == '"':
			if i+1 < len(rest) && (rest[i+1] == ',' || rest[i+1] == '}') {
				return string(rest[:i]), true
			}
			return "", false
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", false
		}
	}
	return "", false
}

// view is what a reader made of a cached object under a token (see View).
type view struct {
	token any
	obj   *CachingObject // the object itself when the reader changed nothing
}

// View returns the object as the reader identified by token serves it: rewrite gets the
// shared object (which it must not modify) and returns nil when it serves it as it is,
// or the object it serves instead. The answer is remembered on the object for the latest
// token, so that a reader whose rewriting depends on slowly changing state (a custom
// resource's schema, which prunes and defaults objects stored before it changed) pays
// for it once per object and state, and keeps sharing the object's encodings afterwards.
// A rewritten object of a kept-as-bytes object is kept as its bytes too.
func (o *CachingObject) View(token any, rewrite func(shared runtime.Object) runtime.Object) *CachingObject {
	if v := o.view.Load(); v != nil && v.token == token {
		return v.obj
	}
	out := o
	if n := rewrite(o.object()); n != nil {
		out = o.rewritten(n)
	}
	o.view.Store(&view{token: token, obj: out})
	return out
}

// rewritten wraps n, which replaces o in a view.
func (o *CachingObject) rewritten(n runtime.Object) *CachingObject {
	u, ok := n.(*unstructured.Unstructured)
	if o.stored == nil || !ok {
		return NewCachingObject(n)
	}
	// Kept as the bytes etcd would hold for it: without the resourceVersion (the
	// revision), which readers put back.
	c := u.DeepCopy()
	c.SetResourceVersion("")
	data, err := json.Marshal(c.Object)
	if err != nil {
		return NewCachingObject(n)
	}
	return &CachingObject{stored: newStoredObject(o.stored.dec, o.stored.key, data, o.stored.rev, u)}
}
