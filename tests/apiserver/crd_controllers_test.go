package apiserver

import (
	"context"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestControllersOnCustomResources checks the controllers that work by discovery see a
// CRD created while they run: the garbage collector deletes a ConfigMap owned by a custom
// object and a custom object owned by a ConfigMap, and deleting a namespace deletes its
// custom objects.
func TestControllersOnCustomResources(t *testing.T) {
	srv := testserver.Start(t)
	e := newCRDEnv(t, srv)
	cs := srv.Clientset(t, true)
	ctx := context.Background()
	e.establish(t, widgetsCRD())
	gone := func(what string, get func() error) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			return apierrors.IsNotFound(get()), nil
		})
		if err != nil {
			t.Fatalf("%s not deleted: %v", what, err)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gc"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A custom object owns a ConfigMap.
	w := widget("owner", map[string]any{"immutableID": "o"})
	w.SetNamespace("gc")
	owner, err := e.dyn.Resource(widgetsResource).Namespace("gc").Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: "gc", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "example.com/v1", Kind: "Widget", Name: owner.GetName(), UID: owner.GetUID()}}}}
	if _, err := cs.CoreV1().ConfigMaps("gc").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.dyn.Resource(widgetsResource).Namespace("gc").Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone("ConfigMap owned by a deleted Widget", func() error {
		_, err := cs.CoreV1().ConfigMaps("gc").Get(ctx, "owned", metav1.GetOptions{})
		return err
	})

	// A ConfigMap owns a custom object.
	parent, err := cs.CoreV1().ConfigMaps("gc").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	child := widget("child", map[string]any{"immutableID": "c"})
	child.SetNamespace("gc")
	child.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: parent.Name, UID: parent.UID}})
	if _, err := e.dyn.Resource(widgetsResource).Namespace("gc").Create(ctx, child, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("gc").Delete(ctx, "parent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone("Widget owned by a deleted ConfigMap", func() error {
		_, err := e.dyn.Resource(widgetsResource).Namespace("gc").Get(ctx, "child", metav1.GetOptions{})
		return err
	})

	// Namespace deletion removes custom objects (found through discovery).
	left := widget("left", map[string]any{"immutableID": "l"})
	left.SetNamespace("gc")
	if _, err := e.dyn.Resource(widgetsResource).Namespace("gc").Create(ctx, left, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "gc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone("namespace with a custom object", func() error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "gc", metav1.GetOptions{})
		return err
	})
	if _, err := e.dyn.Resource(widgetsResource).Namespace("gc").Get(ctx, "left", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("custom object survived its namespace: %v", err)
	}
}
