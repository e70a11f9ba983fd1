// Command controllers times wasmplane's workload controllers side by side with
// kube-controller-manager v1.37.2 running against the same kind of wasmplane API server
// (an in-process server with its own controllers disabled; wasmplane's scheduler binds
// the pods on every side). Each side's controllers run as a process of their own:
// wasmplane's controller manager (this program run again), kube-controller-manager as
// shipped (client limit 20 QPS) and kube-controller-manager with wasmplane's client
// limit (kcm-qps2000). The nodes are simulated (tests/internal/simnode): one agent
// writes the status a kubelet would — run-to-completion pods succeed at once, the
// others run ready at once — so every figure times the API server, the controllers and
// the scheduler, never containers. Phases:
//
//   - job: a Job of 1,000 completions, parallelism 100, on 10 nodes, until Complete;
//   - daemonset: a DaemonSet on 100 nodes, until a pod is available on each;
//   - statefulset: a StatefulSet scaled 0 → 100 (OrderedReady, then Parallel), until
//     every replica is ready;
//   - endpointslice: 100 pods behind a Service turn Ready and not Ready, 100 changes/s;
//     the latency from the status write to the EndpointSlice showing it.
//
// Each side runs each phase on a fresh server; rounds repeat them, alternating which
// side goes first.
//
//	go run ./tests/bench/controllers -peers /work/peers
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/peers"
	"k8s.io/client-go/tools/clientcmd"
)

type options struct {
	peersDir, phases, sides string
	kcmArgs, logDir         string
	rounds                  int
	jobCompletions, jobPar  int
	jobNodes, nodes, sts    int
	epPods                  int
	epRate                  float64
	epDuration              time.Duration
	phaseTimeout, timeout   time.Duration
	profileDir              string
}

func main() {
	var o options
	flag.StringVar(&o.peersDir, "peers", peers.DefaultDir(), "directory holding kube-controller-manager v1.37.2")
	flag.StringVar(&o.phases, "phases", "job,daemonset,statefulset,endpointslice", "phases to run, comma-separated")
	flag.StringVar(&o.sides, "sides", strings.Join(sideNames(), ","), "sides to run, comma-separated")
	flag.StringVar(&o.kcmArgs, "kcm-args", "", "extra kube-controller-manager flags, space-separated, for both of its sides")
	flag.StringVar(&o.logDir, "kcm-log-dir", "", "keep kube-controller-manager's log of every run in this directory")
	flag.IntVar(&o.rounds, "rounds", 2, "times each side runs every phase")
	flag.IntVar(&o.jobCompletions, "job-completions", 1000, "the Job's completions")
	flag.IntVar(&o.jobPar, "job-parallelism", 100, "the Job's parallelism")
	flag.IntVar(&o.jobNodes, "job-nodes", 10, "nodes while the Job runs")
	flag.IntVar(&o.nodes, "nodes", 100, "nodes from the DaemonSet phase on")
	flag.IntVar(&o.sts, "replicas", 100, "StatefulSet replicas")
	flag.IntVar(&o.epPods, "ep-pods", 100, "pods behind the Service of the EndpointSlice phase")
	flag.Float64Var(&o.epRate, "ep-rate", 100, "pod readiness changes per second in the EndpointSlice phase")
	flag.DurationVar(&o.epDuration, "ep-duration", 10*time.Second, "how long readiness changes are made")
	flag.DurationVar(&o.phaseTimeout, "phase-timeout", 5*time.Minute, "give a phase up after this long")
	flag.DurationVar(&o.timeout, "timeout", 40*time.Minute, "give the whole run up after this long")
	flag.StringVar(&o.profileDir, "cpuprofile-dir", "", "write a CPU profile of this process (API server, etcd, scheduler, simulated nodes) during each side's phases of the first round here")
	cmOf := flag.String("controller-manager-of", "", "(internal) run wasmplane's controller manager against this kubeconfig")
	cmProfile := flag.String("controller-manager-cpuprofile", "", "(internal) with -controller-manager-of, write a CPU profile of the controller manager here")
	flag.Parse()
	if *cmOf != "" {
		if err := runControllerManager(*cmOf, *cmProfile); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(ctx, o, log); err != nil {
		log.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

// runControllerManager is this program run again as wasmplane's controllers in a
// process of their own, as kube-controller-manager runs in its own: the same client
// path (TLS, authentication) and the same competition for the CPU on both sides.
func runControllerManager(kubeconfig, profile string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("profiling the controller manager: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return server.RunControllerManager(ctx, cfg, server.ControllerManagerOptions{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
}

func run(ctx context.Context, o options, log *slog.Logger) error {
	phases := strings.Split(o.phases, ",")
	for _, p := range phases {
		if !slices.Contains(phaseNames(), p) {
			return fmt.Errorf("unknown phase %q (have %s)", p, strings.Join(phaseNames(), ", "))
		}
	}
	var sides []side
	for _, name := range strings.Split(o.sides, ",") {
		s, err := sideNamed(name, o)
		if err != nil {
			return err
		}
		sides = append(sides, s)
	}
	res := newResults()
	for round := range o.rounds {
		order := slices.Clone(sides)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		// Each phase on a fresh server, so that no phase works amid the objects of the
		// one before.
		for _, p := range phases {
			for _, s := range order {
				fmt.Fprintf(os.Stderr, "round %d, %s: %s\n", round+1, p, s.name)
				if err := runSide(ctx, o, s, p, round, res, log); err != nil {
					return fmt.Errorf("round %d, %s: %w", round+1, s.name, err)
				}
			}
		}
	}
	res.print(os.Stdout, sides)
	return nil
}
