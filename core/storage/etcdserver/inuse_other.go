//go:build !unix

package etcdserver

// checkNotInUse is a no-op where flock does not exist.
func checkNotInUse(string) error { return nil }
