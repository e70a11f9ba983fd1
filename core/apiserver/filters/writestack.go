package filters

import "net/http"

// writeStackBytes is about the stack a write (create, update, patch) of a custom object
// or a ConfigMap reaches: structured-merge-diff's walks for managedFields, validation and
// storage nest deep below the filters and handlers.
const writeStackBytes = 24 << 10

// WithWriteStack grows the stack of a write request's goroutine once, before the filters
// run. An HTTP/2 request runs on a new goroutine whose stack starts small, and the
// runtime doubles it each time a call does not fit, copying the stack and adjusting
// every frame on it: a write grew it two or three times, the last copies deep inside
// structured-merge-diff with the most frames to adjust (≈ 50 µs per create of the crd
// bench in a CPU profile, for custom objects and ConfigMaps alike). Growing it here,
// where only net/http's frames are below, copies little. Reads, watches above all,
// keep the small stack they need.
func WithWriteStack(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			growStack()
		}
		h.ServeHTTP(w, req)
	})
}

// growStack calls with a frame of writeStackBytes, which makes the runtime grow the
// stack to fit it; the grown stack stays for the rest of the request.
//
//go:noinline
func growStack() {
	var frame [writeStackBytes]byte
	useFrame(frame[:])
}

// useFrame keeps growStack's frame from being optimized away.
//
//go:noinline
func useFrame([]byte) {}
