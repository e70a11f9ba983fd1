package apiserver

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// events records the event types seen per object name.
type events struct {
	mu  sync.Mutex
	seq map[string][]string
}

func (e *events) add(obj any, typ string) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq[u.GetName()] = append(e.seq[u.GetName()], typ)
}

func (e *events) of(name string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.seq[name])
}

// TestDynamicInformer runs a dynamic informer on a custom resource through ordinary
// changes, a server restart (the CRD is served again from storage) and a compaction under
// the live watch, and checks the events of each object arrive in order.
func TestDynamicInformer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	srv := testserver.StartAPI(t)
	e := newCRDEnv(t, srv)
	ctx := context.Background()
	e.establish(t, widgetsCRD())
	// The informer's client outlives restarts: same port, same credentials.
	dyn, err := dynamic.NewForConfig(srv.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "default", nil)
	inf := factory.ForResource(widgetsResource).Informer()
	rec := &events{seq: map[string][]string{}}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { rec.add(obj, "ADDED") },
		UpdateFunc: func(old, obj any) {
			if old.(*unstructured.Unstructured).GetResourceVersion() != obj.(*unstructured.Unstructured).GetResourceVersion() {
				rec.add(obj, "MODIFIED")
			}
		},
		DeleteFunc: func(obj any) { rec.add(obj, "DELETED") },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer factory.Shutdown()
	defer close(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	client := func() dynamic.ResourceInterface {
		d, err := dynamic.NewForConfig(srv.Config(true))
		if err != nil {
			t.Fatal(err)
		}
		return d.Resource(widgetsResource).Namespace("default")
	}
	create := func(name string) {
		t.Helper()
		if _, err := client().Create(ctx, widget(name, map[string]any{"immutableID": name}), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	touch := func(name, v string) {
		t.Helper()
		if _, err := client().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"t":"`+v+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch %s: %v", name, err)
		}
	}
	settle := func(phase string, want map[string][]string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			for name, seq := range want {
				if !slices.Equal(rec.of(name), seq) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			for name, seq := range want {
				t.Errorf("%s: events of %s = %v, want %v", phase, name, rec.of(name), seq)
			}
			t.FailNow()
		}
	}

	create("a")
	touch("a", "1")
	if err := client().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	settle("ordinary events", map[string][]string{"a": {"ADDED", "MODIFIED", "DELETED"}})

	create("b")
	settle("before restart", map[string][]string{"b": {"ADDED"}})
	srv = srv.Restart(t)
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		_, err := client().Get(ctx, "b", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("widgets not served again after the restart: %v", err)
	}
	touch("b", "after-restart")
	create("c")
	settle("after restart", map[string][]string{"b": {"ADDED", "MODIFIED"}, "c": {"ADDED"}})

	etcd := srv.EtcdClient(t)
	resp, err := etcd.Get(ctx, "compaction-probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	touch("c", "after-compaction")
	settle("compaction under a live watch", map[string][]string{"c": {"ADDED", "MODIFIED"}})
}
