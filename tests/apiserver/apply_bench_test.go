package apiserver

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// BenchmarkDeploymentChange changes a Deployment's image, alternating between two values
// so that every request writes, once as a strategic-merge patch and once as a server-side
// apply of the whole Deployment (what kubectl apply --server-side sends). Each op is one
// request; "parallel" runs 32 clients on 32 Deployments. BENCH_KUBECONFIG points it at
// another server (kube-apiserver) instead of an in-process wasmplane.
func BenchmarkDeploymentChange(b *testing.B) {
	cs := benchClient(b)
	ctx := context.Background()
	ns := benchNamespace(b, cs, "bench-apply")
	deployments := cs.AppsV1().Deployments(ns)
	const clients = 32
	for i := range clients {
		name := fmt.Sprintf("web-%d", i)
		if _, err := deployments.Apply(ctx, deploymentAC(ns, name, corev1ac.Container().WithName("app").WithImage("app:0")), metav1.ApplyOptions{FieldManager: "bench", Force: true}); err != nil {
			b.Fatal(err)
		}
	}
	change := map[string]func(name, image string) error{
		"strategic-merge-patch": func(name, image string) error {
			patch := `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"` + image + `"}]}}}}`
			_, err := deployments.Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "bench"})
			return err
		},
		"apply": func(name, image string) error {
			_, err := deployments.Apply(ctx, deploymentAC(ns, name, corev1ac.Container().WithName("app").WithImage(image)), metav1.ApplyOptions{FieldManager: "bench", Force: true})
			return err
		},
	}
	for _, kind := range []string{"strategic-merge-patch", "apply"} {
		fn := change[kind]
		b.Run(kind+"/serial", func(b *testing.B) {
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				if err := fn("web-0", fmt.Sprintf("app:%d", i%2+1)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(kind+"/parallel", func(b *testing.B) {
			defer reportCPU(b)()
			var next atomic.Int64
			b.SetParallelism((clients + 1) / 2) // GOMAXPROCS is 2 on the benchmark VM
			b.RunParallel(func(pb *testing.PB) {
				name := fmt.Sprintf("web-%d", next.Add(1)%clients)
				for i := 0; pb.Next(); i++ {
					if err := fn(name, fmt.Sprintf("app:%d", i%2+1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// benchNamespace creates a namespace named for prefix and this process, deleted when the
// benchmark ends.
func benchNamespace(b *testing.B, cs kubernetes.Interface, prefix string) string {
	ns := fmt.Sprintf("%s-%d", prefix, os.Getpid())
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

func benchClient(b *testing.B) kubernetes.Interface {
	if path := os.Getenv("BENCH_KUBECONFIG"); path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			b.Fatal(err)
		}
		cfg.QPS = -1
		return kubernetes.NewForConfigOrDie(cfg)
	}
	return testserver.StartAPI(b).Clientset(b, false)
}

// reportCPU reports the CPU time of this process (client, server and embedded etcd when
// in-process) per op: the wall time of a write is mostly etcd's fsync on a shared disk.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
