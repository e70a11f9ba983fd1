package e2e

import (
	"testing"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestComponentStatuses reads core/v1 componentstatuses, which kube-apiserver still
// serves and `kubectl get componentstatuses` lists: the three components by
// kube-apiserver's names, etcd probed, the scheduler run by this process healthy and the
// controllers it does not run reported as not probed; get by name, NotFound for another
// name, and no watch.
func TestComponentStatuses(t *testing.T) {
	srv := testserver.StartAPI(t, func(c *server.Config) { c.DisableScheduler = false })
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := ctxFor(t)
			cs := srv.Clientset(t, m.json).CoreV1().ComponentStatuses()
			list, err := cs.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			want := map[string]corev1.ConditionStatus{"scheduler": corev1.ConditionTrue, "controller-manager": corev1.ConditionUnknown, "etcd-0": corev1.ConditionTrue}
			if len(list.Items) != len(want) {
				t.Fatalf("got %d components, want %d: %+v", len(list.Items), len(want), list.Items)
			}
			for _, c := range list.Items {
				if len(c.Conditions) != 1 || c.Conditions[0].Type != corev1.ComponentHealthy || c.Conditions[0].Status != want[c.Name] {
					t.Errorf("%s: conditions %+v, want Healthy %s", c.Name, c.Conditions, want[c.Name])
				}
			}
			got, err := cs.Get(ctx, "etcd-0", metav1.GetOptions{})
			if err != nil || got.Name != "etcd-0" || got.Conditions[0].Status != corev1.ConditionTrue {
				t.Fatalf("get etcd-0: %+v, %v", got, err)
			}
			if _, err := cs.Get(ctx, "etcd-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get etcd-1: %v, want NotFound", err)
			}
			sel, err := cs.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=scheduler"})
			if err != nil || len(sel.Items) != 1 || sel.Items[0].Name != "scheduler" {
				t.Errorf("list by name: %+v, %v", sel, err)
			}
			if _, err := cs.Watch(ctx, metav1.ListOptions{}); !apierrors.IsMethodNotSupported(err) {
				t.Errorf("watch: %v, want MethodNotSupported", err)
			}
		})
	}
}
