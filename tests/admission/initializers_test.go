package admission_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/api/initializers"
	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// seedConfig is the seed's InitializerConfiguration, unchanged.
const seedConfig = `{"apiVersion":"admissionregistration.k8s.io/v1alpha1","kind":"InitializerConfiguration",
"metadata":{"name":"custom-pod-initializer"},
"initializers":[{"name":"podimage.example.com","rules":[{"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"]}]}]}`

func createSeedConfig(t *testing.T, e *env) {
	t.Helper()
	err := e.cs.CoreV1().RESTClient().Post().AbsPath("/apis/admissionregistration.k8s.io/v1alpha1/initializerconfigurations").
		SetHeader("Content-Type", "application/json").Body([]byte(seedConfig)).Do(context.Background()).Error()
	if err != nil {
		t.Fatal(err)
	}
	// Like a webhook configuration, a new InitializerConfiguration takes effect once the
	// server's cache has it: wait until a dry-run create shows the pending initializer.
	err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods("default").Create(ctx, pod("probe", nil, "x:1"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return p.Annotations[initializers.PendingAnnotation] != "", nil
	})
	if err != nil {
		t.Fatalf("the InitializerConfiguration never took effect: %v", err)
	}
}

func TestWasmInitializer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	e := start(t)
	ctx := context.Background()
	digest := e.push(t, wasmtest.Go(t, "examples/plugins/go/podimage-initializer"))
	e.applyInitializer(t, "podimage", digest, "podimage.example.com", `{"mirror":"mirror.example.com"}`)
	createSeedConfig(t, e)

	w, err := e.cs.CoreV1().Pods("tenant-a").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := e.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("web", nil, "nginx:1.27"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The watcher sees the pod once, after initialization, with the mirrored image.
	select {
	case ev := <-w.ResultChan():
		p, ok := ev.Object.(*corev1.Pod)
		if ev.Type != watch.Added || !ok {
			t.Fatalf("first event %s %T, want ADDED pod", ev.Type, ev.Object)
		}
		if img := p.Spec.Containers[0].Image; img != "mirror.example.com/library/nginx:1.27" {
			t.Fatalf("image %q, want the mirror", img)
		}
		if _, pending := p.Annotations[initializers.PendingAnnotation]; pending {
			t.Fatalf("watcher saw an uninitialized pod: %v", p.Annotations)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the initialized pod never appeared to the watcher")
	}
}

func TestUninitializedObjectsAreHidden(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	createSeedConfig(t, e)
	// Nobody serves podimage.example.com here: an external initializer's turn.
	if _, err := e.cs.CoreV1().Pods("tenant-a").Create(ctx, pod("waiting", nil, "nginx:1.27"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := e.cs.CoreV1().Pods("tenant-a").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("list shows %d pods (%v), want none", len(list.Items), err)
	}
	var all corev1.PodList
	if err := e.cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/tenant-a/pods").Param("includeUninitialized", "true").Do(ctx).Into(&all); err != nil || len(all.Items) != 1 {
		t.Fatalf("includeUninitialized shows %d pods (%v), want 1", len(all.Items), err)
	}
	p, err := e.cs.CoreV1().Pods("tenant-a").Get(ctx, "waiting", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get by name must show an uninitialized object: %v", err)
	}
	// The external initializer does its work and removes itself.
	delete(p.Annotations, initializers.PendingAnnotation)
	if _, err := e.cs.CoreV1().Pods("tenant-a").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err = e.cs.CoreV1().Pods("tenant-a").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("after initialization list shows %d pods (%v), want 1", len(list.Items), err)
	}
}

func TestInitializerTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	inst, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), Port: 0, InitializerTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Close)
	hc, err := rest.HTTPClientFor(inst.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cs: kubernetes.NewForConfigOrDie(inst.RESTConfig()), dyn: dynamic.NewForConfigOrDie(inst.RESTConfig()), url: inst.URL(), hc: hc}
	ctx := context.Background()
	createSeedConfig(t, e)
	if _, err := e.cs.CoreV1().Pods("default").Create(ctx, pod("stuck", nil, "nginx:1.27"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().Pods("default").Get(ctx, "stuck", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("a pod whose initializer never acted was not deleted")
	}
	// The event is recorded after the delete succeeds, so it may trail the deletion.
	var events *corev1.EventList
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err = e.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedInitialization"})
		return err == nil && len(events.Items) > 0, nil
	})
	if err != nil || !strings.Contains(events.Items[0].Message, "podimage.example.com") {
		t.Fatalf("no FailedInitialization event naming the initializer: %v %v", events, err)
	}
}

// applyInitializer creates a ClusterWasmPlugin serving an initializer and waits for it.
func (e *env) applyInitializer(t *testing.T, name, digest, initializer, config string) {
	t.Helper()
	ctx := context.Background()
	p := &wasmv1.ClusterWasmPlugin{
		TypeMeta:   metav1.TypeMeta{APIVersion: wasmv1.SchemeGroupVersion.String(), Kind: "ClusterWasmPlugin"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: wasmv1.WasmPluginSpec{Module: wasmv1.ModuleSource{Digest: "sha256:" + digest}, SHA256: digest,
			Hooks: []wasmv1.Hook{wasmv1.HookInitialize}, Initializer: initializer, Config: &runtime.RawExtension{Raw: []byte(config)}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	ri := e.dyn.Resource(wasmv1.SchemeGroupVersion.WithResource("clusterwasmplugins"))
	if _, err := ri.Create(ctx, toUnstructured(obj), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, ri, name, 1)
}
