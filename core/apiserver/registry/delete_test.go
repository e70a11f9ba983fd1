package registry_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/api"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/storagetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// configMaps is the built-in ConfigMap resource, which these tests store.
func configMaps(t *testing.T) *registry.Resource {
	t.Helper()
	for _, d := range resources.Core() {
		if d.Resource.Name == "configmaps" {
			return d.Resource
		}
	}
	t.Fatal("no configmaps resource")
	return nil
}

// replacingStorage deletes the object and creates it anew (a new uid) just before the
// first Delete reaches storage: what a concurrent DELETE and POST of the same name do
// between a delete's read of the object and its write.
type replacingStorage struct {
	storage.Interface
	t        *testing.T
	replaced atomic.Bool
	newUID   string
}

func (r *replacingStorage) Delete(ctx context.Context, key string, out runtime.Object, pre *storage.Preconditions, validate storage.ValidateObjectFunc) error {
	if r.replaced.CompareAndSwap(false, true) {
		if err := r.Interface.Delete(ctx, key, &corev1.ConfigMap{}, nil, nil); err != nil {
			r.t.Fatalf("concurrent delete: %v", err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "second"}, Data: map[string]string{"v": "second"}}
		created := &corev1.ConfigMap{}
		if err := r.Interface.Create(ctx, key, cm, created); err != nil {
			r.t.Fatalf("concurrent create: %v", err)
		}
		r.newUID = string(created.UID)
	}
	return r.Interface.Delete(ctx, key, out, pre, validate)
}

// TestDeleteOfAReplacedObject: a DELETE whose object is deleted and created anew between
// its read and its write deletes the new object, as kube-apiserver does (its storage
// deletes whatever is stored, checking only the client's preconditions), instead of
// answering 409 Conflict to a request that had no precondition. With the client's own
// uid or resourceVersion precondition, the same race is a conflict.
func TestDeleteOfAReplacedObject(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := storagetest.Client(t)
	res := configMaps(t)
	tests := []struct {
		name string
		// pre makes the client's preconditions from the uid and resourceVersion of the
		// object it read.
		pre          func(uid, rv string) *metav1.Preconditions
		wantConflict bool
	}{
		{"no precondition deletes the new object", func(string, string) *metav1.Preconditions { return nil }, false},
		{"the old uid as precondition is a conflict", func(u, _ string) *metav1.Preconditions {
			return &metav1.Preconditions{UID: registry.UIDPtr(types.UID(u))}
		}, true},
		{"the old resourceVersion as precondition is a conflict", func(_, rv string) *metav1.Preconditions {
			return &metav1.Preconditions{ResourceVersion: &rv}
		}, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("/registry/t%d/configmaps", i)
			inner := storage.NewEtcd(client, storage.ResourceConfig{GroupResource: res.GroupResource(), Prefix: prefix,
				NewFunc: res.NewFunc, NewListFunc: res.NewListFunc, Codec: storage.NewCodec(api.MustScheme())})
			st := &replacingStorage{Interface: inner, t: t}
			store := registry.NewStore(res, st, prefix)
			first, err := store.Create(ctx, "ns", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string]string{"v": "first"}}, registry.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			fm := first.(*corev1.ConfigMap)
			out, gone, err := store.Delete(ctx, "ns", "a", &metav1.DeleteOptions{Preconditions: tt.pre(string(fm.UID), fm.ResourceVersion)}, registry.WriteOptions{})
			if tt.wantConflict {
				if !apierrors.IsConflict(err) {
					t.Fatalf("delete: %v, want a conflict", err)
				}
				if _, err := store.Get(ctx, "ns", "a", &metav1.GetOptions{}); err != nil {
					t.Fatalf("the new object after a refused delete: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("delete without precondition: %v", err)
			}
			if got := out.(*corev1.ConfigMap); !gone || string(got.UID) != st.newUID || got.Data["v"] != "second" {
				t.Errorf("delete returned %s %v (gone %v), want the new object %s", got.UID, got.Data, gone, st.newUID)
			}
			if _, err := store.Get(ctx, "ns", "a", &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get after the delete: %v, want not found", err)
			}
		})
	}
}
