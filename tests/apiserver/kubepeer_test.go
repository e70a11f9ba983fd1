package apiserver

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/wasmplane/wasmplane/tests/internal/peers"
)

// startKubeAPIServer starts etcd and kube-apiserver v1.37.2 from the peers directory for a
// side-by-side comparison and returns a client config for it; both stop when the test
// ends. It returns false, having logged why, when the binaries are not there: the
// comparison is optional, wasmplane's own assertions are not.
func startKubeAPIServer(t *testing.T) (*rest.Config, bool) {
	t.Helper()
	dir := peers.DefaultDir()
	if !peers.Available(dir, "etcd", "kube-apiserver") {
		t.Logf("no kube-apiserver in %s to compare with (set WASMPLANE_PEERS)", dir)
		return nil, false
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kube, err := peers.Start(ctx, peers.Options{Dir: dir, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(kube.Stop)
	cfg, err := kube.RESTConfig()
	if err != nil {
		t.Fatalf("kube-apiserver client config: %v", err)
	}
	return cfg, true
}
