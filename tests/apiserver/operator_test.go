// The operator test runs an operator written with controller-runtime (tests/operator/widgets)
// against an in-process wasmplane running its whole control plane: the manager's caches
// and informers, leader election on a Lease, a reconciler that server-side applies an
// owned ConfigMap, writes status through the status subresource, records events and
// holds a finalizer, and the garbage collector deleting what a deleted Widget owned.

package apiserver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"github.com/wasmplane/wasmplane/tests/operator/widgets"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, widgets.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// startOperator installs the CRD and runs the operator's manager until the test ends.
func startOperator(t *testing.T, srv *testserver.Server, scheme *runtime.Scheme, c client.Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := widgets.InstallCRD(ctx, c); err != nil {
		cancel()
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(srv.Config(true), ctrl.Options{
		Scheme: scheme,
		Logger: logr.FromSlogHandler(testserver.Logger().Handler()),
		// Nothing scrapes the test's operator; a fixed port would collide with others.
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		LeaderElection:                true,
		LeaderElectionID:              widgets.Name,
		LeaderElectionNamespace:       metav1.NamespaceDefault,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		cancel()
		t.Fatalf("creating the manager: %v", err)
	}
	r := &widgets.Reconciler{Client: mgr.GetClient(), Scheme: scheme, Recorder: mgr.GetEventRecorder(widgets.Name)}
	if err := r.SetupWithManager(mgr); err != nil {
		cancel()
		t.Fatalf("registering the reconciler: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the manager stopped with: %v", err)
		}
	})
}

// TestWidgetOperator follows one Widget from creation to deletion through the operator.
func TestWidgetOperator(t *testing.T) {
	srv := testserver.Start(t)
	scheme := newScheme(t)
	c, err := client.New(srv.Config(true), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs := srv.Clientset(t, false)
	ctx := context.Background()
	startOperator(t, srv, scheme, c)

	waitfor.NoError(t, 30*time.Second, "the operator holds its leader election lease", func(ctx context.Context) error {
		l, err := cs.CoordinationV1().Leases(metav1.NamespaceDefault).Get(ctx, widgets.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil {
			return fmt.Errorf("lease %+v has no holder", l.Spec)
		}
		return nil
	})

	const ns = "widgets"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &widgets.Widget{ObjectMeta: metav1.ObjectMeta{Name: "gear", Namespace: ns}, Spec: widgets.WidgetSpec{Replicas: 2, Message: "hi"}}
	if err := c.Create(ctx, w); err != nil {
		t.Fatalf("creating the Widget: %v", err)
	}
	cmName := widgets.ConfigMapName(w.Name)
	// reconciled waits until the operator has caught up with spec: ConfigMap and status.
	reconciled := func(replicas int32) *corev1.ConfigMap {
		t.Helper()
		var cm *corev1.ConfigMap
		waitfor.NoError(t, 30*time.Second, fmt.Sprintf("the Widget reconciled to %d replicas", replicas), func(ctx context.Context) error {
			var got widgets.Widget
			if err := c.Get(ctx, client.ObjectKeyFromObject(w), &got); err != nil {
				return err
			}
			if got.Status.ObservedGeneration != got.Generation || got.Status.Replicas != replicas || got.Status.ConfigMap != cmName {
				return fmt.Errorf("generation %d, status %+v", got.Generation, got.Status)
			}
			var err error
			if cm, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{}); err != nil {
				return err
			}
			if cm.Data["replicas"] != fmt.Sprint(replicas) {
				return fmt.Errorf("ConfigMap data %v", cm.Data)
			}
			return nil
		})
		return cm
	}

	cm := reconciled(2)
	owner := metav1.GetControllerOf(cm)
	if owner == nil || owner.Kind != "Widget" || owner.Name != w.Name || owner.BlockOwnerDeletion == nil || !*owner.BlockOwnerDeletion {
		t.Fatalf("the ConfigMap's controller is %+v, want the Widget blocking its deletion", owner)
	}
	var applied bool
	for _, e := range cm.ManagedFields {
		applied = applied || (e.Manager == widgets.Name && e.Operation == metav1.ManagedFieldsOperationApply)
	}
	if !applied {
		t.Fatalf("the ConfigMap's field managers are %+v, want %s by Apply", cm.ManagedFields, widgets.Name)
	}
	var got widgets.Widget
	if err := c.Get(ctx, client.ObjectKeyFromObject(w), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 1 || got.Finalizers[0] != widgets.Finalizer {
		t.Fatalf("the Widget's finalizers are %v, want %s", got.Finalizers, widgets.Finalizer)
	}

	// An update of spec is reconciled; status follows the new generation.
	got.Spec.Replicas = 5
	if err := c.Update(ctx, &got); err != nil {
		t.Fatalf("updating the Widget: %v", err)
	}
	reconciled(5)

	// A ConfigMap deleted behind the operator's back is put back: the manager watches what
	// the Widgets own.
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, cmName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.NoError(t, 30*time.Second, "the deleted ConfigMap comes back", func(ctx context.Context) error {
		back, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
		if err == nil && back.UID == cm.UID {
			return errors.New("still the old ConfigMap")
		}
		return err
	})

	waitfor.NoError(t, 30*time.Second, "the operator's events are listed", func(ctx context.Context) error {
		return hasEvent(ctx, cs.EventsV1().Events(ns), w.Name, "Reconciled", 2)
	})

	if err := c.Delete(ctx, &got); err != nil {
		t.Fatalf("deleting the Widget: %v", err)
	}
	waitfor.NoError(t, 30*time.Second, "the finalizer is removed and the Widget goes", func(ctx context.Context) error {
		err := c.Get(ctx, client.ObjectKeyFromObject(w), &widgets.Widget{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (get: %v)", err)
	})
	waitfor.NoError(t, 30*time.Second, "the garbage collector deletes the Widget's ConfigMap", func(ctx context.Context) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (get: %v)", err)
	})
	waitfor.NoError(t, 30*time.Second, "the finalizing event is listed", func(ctx context.Context) error {
		return hasEvent(ctx, cs.EventsV1().Events(ns), w.Name, "Finalized", 1)
	})
}

// hasEvent checks that at least n events of reason about the Widget name, reported by the
// operator, are listed.
func hasEvent(ctx context.Context, events eventsv1client.EventInterface, name, reason string, n int) error {
	list, err := events.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var seen []string
	count := 0
	for _, e := range list.Items {
		seen = append(seen, fmt.Sprintf("%s/%s by %s", e.Regarding.Name, e.Reason, e.ReportingController))
		if e.Regarding.Kind == "Widget" && e.Regarding.Name == name && e.Reason == reason && e.ReportingController == widgets.Name {
			count++
		}
	}
	if count < n {
		return fmt.Errorf("%d %s events about %s, want %d; events: %v", count, reason, name, n, seen)
	}
	return nil
}
