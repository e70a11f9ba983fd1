package testserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/kubelet"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/runtime/cri/wasi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// StartWASINode runs the built-in WASI runtime holding the named example workloads (from
// modules, as RunWithWorkloads built them, tagged NAME:latest) and a kubelet registered
// as node-1 against s, with a quick resync so tests see pod status promptly. Both stop
// when the test ends.
func StartWASINode(t testing.TB, s *Server, modules map[string]string, images ...string) {
	t.Helper()
	StartNamedWASINode(t, s, "node-1", modules, images...)
}

// StartNamedWASINode is StartWASINode for a node called name, so that a test can run
// several nodes (each with its own runtime, kubelet and free port).
func StartNamedWASINode(t testing.TB, s *Server, name string, modules map[string]string, images ...string) {
	t.Helper()
	root := t.TempDir()
	// A short socket path: unix sockets are limited to ~108 bytes.
	sockDir, err := os.MkdirTemp("", "wp-cri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	rt, err := wasi.Serve(context.Background(), wasi.Config{Socket: filepath.Join(sockDir, "cri.sock"), RootDir: filepath.Join(root, "runtime"), Logger: Logger()})
	if err != nil {
		t.Fatalf("starting the WASI runtime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	for _, name := range images {
		if _, err := rt.Images().ImportFile(context.Background(), modules[name], name+":latest"); err != nil {
			t.Fatalf("importing %s: %v", name, err)
		}
	}
	// The kubelet trusts client certificates of the cluster CA, as `up` and agents set it up.
	caFile := filepath.Join(root, "ca.crt")
	if err := os.WriteFile(caFile, s.CA(), 0o600); err != nil {
		t.Fatal(err)
	}
	stop, err := server.StartNode(context.Background(), server.NodeConfig{RESTConfig: s.Config(false), NodeName: name,
		RootDir: filepath.Join(root, "node"), RuntimeEndpoint: rt.Endpoint(), Port: -1, Logger: Logger(),
		KubeletTLS: server.KubeletTLS{ClientCAFile: caFile},
		Tune:       func(c *kubelet.Config) { c.ResyncPeriod, c.StatusUpdateFrequency = 2*time.Second, time.Second }})
	if err != nil {
		t.Fatalf("starting the kubelet: %v", err)
	}
	t.Cleanup(stop)
}

// ReadyNodes counts the nodes whose Ready condition is true.
func ReadyNodes(ctx context.Context, cs kubernetes.Interface) (int, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, node := range list.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}
