// Package controllers holds integration tests of the Deployment, ReplicaSet and
// garbage-collector controllers against a real in-process wasmplane server.
package controllers

import (
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// env is a server plus an admin client and a fresh namespace.
type env struct {
	srv    *server.Instance
	client kubernetes.Interface
	ns     string
}

// newEnv starts a server that runs the built-in controllers (as `wasmplane up` does).
func newEnv(t *testing.T) *env {
	t.Helper()
	s := testserver.Start(t)
	return newEnvFor(t, s.Instance)
}

// newBareEnv starts a server without controllers, for tests that run their own.
func newBareEnv(t *testing.T) *env {
	t.Helper()
	inst, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), Port: 0, DisableControllers: true, Logger: testserver.Logger()})
	if err != nil {
		t.Fatalf("starting server: %v", err)
	}
	t.Cleanup(inst.Close)
	return newEnvFor(t, inst)
}

func newEnvFor(t *testing.T, inst *server.Instance) *env {
	t.Helper()
	cfg := inst.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	client := testserver.NewClientset(t, cfg)
	ns := "test"
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return &env{srv: inst, client: client, ns: ns}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// fakeKubelet marks every pod in ns Running and Ready through pods/status, as a kubelet
// would once its containers started. It stops when the test ends.
func fakeKubelet(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(e.ns))
	inf := factory.Core().V1().Pods().Informer()
	q := workqueue.NewTyped[string]()
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp == nil && !podReady(p) {
			q.Add(p.Name)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				name, quit := q.Get()
				if quit {
					return
				}
				if err := markReady(ctx, e, name); err != nil && ctx.Err() == nil {
					q.Add(name)
				}
				q.Done(name)
			}
		})
	}
	t.Cleanup(func() {
		cancel()
		q.ShutDown()
		wg.Wait()
		factory.Shutdown()
	})
}

func markReady(ctx context.Context, e *env, name string) error {
	pod, err := e.client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if podReady(pod) || pod.DeletionTimestamp != nil {
		return nil
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	_, err = e.client.CoreV1().Pods(e.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func newDeployment(name string, n int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	surge, unavail := intstr.FromString("25%"), intstr.FromString("25%")
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavail}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
		},
	}
}

// waitComplete waits until d is rolled out: observed, all updated, all available.
func waitComplete(t *testing.T, e *env, name string, timeout time.Duration) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	waitfor.Condition(t, timeout, "deployment "+name+" complete", func(ctx context.Context) (bool, error) {
		var err error
		d, err = e.client.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n := *d.Spec.Replicas
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == n && s.Replicas == n && s.AvailableReplicas == n && s.ReadyReplicas == n, nil
	})
	return d
}

func countPods(ctx context.Context, e *env, selector string) (int, error) {
	l, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// podWatcher follows the pods of ns from a watch and checks an invariant at every observed
// instant (after every event).
type podWatcher struct {
	mu         sync.Mutex
	pods       map[string]*corev1.Pod
	violations atomic.Int64
	firstErr   atomic.Value
	maxSeen    atomic.Int64
}

func watchPods(t *testing.T, e *env, selector string, check func(pods map[string]*corev1.Pod) error) *podWatcher {
	t.Helper()
	ctx := testCtx(t)
	w := &podWatcher{pods: map[string]*corev1.Pod{}}
	l, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		w.pods[l.Items[i].Name] = &l.Items[i]
	}
	wi, err := e.client.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range wi.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			w.mu.Lock()
			if ev.Type == "DELETED" || p.DeletionTimestamp != nil {
				delete(w.pods, p.Name)
			} else {
				w.pods[p.Name] = p
			}
			w.maxSeen.Store(max(w.maxSeen.Load(), int64(len(w.pods))))
			if err := check(w.pods); err != nil {
				if w.violations.Add(1) == 1 {
					w.firstErr.Store(err.Error())
				}
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { wi.Stop(); <-done })
	return w
}

func (w *podWatcher) assertClean(t *testing.T) {
	t.Helper()
	if n := w.violations.Load(); n > 0 {
		t.Fatalf("%d invariant violations; first: %v", n, w.firstErr.Load())
	}
}

func podsByImage(pods map[string]*corev1.Pod) (map[string]int, map[string]int) {
	all, ready := map[string]int{}, map[string]int{}
	for _, p := range pods {
		img := p.Spec.Containers[0].Image
		all[img]++
		if podReady(p) {
			ready[img]++
		}
	}
	return all, ready
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// scaleDeployment sets replicas through the scale subresource, retrying on conflicts with
// the controllers' own writes.
func scaleDeployment(t *testing.T, e *env, name string, n int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := e.client.AppsV1().Deployments(e.ns).GetScale(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sc.Spec.Replicas = n
		_, err = e.client.AppsV1().Deployments(e.ns).UpdateScale(context.Background(), name, sc, metav1.UpdateOptions{})
		return err
	})
	must(t, err)
}
