package storage

import (
	"bytes"
	"io"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CachingObject wraps a shared, immutable object so that serializers encode it once per
// encoder rather than once per watcher. The JSON, protobuf and versioning serializers of
// apimachinery recognize it (runtime.CacheableObject). Use GetObject for a private copy.
type CachingObject struct {
	obj runtime.Object

	mu  sync.Mutex
	enc map[runtime.Identifier]*encoding
}

type encoding struct {
	once sync.Once
	data []byte
	err  error
}

var _ runtime.CacheableObject = (*CachingObject)(nil)

// NewCachingObject wraps obj, which nobody may mutate afterwards.
func NewCachingObject(obj runtime.Object) *CachingObject { return &CachingObject{obj: obj} }

// CacheEncode implements runtime.CacheableObject: the first call per encoder identifier
// encodes (a private copy, since encoders set the kind on what they are given), later
// calls write the remembered bytes.
func (o *CachingObject) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	o.mu.Lock()
	if o.enc == nil {
		o.enc = make(map[runtime.Identifier]*encoding, 1)
	}
	e := o.enc[id]
	if e == nil {
		e = &encoding{}
		o.enc[id] = e
	}
	o.mu.Unlock()
	e.once.Do(func() {
		var buf bytes.Buffer
		e.err = encode(o.obj.DeepCopyObject(), &buf)
		e.data = buf.Bytes()
	})
	if e.err != nil {
		return e.err
	}
	_, err := w.Write(e.data)
	return err
}

// GetObject implements runtime.CacheableObject: a deep copy the caller owns.
func (o *CachingObject) GetObject() runtime.Object { return o.obj.DeepCopyObject() }

// GetObjectKind returns a copy of the wrapped object's kind, so that setting it on the
// result cannot race with other users of the shared object.
func (o *CachingObject) GetObjectKind() schema.ObjectKind {
	tm := &metav1.TypeMeta{}
	tm.SetGroupVersionKind(o.obj.GetObjectKind().GroupVersionKind())
	return tm
}

// DeepCopyObject returns a deep copy of the wrapped object (unwrapped).
func (o *CachingObject) DeepCopyObject() runtime.Object { return o.obj.DeepCopyObject() }

// shared is the wrapped object itself, for read-only use inside the package.
func (o *CachingObject) shared() runtime.Object { return o.obj }
