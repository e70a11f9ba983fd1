// Command memory measures what huge objects cost a server's memory: it creates a few
// pods of thousands of containers each (≈ 800 KB apiece), deletes them, and prints the
// resident set size before, after creating and after deleting — for `wasmplane up` and,
// with -peers, for the real kube-apiserver v1.37.2 + etcd in the same run (their two
// processes summed; wasmplane's etcd is inside its one process).
//
//	go run ./tests/bench/memory -peers ~/.cache/wasmplane-peers
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/peers"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

func main() {
	pods := flag.Int("pods", 8, "huge pods to create")
	containers := flag.Int("containers", 20000, "containers per pod")
	peerDir := flag.String("peers", "", "directory with etcd and kube-apiserver binaries (build.sh of k8s-peers): measure them too")
	bin := flag.String("wasmplane-bin", "", "a built wasmplane binary (default: go build ./cmd/wasmplane)")
	settle := flag.Duration("settle", 15*time.Second, "how long after deleting to read the last figure")
	flag.Parse()
	ctx := context.Background()
	if err := run(ctx, *pods, *containers, *peerDir, *bin, *settle); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, pods, containers int, peerDir, bin string, settle time.Duration) error {
	dir, err := os.MkdirTemp("", "wasmplane-memory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Printf("%d pods of %d containers each\n", pods, containers)
	fmt.Printf("%-28s %12s %12s %12s %12s\n", "server", "before", "created", "deleted", "growth kept")
	wdir := dir + "/wasmplane"
	if err := os.Mkdir(wdir, 0o755); err != nil {
		return err
	}
	wp, err := peers.StartWasmplane(ctx, bin, wdir, "--disable-kubelet", "--disable-scheduler", "--disable-controllers")
	if err != nil {
		return err
	}
	err = measure(ctx, "wasmplane up", wp, []string{"wasmplane"}, pods, containers, settle)
	wp.Stop()
	if err != nil || peerDir == "" {
		return err
	}
	kdir := dir + "/kube"
	if err := os.Mkdir(kdir, 0o755); err != nil {
		return err
	}
	kube, err := peers.Start(ctx, peers.Options{Dir: peerDir, WorkDir: kdir})
	if err != nil {
		return err
	}
	defer kube.Stop()
	return measure(ctx, "kube-apiserver + etcd", kube, []string{"kube-apiserver", "etcd"}, pods, containers, settle)
}

// measure creates and deletes the pods on one server and prints its RSS at three points.
func measure(ctx context.Context, name string, c *peers.ControlPlane, procs []string, pods, containers int, settle time.Duration) error {
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := "memory"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: namespace: %w", name, err)
	}
	// kube-apiserver's ServiceAccount admission wants the namespace's default account,
	// which no controller creates here.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: service account: %w", name, err)
	}
	rss := func() (int64, error) {
		var sum int64
		for _, p := range procs {
			n, err := peers.RSS(c.Procs[p].Pid)
			if err != nil {
				return 0, err
			}
			sum += n
		}
		return sum, nil
	}
	before, err := rss()
	if err != nil {
		return err
	}
	for i := range pods {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, hugePod("huge-"+strconv.Itoa(i), containers), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("%s: creating a huge pod: %w", name, err)
		}
	}
	created, err := rss()
	if err != nil {
		return err
	}
	grace := int64(0)
	for i := range pods {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, "huge-"+strconv.Itoa(i), metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			return fmt.Errorf("%s: deleting a huge pod: %w", name, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%s: pods not gone: %w", name, err)
	}
	// Memory returns to the OS on the runtime's schedule (the scavenger), not at once.
	time.Sleep(settle)
	deleted, err := rss()
	if err != nil {
		return err
	}
	fmt.Printf("%-28s %12s %12s %12s %12s\n", name, mib(before), mib(created), mib(deleted), mib(deleted-before))
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

// hugePod is a pod of n containers (≈ 40 bytes of JSON each), with no service account
// token to mount so that no admission needs a ServiceAccount.
func hugePod(name string, n int) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{AutomountServiceAccountToken: new(bool)}}
	for i := range n {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c" + strconv.Itoa(i), Image: "registry.example/app:1"})
	}
	return p
}
