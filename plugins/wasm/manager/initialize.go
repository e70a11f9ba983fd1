package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/api/initializers"
	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
)

// DefaultInitializerTimeout is how long an object may wait for one initializer before it
// fails and is deleted.
const DefaultInitializerTimeout = 30 * time.Second

// waitingObject names an object with pending initializers.
type waitingObject struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

// Waiting is told by the API server that an object is stored with pending initializers;
// the manager runs the first one if a loaded plugin serves it, and enforces the timeout.
func (m *Manager) Waiting(gvr schema.GroupVersionResource, namespace, name string) {
	m.initQueue.Add(waitingObject{gvr: gvr, namespace: namespace, name: name})
}

// runInitializers processes waiting objects until ctx ends.
func (m *Manager) runInitializers(ctx context.Context) {
	go func() {
		<-ctx.Done()
		m.initQueue.ShutDown()
	}()
	for {
		w, quit := m.initQueue.Get()
		if quit {
			return
		}
		if err := m.initialize(ctx, w); err != nil {
			m.log.Warn("initializing object", "resource", w.gvr.Resource, "namespace", w.namespace, "name", w.name, "err", err)
			m.initQueue.AddRateLimited(w)
		} else {
			m.initQueue.Forget(w)
		}
		m.initQueue.Done(w)
	}
}

