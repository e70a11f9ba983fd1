package garbagecollector

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func obj(uid, name string, owners ...string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "ns"}}
	for _, o := range owners {
		m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{UID: types.UID(o), Kind: "ReplicaSet", APIVersion: "apps/v1", Name: o})
	}
	return m
}

func TestGraphBookkeeping(t *testing.T) {
	c := New(nil, nil, nil)
	defer c.queue.ShutDown()
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	rss := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}

	for _, tc := range []struct {
		name      string
		do        func()
		wantDeps  map[string][]string // owner uid -> dependents
		wantQueue int
	}{
		{"owner without owners is not queued", func() { c.observe(rss, obj("rs1", "rs1")) }, map[string][]string{"rs1": nil}, 0},
		{"dependent is indexed and queued", func() { c.observe(pods, obj("p1", "p1", "rs1")) }, map[string][]string{"rs1": {"p1"}}, 1},
		{"re-owned dependent moves", func() { c.observe(pods, obj("p1", "p1", "rs2")) }, map[string][]string{"rs1": nil, "rs2": {"p1"}}, 1},
		{"deleting the owner queues its dependents", func() {
			c.forget(cache.DeletedFinalStateUnknown{Key: "ns/rs2", Obj: obj("rs2", "rs2")})
		}, map[string][]string{"rs2": {"p1"}}, 1},
		{"a deleted dependent leaves the index and wakes its owner", func() { c.forget(obj("p1", "p1", "rs2")) }, map[string][]string{"rs2": nil}, 2},
		{"a new informer's first list wakes the dependents of owners not in the graph", func() {
			c.observe(pods, obj("p2", "p2", "never-seen"))
			c.observe(pods, obj("p3", "p3", "rs1"))
			for c.queue.Len() > 0 {
				uid, _ := c.queue.Get()
				c.queue.Done(uid)
			}
			c.queueOrphaned()
		}, map[string][]string{"never-seen": {"p2"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.do()
			for owner, want := range tc.wantDeps {
				got := c.dependentsOf(types.UID(owner))
				if len(got) != len(want) || (len(want) == 1 && string(got[0]) != want[0]) {
					t.Errorf("dependents of %s = %v, want %v", owner, got, want)
				}
			}
			if c.queue.Len() != tc.wantQueue {
				t.Errorf("queue length = %d, want %d", c.queue.Len(), tc.wantQueue)
			}
		})
	}
}
