package controllers

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/replicaset"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// laggingHandler delivers every event delay after it happened, in order: an informer that
// lags far behind the API server.
type laggingHandler struct {
	next  cache.ResourceEventHandler
	delay time.Duration
	ch    chan func()
}

func newLagging(ctx context.Context, wg *sync.WaitGroup, next cache.ResourceEventHandler, delay time.Duration) *laggingHandler {
	h := &laggingHandler{next: next, delay: delay, ch: make(chan func(), 100000)}
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case f := <-h.ch:
				f()
			}
		}
	})
	return h
}

func (h *laggingHandler) at(f func()) {
	due := time.Now().Add(h.delay)
	h.ch <- func() {
		time.Sleep(time.Until(due))
		f()
	}
}

func (h *laggingHandler) OnAdd(obj any, initial bool) { h.at(func() { h.next.OnAdd(obj, initial) }) }
func (h *laggingHandler) OnUpdate(o, n any)           { h.at(func() { h.next.OnUpdate(o, n) }) }
func (h *laggingHandler) OnDelete(obj any)            { h.at(func() { h.next.OnDelete(obj) }) }

func TestExpectationsPreventOverCreation(t *testing.T) {
	e := newBareEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	cfg := e.srv.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	client := testserver.NewClientset(t, cfg)
	factory := informers.NewSharedInformerFactory(client, 0)
	rsc, err := replicaset.New(client, factory, replicaset.Options{
		Logger: testserver.Logger(),
		WrapPodHandler: func(h cache.ResourceEventHandler) cache.ResourceEventHandler {
			return newLagging(ctx, &wg, h, 500*time.Millisecond)
		},
	})
	must(t, err)
	factory.Start(ctx.Done())
	wg.Go(func() { rsc.Run(ctx, 5) })
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })

	w := watchPods(t, e, "app=exp", func(pods map[string]*corev1.Pod) error {
		if len(pods) > 100 {
			return fmt.Errorf("%d pods > 100", len(pods))
		}
		return nil
	})
	n := int32(100)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "exp"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "exp"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "exp"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}},
	}
	_, err = e.client.AppsV1().ReplicaSets(e.ns).Create(ctx, rs, metav1.CreateOptions{})
	must(t, err)
	waitfor.Condition(t, 30*time.Second, "100 pods and status", func(ctx context.Context) (bool, error) {
		cur, err := e.client.AppsV1().ReplicaSets(e.ns).Get(ctx, "exp", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cur.Status.Replicas == 100 && cur.Status.ObservedGeneration == cur.Generation, nil
	})
	// Touch the ReplicaSet repeatedly while the pod informer is behind: every sync must wait
	// for its expectations instead of creating again.
	for i := range 10 {
		_, err := e.client.AppsV1().ReplicaSets(e.ns).Patch(ctx, "exp", "application/merge-patch+json",
			fmt.Appendf(nil, `{"metadata":{"annotations":{"touch":"%d"}}}`, i), metav1.PatchOptions{})
		must(t, err)
	}
	// Scale down with the same lag: never fewer than asked for.
	sc, err := e.client.AppsV1().ReplicaSets(e.ns).GetScale(ctx, "exp", metav1.GetOptions{})
	must(t, err)
	sc.Spec.Replicas = 40
	_, err = e.client.AppsV1().ReplicaSets(e.ns).UpdateScale(ctx, "exp", sc, metav1.UpdateOptions{})
	must(t, err)
	waitfor.Condition(t, 30*time.Second, "40 pods", func(ctx context.Context) (bool, error) {
		cur, err := e.client.AppsV1().ReplicaSets(e.ns).Get(ctx, "exp", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, err := countPods(ctx, e, "app=exp")
		return cur.Status.Replicas == 40 && n == 40, err
	})
	w.assertClean(t)
	if m := w.maxSeen.Load(); m != 100 {
		t.Fatalf("max pods seen = %d, want 100", m)
	}
}
