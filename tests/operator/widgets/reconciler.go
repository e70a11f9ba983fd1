package widgets

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

const (
	// Name is the operator's field manager, event reporter and leader election lease.
	Name = "widget-operator"
	// Finalizer holds a Widget being deleted until the operator has seen it go.
	Finalizer = "operator.wasmplane.io/cleanup"
)

// ConfigMapName is the name of the ConfigMap the operator keeps for widget.
func ConfigMapName(widget string) string { return widget + "-widget" }

// Reconciler keeps each Widget's ConfigMap, finalizer and status.
type Reconciler struct {
	Client   client.Client
	Scheme   *runtime.Scheme
	Recorder recorder.EventRecorder
}

// SetupWithManager registers the reconciler for Widgets and the ConfigMaps they own, so
// that a ConfigMap edited or deleted behind the operator's back is put back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&Widget{}).Owns(&corev1.ConfigMap{}).Named("widget").Complete(r)
}

// Reconcile brings one Widget's ConfigMap and status in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var w Widget
	if err := r.Client.Get(ctx, req.NamespacedName, &w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !w.DeletionTimestamp.IsZero() {
		// The ConfigMap is the garbage collector's to delete: it is owned by the Widget.
		if controllerutil.RemoveFinalizer(&w, Finalizer) {
			r.Recorder.Eventf(&w, nil, corev1.EventTypeNormal, "Finalized", "Delete", "released widget %s", w.Name)
			if err := r.Client.Update(ctx, &w); err != nil {
				return ctrl.Result{}, fmt.Errorf("removing the finalizer of %s: %w", req, err)
			}
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(&w, Finalizer) {
		if err := r.Client.Update(ctx, &w); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer to %s: %w", req, err)
		}
	}

	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(w.Name), Namespace: w.Namespace},
		Data:       map[string]string{"replicas": strconv.Itoa(int(w.Spec.Replicas)), "message": w.Spec.Message},
	}
	if err := controllerutil.SetControllerReference(&w, cm, r.Scheme); err != nil {
		return ctrl.Result{}, fmt.Errorf("owning the ConfigMap of %s: %w", req, err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("converting the ConfigMap of %s: %w", req, err)
	}
	// Server-side apply: the operator owns exactly the fields it sets and nothing a user
	// added beside them.
	ac := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(Name), client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying the ConfigMap of %s: %w", req, err)
	}

	if w.Status.ObservedGeneration == w.Generation && w.Status.Replicas == w.Spec.Replicas && w.Status.ConfigMap == cm.Name {
		return ctrl.Result{}, nil
	}
	// Status is applied through the status subresource: the operator owns the status
	// fields it reports, and a write of status cannot touch spec.
	status := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(), "kind": "Widget",
		"metadata": map[string]any{"name": w.Name, "namespace": w.Namespace},
		"status":   map[string]any{"observedGeneration": w.Generation, "configMap": cm.Name, "replicas": int64(w.Spec.Replicas)},
	}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(status), client.FieldOwner(Name), client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying the status of %s: %w", req, err)
	}
	r.Recorder.Eventf(&w, cm, corev1.EventTypeNormal, "Reconciled", "Apply", "ConfigMap %s holds %d replicas", cm.Name, w.Spec.Replicas)
	return ctrl.Result{}, nil
}
