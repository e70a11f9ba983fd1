// The integration tests prove wasmplane's API compatibility with client-go: every resource
// through the typed clientset in protobuf and JSON, informers across restarts and
// compaction, paging, optimistic concurrency, bad input over raw HTTP, and durability of
// the real binary across kill -9.

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// mode is one wire encoding a client-go user can end up with.
type mode struct {
	name string
	json bool
}

// modes: client-go's default (it negotiates protobuf for built-in types) and JSON only.
var modes = []mode{{"protobuf", false}, {"json", true}}

// ctxFor is a per-test context that ends with the test.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newNamespace creates a namespace with a readable unique name.
func newNamespace(t *testing.T, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(ctxFor(t), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: strings.ToLower(prefix) + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}
