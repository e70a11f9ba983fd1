package storage

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wasmplane/wasmplane/core/storage/unstructuredjson"
)

type writtenKey struct{}

// Written holds what a Create under WithWritten stored, when its answer can be written
// from those bytes: a custom object created under WithResultKept whose stored bytes
// decode to exactly the object answered.
type Written struct {
	obj  runtime.Object
	data []byte
	rev  int64
}

// WithWritten asks a Create under ctx to keep what it stored in the Written returned.
func WithWritten(ctx context.Context) (context.Context, *Written) {
	w := &Written{}
	return context.WithValue(ctx, writtenKey{}, w), w
}

func writtenFrom(ctx context.Context) *Written {
	w, _ := ctx.Value(writtenKey{}).(*Written)
	return w
}

// JSON returns obj as JSON, exactly as unstructuredjson.Append writes it followed by a
// newline, from the bytes a Create stored for it: they differ from its JSON only by the
// resourceVersion, which is not stored. False when obj is not the object that Create
// answered with, or nothing was kept (the caller encodes obj then).
func (w *Written) JSON(obj runtime.Object) ([]byte, bool) {
	if w == nil || w.obj == nil || w.obj != obj {
		return nil, false
	}
	return unstructuredjson.AppendWithMember(nil, w.data, "metadata", "resourceVersion", strconv.FormatInt(w.rev, 10))
}
