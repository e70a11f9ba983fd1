// Command apply measures server-side apply beside a strategic-merge patch of the same
// change, on wasmplane and on the real kube-apiserver v1.37.2 + etcd side by side, in one
// run: each request changes a Deployment's image (alternating between two values, so that
// every request writes), either as a strategic-merge patch of the container or as a
// server-side apply of the whole Deployment (what `kubectl apply --server-side` sends).
//
// Per server (`wasmplane up` without kubelet, scheduler or controllers; etcd +
// kube-apiserver), -workers clients each own one Deployment and send -ops requests in all,
// one at a time each. Kinds and servers take turns in each of -rounds rounds. It prints,
// per server and kind, the median over rounds of the requests per second, the latency
// p50/p99 and the server's CPU per request (the server's processes, etcd included), then
// apply's cost relative to the patch on each server and wasmplane's apply throughput
// relative to kube-apiserver's.
//
//	go run ./tests/bench/apply -peers /work/peers
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/peers"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
)

type options struct {
	peersDir, only, bin string
	ops, workers        int
	rounds              int
	timeout             time.Duration
	profileDir          string
	profileFor          time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.peersDir, "peers", peers.DefaultDir(), "directory holding etcd and kube-apiserver v1.37.2")
	flag.StringVar(&o.only, "only", "", "run one side only: wasmplane or kube-apiserver")
	flag.StringVar(&o.bin, "wasmplane-bin", "", "run this wasmplane binary instead of building ./cmd/wasmplane")
	flag.IntVar(&o.ops, "ops", 2000, "requests per kind, server and round")
	flag.IntVar(&o.workers, "workers", 32, "parallel clients, one Deployment each")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds (kinds and servers take turns in each)")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "give up after this long")
	flag.StringVar(&o.profileDir, "cpuprofile-dir", "", "write wasmplane's CPU profile of each kind's first round here")
	flag.DurationVar(&o.profileFor, "cpuprofile-for", 3*time.Second, "how long each CPU profile runs (keep it shorter than a round)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := run(ctx, o); err != nil {
		slog.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

// kinds are the two ways of sending the same change, in the order they run.
var kinds = []string{"strategic-merge patch", "server-side apply"}

type server struct {
	name string
	cp   *peers.ControlPlane
	cs   kubernetes.Interface
	// per kind, one figure per round
	rate      map[string][]float64
	p50, p99  map[string][]time.Duration
	cpuPerReq map[string][]time.Duration
}

func run(ctx context.Context, o options) error {
	work, err := os.MkdirTemp("", "wasmplane-apply-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	var servers []*server
	if o.only != "wasmplane" {
		cp, err := peers.Start(ctx, peers.Options{Dir: o.peersDir, WorkDir: mkdir(work, "kube")})
		if err != nil {
			return fmt.Errorf("starting kube-apiserver: %w", err)
		}
		defer cp.Stop()
		servers = append(servers, &server{name: "kube-apiserver", cp: cp})
	}
	if o.only != "kube-apiserver" {
		cp, err := peers.StartWasmplane(ctx, o.bin, mkdir(work, "wasmplane"), "--disable-kubelet", "--disable-scheduler", "--disable-controllers")
		if err != nil {
			return fmt.Errorf("starting wasmplane: %w", err)
		}
		defer cp.Stop()
		servers = append(servers, &server{name: "wasmplane", cp: cp})
	}
	for _, s := range servers {
		cfg, err := s.cp.RESTConfig()
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = -1, 0 // the server is measured, not client-side throttling
		if s.cs, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
		s.rate, s.p50, s.p99, s.cpuPerReq = map[string][]float64{}, map[string][]time.Duration{}, map[string][]time.Duration{}, map[string][]time.Duration{}
		for i := range o.workers {
			if err := apply(ctx, s.cs, deploymentName(i), "app:0"); err != nil {
				return fmt.Errorf("%s: creating the Deployments: %w", s.name, err)
			}
		}
	}
	for round := range o.rounds {
		for _, s := range servers {
			for _, kind := range kinds {
				var profiled chan error
				if o.profileDir != "" && round == 0 && s.name == "wasmplane" {
					profiled = make(chan error, 1)
					go func() { profiled <- peers.CPUProfile(ctx, s.cs, o.profileFor, o.profileDir, kind) }()
				}
				err := measure(ctx, s, kind, o)
				if profiled != nil {
					if perr := <-profiled; perr != nil && err == nil {
						err = perr
					}
				}
				if err != nil {
					return fmt.Errorf("%s %s round %d: %w", s.name, kind, round+1, err)
				}
			}
		}
	}
	return report(servers)
}

func mkdir(parent, name string) string {
	dir := filepath.Join(parent, name)
	_ = os.MkdirAll(dir, 0o755)
	return dir
}

func deploymentName(i int) string { return fmt.Sprintf("web-%d", i) }

// apply sends the whole Deployment, as kubectl apply --server-side does.
func apply(ctx context.Context, cs kubernetes.Interface, name, image string) error {
	labels := map[string]string{"app": name}
	d := appsv1ac.Deployment(name, corev1.NamespaceDefault).
		WithLabels(labels).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(corev1ac.PodSpec().WithContainers(
					corev1ac.Container().WithName("app").WithImage(image).
						WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(8080)).
						WithEnv(corev1ac.EnvVar().WithName("MODE").WithValue("bench"))))))
	_, err := cs.AppsV1().Deployments(corev1.NamespaceDefault).Apply(ctx, d, metav1.ApplyOptions{FieldManager: "bench", Force: true})
	return err
}