// initialize runs the object's first pending initializer if it is a loaded WASM plugin,
// and fails objects whose first initializer has waited past the timeout.
func (m *Manager) initialize(ctx context.Context, w waitingObject) error {
	ri := m.cfg.Dynamic.Resource(w.gvr).Namespace(w.namespace)
	obj, err := ri.Get(ctx, w.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading object: %w", err)
	}
	pending := strings.Split(obj.GetAnnotations()[initializers.PendingAnnotation], ",")
	if pending[0] == "" {
		return nil
	}
	first := pending[0]
	var e *entry
	if !admission.IsAdmissionConfiguration(w.gvr.GroupResource()) {
		e = m.initializerFor(first, w.namespace)
	}
	if e == nil {
		// An external initializer's turn: fail the object if it does not act in time.
		m.initQueue.AddAfter(w, m.timeoutLeft(obj, first))
		return m.failIfStale(ctx, ri, obj, first)
	}
	timeout := DefaultInitializerTimeout
	if e.spec.Limits != nil && e.spec.Limits.Timeout != nil {
		timeout = e.spec.Limits.Timeout.Duration
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("encoding object: %w", err)
	}
	resp, err := e.plugin.Initialize(callCtx, &abi.InitializeRequest{
		Kind:     abi.GroupVersionKind{Group: obj.GroupVersionKind().Group, Version: obj.GroupVersionKind().Version, Kind: obj.GetKind()},
		Resource: abi.GroupVersionResource{Group: w.gvr.Group, Version: w.gvr.Version, Resource: w.gvr.Resource},
		Name:     w.name, Namespace: w.namespace, Object: data,
	})
	ignore := e.spec.FailurePolicy != nil && *e.spec.FailurePolicy == wasmv1.Ignore
	switch {
	case err != nil && ignore:
		m.log.Warn("initializer failed; skipped by its failurePolicy", "initializer", first, "err", err)
		return m.finish(ctx, ri, obj, first, nil)
	case err != nil:
		return m.fail(ctx, ri, obj, first, fmt.Sprintf("initializer %s failed: %v", first, err))
	case resp.Rejected:
		return m.fail(ctx, ri, obj, first, fmt.Sprintf("initializer %s rejected the object: %s", first, resp.Message))
	}
	next := data
	switch {
	case len(resp.Object) > 0:
		next = resp.Object
	case len(resp.Patch) > 0:
		ops, err := json.Marshal(resp.Patch)
		if err != nil {
			return fmt.Errorf("encoding patch: %w", err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err == nil {
			next, err = patch.Apply(data)
		}
		if err != nil {
			return m.fail(ctx, ri, obj, first, fmt.Sprintf("initializer %s answered a patch that does not apply: %v", first, err))
		}
	}
	return m.finish(ctx, ri, obj, first, next)
}

// initializerFor returns the loaded plugin serving initializer name for an object in ns.
func (m *Manager) initializerFor(name, ns string) *entry {
	s := m.acquire()
	defer s.release()
	for _, e := range s.entries {
		if e.spec.Initializer == name && slices.Contains(e.spec.Hooks, wasmv1.HookInitialize) && (e.namespace == "" || e.namespace == ns) {
			return e
		}
	}
	return nil
}

// finish stores the initialized object (next, or obj unchanged) without name in the
// pending list; the last initializer's update makes the object visible.
func (m *Manager) finish(ctx context.Context, ri dynamicResource, obj *unstructured.Unstructured, name string, next []byte) error {
	out := obj.DeepCopy()
	if next != nil {
		var fields map[string]any
		if err := json.Unmarshal(next, &fields); err != nil {
			return m.fail(ctx, ri, obj, name, fmt.Sprintf("initializer %s answered an object that is not JSON: %v", name, err))
		}
		out = &unstructured.Unstructured{Object: fields}
		// What identifies the object is not the initializer's to change.
		out.SetName(obj.GetName())
		out.SetNamespace(obj.GetNamespace())
		out.SetUID(obj.GetUID())
		out.SetResourceVersion(obj.GetResourceVersion())
	}
	ann := out.GetAnnotations()
	rest := slices.DeleteFunc(strings.Split(obj.GetAnnotations()[initializers.PendingAnnotation], ","), func(s string) bool { return s == name || s == "" })
	if len(rest) == 0 {
		delete(ann, initializers.PendingAnnotation)
	} else {
		ann[initializers.PendingAnnotation] = strings.Join(rest, ",")
	}
	out.SetAnnotations(ann)
	if _, err := ri.Update(ctx, out, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("storing initialized object: %w", err)
	}
	return nil
}

// fail deletes an object whose initializer failed and records why in an event.
func (m *Manager) fail(ctx context.Context, ri dynamicResource, obj *unstructured.Unstructured, name, msg string) error {
	uid := obj.GetUID()
	err := ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting object that failed initialization: %w", err)
	}
	m.log.Warn("object failed initialization and was deleted", "initializer", name, "namespace", obj.GetNamespace(), "name", obj.GetName(), "reason", msg)
	now := metav1.Now()
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &corev1.Event{
		// Named as client-go's event recorder names events.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", obj.GetName(), now.UnixNano()), Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: obj.GetKind(), APIVersion: obj.GetAPIVersion(), Name: obj.GetName(),
			Namespace: obj.GetNamespace(), UID: uid},
		Reason: "FailedInitialization", Message: msg, Type: corev1.EventTypeWarning, Count: 1,
		FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "wasmplane-initializers"},
		ReportingController: "wasmplane.io/initializers", ReportingInstance: m.cfg.ServerName,
	}
	if _, err := m.cfg.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		m.log.Warn("recording initialization failure event", "err", err)
	}
	return nil
}

// timeoutLeft is how long the object may still wait for its first initializer: the clock
// starts at the object's creation or at its last initializer's update.
func (m *Manager) timeoutLeft(obj *unstructured.Unstructured, _ string) time.Duration {
	start := obj.GetCreationTimestamp().Time
	for _, mf := range obj.GetManagedFields() {
		if mf.Time != nil && mf.Time.After(start) {
			start = mf.Time.Time
		}
	}
	left := time.Until(start.Add(m.initTimeout))
	if left < 0 {
		return 0
	}
	return left + 10*time.Millisecond
}

// failIfStale fails an object whose external initializer has not acted within the timeout.
func (m *Manager) failIfStale(ctx context.Context, ri dynamicResource, obj *unstructured.Unstructured, name string) error {
	if m.timeoutLeft(obj, name) > 0 {
		return nil
	}
	return m.fail(ctx, ri, obj, name, fmt.Sprintf("initializer %s did not act within %v", name, m.initTimeout))
}

func newInitQueue() workqueue.TypedRateLimitingInterface[waitingObject] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[waitingObject](50*time.Millisecond, 5*time.Second),
		workqueue.TypedRateLimitingQueueConfig[waitingObject]{Name: "initializers"})
}
