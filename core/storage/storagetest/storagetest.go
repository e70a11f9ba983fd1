// Package storagetest starts what tests of the storage layer and above need: an embedded
// etcd of their own, with a client.
package storagetest

import (
	"context"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/etcdserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Client starts an embedded etcd in a temporary directory of tb and returns a client of
// it; both are closed when tb ends.
func Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := etcdserver.Start(ctx, etcdserver.Config{DataDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Close)
	client, err := storage.NewClient(storage.ClientConfig{Endpoints: srv.Endpoints()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = client.Close() })
	return client
}