// patch sends only the changed image, as a strategic-merge patch keyed by container name.
func patch(ctx context.Context, cs kubernetes.Interface, name, image string) error {
	body := `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"` + image + `"}]}}}}`
	_, err := cs.AppsV1().Deployments(corev1.NamespaceDefault).Patch(ctx, name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{FieldManager: "bench"})
	return err
}

// measure runs o.ops changes of one kind over o.workers clients and records the rate,
// the latency percentiles and the server's CPU per request.
func measure(ctx context.Context, s *server, kind string, o options) error {
	send := patch
	if kind == "server-side apply" {
		send = apply
	}
	cpu0, err := s.cp.CPUTime()
	if err != nil {
		return err
	}
	var next atomic.Int64
	latencies := make([][]time.Duration, o.workers)
	errs := make([]error, o.workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range o.workers {
		wg.Go(func() {
			name := deploymentName(w)
			for i := 0; ; i++ {
				if next.Add(1) > int64(o.ops) {
					return
				}
				t := time.Now()
				if err := send(ctx, s.cs, name, fmt.Sprintf("app:%d", i%2+1)); err != nil {
					errs[w] = err
					return
				}
				latencies[w] = append(latencies[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := s.cp.CPUTime()
	if err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	s.rate[kind] = append(s.rate[kind], float64(len(all))/elapsed.Seconds())
	s.p50[kind] = append(s.p50[kind], all[len(all)/2])
	s.p99[kind] = append(s.p99[kind], all[len(all)*99/100])
	s.cpuPerReq[kind] = append(s.cpuPerReq[kind], (cpu1-cpu0)/time.Duration(len(all)))
	return nil
}

func median[T int64 | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func report(servers []*server) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "server\tchange\trequests/s\tp50\tp99\tserver CPU/request\n")
	for _, s := range servers {
		for _, kind := range kinds {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%v\t%v\t%v\n", s.name, kind, median(s.rate[kind]),
				median(s.p50[kind]).Round(10*time.Microsecond), median(s.p99[kind]).Round(10*time.Microsecond),
				median(s.cpuPerReq[kind]).Round(time.Microsecond))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println()
	fmt.Fprintf(tw, "server\tapply/patch CPU per request\tapply/patch requests/s\n")
	for _, s := range servers {
		a, p := kinds[1], kinds[0]
		fmt.Fprintf(tw, "%s\t%.2f×\t%.2f×\n", s.name,
			float64(median(s.cpuPerReq[a]))/float64(median(s.cpuPerReq[p])), median(s.rate[a])/median(s.rate[p]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(servers) == 2 {
		kube, wp := servers[0], servers[1]
		fmt.Printf("\nwasmplane/kube-apiserver server-side apply requests/s: %.2f×\n", median(wp.rate[kinds[1]])/median(kube.rate[kinds[1]]))
	}
	return nil
}
