package scheduler

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestEnsureNamespaceWithoutCreateRight is a scheduler running as system:kube-scheduler,
// which may read namespaces but not create them: an existing namespace is enough, a
// missing one is created when allowed, and a refused create of a missing one is an error.
func TestEnsureNamespaceWithoutCreateRight(t *testing.T) {
	forbidCreate := func(cs *fake.Clientset) {
		cs.PrependReactor("create", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", nil)
		})
	}
	ctx := context.Background()

	existing := fake.NewClientset(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}})
	forbidCreate(existing)
	if err := ensureNamespace(ctx, existing, "kube-system"); err != nil {
		t.Fatalf("existing namespace, create forbidden: %v", err)
	}

	missing := fake.NewClientset()
	if err := ensureNamespace(ctx, missing, "kube-system"); err != nil {
		t.Fatalf("missing namespace: %v", err)
	}
	if _, err := missing.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Fatalf("the namespace was not created: %v", err)
	}

	refused := fake.NewClientset()
	forbidCreate(refused)
	if err := ensureNamespace(ctx, refused, "kube-system"); !apierrors.IsForbidden(err) {
		t.Fatalf("missing namespace, create forbidden: err = %v, want Forbidden", err)
	}
}
