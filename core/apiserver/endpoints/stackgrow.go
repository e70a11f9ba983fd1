package endpoints

// writeStackBytes is about the stack a write (create, update, patch) of a custom object
// or a ConfigMap reaches: structured-merge-diff's walks for managedFields, validation and
// storage nest deep below the HTTP/2 handler, filters and handler frames.
const writeStackBytes = 24 << 10

// growStack makes the goroutine's stack big enough for a write before the write starts.
// A request's goroutine starts with a small stack, and the runtime doubles it each time a
// call does not fit, copying the whole stack each time; a write grew it two or three
// times, the last copies deep inside structured-merge-diff with the most to copy
// (a CPU profile of creates showed ≈ 50 µs of stack copying per create). Growing it
// once here, while the stack is shallow, copies little.
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
