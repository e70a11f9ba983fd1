package controllers

import (
	"context"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// undo does what `kubectl rollout undo --to-revision` does client-side: a JSON patch that
// replaces the Deployment's template with the ReplicaSet's, minus the pod-template-hash label.
func undo(t *testing.T, e *env, name string, rs appsv1.ReplicaSet) {
	t.Helper()
	tmpl := rs.Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template", "value": tmpl}})
	must(t, err)
	_, err = e.client.AppsV1().Deployments(e.ns).Patch(context.Background(), name, types.JSONPatchType, patch, metav1.PatchOptions{})
	must(t, err)
}
