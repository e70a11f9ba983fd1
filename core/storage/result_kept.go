package storage

import "context"

type resultKeptKey struct{}

// WithResultKept tells a Cacher's Create under ctx that its caller changes neither the
// object it writes nor the one it gets back once Create returns, but only reads them: the
// cache may then share their content with the object it keeps, rather than copy it.
func WithResultKept(ctx context.Context) context.Context {
	return context.WithValue(ctx, resultKeptKey{}, true)
}

func resultKept(ctx context.Context) bool {
	kept, _ := ctx.Value(resultKeptKey{}).(bool)
	return kept
}
