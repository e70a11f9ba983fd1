// Command policy measures what one rule — pods must carry the label `team` — adds to a pod
// create, written in every policy mechanism there is, on wasmplane and on the real
// kube-apiserver (v1.37.2 + etcd, from the peers directory) in the same run:
//
//   - a ValidatingAdmissionPolicy (CEL) on each server;
//   - a validating webhook (HTTPS on loopback, this process) on each server;
//   - on wasmplane, WASM plugins in Rust, C, AssemblyScript, standard Go and Rego
//     (Gatekeeper's k8srequiredlabels compiled by OPA), built from examples/plugins.
//
// Each mechanism is bound to a namespace of its own; the creates are pods that carry the
// label, so every policy evaluates and allows. At the fixed rate the cases of a server
// take turns create by create (create k goes to case k mod n), so every case sees the
// same load — the rate is the server's, over all its cases — and the same drift; at
// saturation each case runs alone in turn (each round starting with another), so that
// its creates/s and the server's CPU per create are its own, and its pods are deleted
// after it, so that no case pays for the pods of those before it. Figures: p50/p99 at the fixed rate; creates/s,
// p50/p99 and the server's CPU per create at saturation; each with what the case adds
// over its own server's no-policy baseline.
//
//	go run ./tests/bench/policy                       # both servers, every case
//	go run ./tests/bench/policy -only wasmplane -langs rust,rego
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit"
	"github.com/wasmplane/wasmplane/tests/internal/peers"
	"github.com/wasmplane/wasmplane/tests/internal/requireteam"
	"github.com/wasmplane/wasmplane/tests/internal/webhookserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

type options struct {
	peersDir   string
	only       string
	langs      string
	rate       int
	seconds    float64
	rounds     int
	saturation int
	workers    int
	bin        string
}

func main() {
	var o options
	flag.StringVar(&o.peersDir, "peers", peers.DefaultDir(), "directory holding etcd and kube-apiserver v1.37.2")
	flag.StringVar(&o.only, "only", "", "run one side only: wasmplane or kube-apiserver")
	flag.StringVar(&o.langs, "langs", "rust,c,assemblyscript,go,rego", "WASM plugin languages on wasmplane (comma-separated; empty for none)")
	flag.IntVar(&o.rate, "rate", 200, "creates/s of the fixed-rate figure")
	flag.Float64Var(&o.seconds, "seconds", 20, "seconds of fixed-rate creates per server and round (its cases take turns)")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds: every case runs once per round")
	flag.IntVar(&o.saturation, "saturation", 600, "creates per case and round at saturation (0 skips the figure)")
	flag.IntVar(&o.workers, "workers", 16, "parallel clients at saturation")
	flag.StringVar(&o.bin, "wasmplane-bin", "", "run this wasmplane binary instead of building ./cmd/wasmplane")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		slog.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

// server is one control plane under test and the cases set up on it.
type server struct {
	name  string
	cp    *peers.ControlPlane
	cs    kubernetes.Interface
	cfg   *rest.Config
	cases []string
}

// sample is what one case measured on one server, over all rounds.
type sample struct {
	paced, saturated []time.Duration
	satElapsed       time.Duration
	satCreates       int
	// satCPU is the server's processes' CPU time over the saturation creates
	// (kube-apiserver's includes its etcd; the webhook's runs in this process, not counted)
	satCPU time.Duration
}

func run(ctx context.Context, o options) error {
	work, err := os.MkdirTemp("", "wasmplane-policy-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	hook, err := webhookserver.New(requireteam.Decide)
	if err != nil {
		return err
	}
	defer hook.Stop()

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
		if s.cfg, err = s.cp.RESTConfig(); err != nil {
			return err
		}
		s.cfg.QPS, s.cfg.Burst = -1, 0 // no client-side throttling: the server is measured
		if s.cs, err = kubernetes.NewForConfig(s.cfg); err != nil {
			return err
		}
		if err := setUp(ctx, s, hook, o, work); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}

	results := map[string]map[string]*sample{}
	for _, s := range servers {
		results[s.name] = map[string]*sample{}
		for _, c := range s.cases {
			results[s.name][c] = &sample{}
		}
	}
	seq := 0
	// What each case builds once (its plugin's instances, the policy's compiled program,
	// the webhook's connections) is built before anything is counted.
	for _, s := range servers {
		for _, c := range s.cases {
			warm := o
			warm.saturation = o.workers * 4
			if _, err := saturate(ctx, s.cs, c, warm, &seq); err != nil {
				return fmt.Errorf("%s %s warm-up: %w", s.name, c, err)
			}
		}
		if err := clearPods(ctx, s.cs, s.cases); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	for round := range o.rounds {
		for _, s := range servers {
			lat, err := paced(ctx, s.cs, s.cases, o, &seq)
			if err != nil {
				return fmt.Errorf("%s round %d at %d creates/s: %w", s.name, round+1, o.rate, err)
			}
			for i, c := range s.cases {
				results[s.name][c].paced = append(results[s.name][c].paced, lat[i]...)
			}
			if err := clearPods(ctx, s.cs, s.cases); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			if o.saturation == 0 {
				continue
			}
			// Each round starts with another case, and every case's pods are deleted
			// after it: a case measured alone must not pay for the pods (watch cache, heap
			// to mark, etcd) that the cases before it left behind.
			for k := range s.cases {
				c := s.cases[(k+round)%len(s.cases)]
				r := results[s.name][c]
				cpu0, err := s.cp.CPUTime()
				if err != nil {
					return err
				}
				start := time.Now()
				lat, err := saturate(ctx, s.cs, c, o, &seq)
				if err != nil {
					return fmt.Errorf("%s %s round %d: %w", s.name, c, round+1, err)
				}
				r.satElapsed += time.Since(start)
				cpu1, err := s.cp.CPUTime()
				if err != nil {
					return err
				}
				r.satCPU += cpu1 - cpu0
				r.satCreates += len(lat)
				r.saturated = append(r.saturated, lat...)
				if err := clearPods(ctx, s.cs, []string{c}); err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
			}
		}
	}
	report(os.Stdout, servers, results, o)
	return nil
}

func mkdir(parent, name string) string {
	d := filepath.Join(parent, name)
	_ = os.MkdirAll(d, 0o755)
	return d
}

// setUp creates one namespace per case and binds that case's policy to it.
func setUp(ctx context.Context, s *server, hook *webhookserver.Server, o options, work string) error {
	s.cases = []string{"baseline", "vap", "webhook"}
	for _, c := range s.cases {
		if err := namespace(ctx, s.cs, c); err != nil {
			return err
		}
	}
	sel := func(c string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"bench-policy": c}}
	}
	if _, err := s.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, requireteam.Policy(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the policy: %w", err)
	}
	if _, err := s.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, requireteam.Binding(sel("vap")), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the binding: %w", err)
	}
	if _, err := s.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, requireteam.Webhook(hook.ClientConfig("/validate"), sel("webhook")), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the webhook configuration: %w", err)
	}
	if s.name == "wasmplane" && o.langs != "" {
		client, err := toolkit.NewClientForConfig(s.cfg)
		if err != nil {
			return err
		}
		for _, lang := range strings.Split(o.langs, ",") {
			c := "wasm-" + lang
			if err := namespace(ctx, s.cs, c); err != nil {
				return err
			}
			res, err := toolkit.Build(ctx, toolkit.BuildOptions{Dir: filepath.Join("examples/plugins", lang, "require-labels"), Out: filepath.Join(work, lang+".wasm")})
			if err != nil {
				return fmt.Errorf("building the %s plugin: %w", lang, err)
			}
			mod, err := os.ReadFile(res.Path)
			if err != nil {
				return err
			}
			m, _, err := client.PushIn(ctx, mod, c)
			if err != nil {
				return err
			}
			spec, err := toolkit.BuildSpec(toolkit.SpecOptions{Digest: m.Spec.Digest, Hooks: []string{"validate"}, Rules: []string{"pods:CREATE"},
				Config: []byte(`{"labels":["team"]}`), FailurePolicy: "Fail"})
			if err != nil {
				return err
			}
			if _, _, err := client.Apply(ctx, toolkit.ApplyOptions{Name: "require-team", Namespace: c, Spec: spec}); err != nil {
				return err
			}
			s.cases = append(s.cases, c)
		}
	}
	// Each policy is in force once a pod without the label is refused in its namespace.
	for _, c := range s.cases[1:] {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p := pod("probe", false)
			_, err := s.cs.CoreV1().Pods(c).Create(ctx, p, metav1.CreateOptions{})
			if err == nil {
				return false, s.cs.CoreV1().Pods(c).Delete(ctx, p.Name, metav1.DeleteOptions{})
			}
			return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), nil
		})
		if err != nil {
			return fmt.Errorf("the %s policy never refused a pod: %w", c, err)
		}
	}
	return nil
}

// namespace creates a case's namespace with its default ServiceAccount (neither server
// runs the controller that would add it, and pods name it).
func namespace(ctx context.Context, cs kubernetes.Interface, c string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c, Labels: map[string]string{"bench-policy": c}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", c, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts(c).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("service account in %s: %w", c, err)
	}
	return nil
}

func pod(name string, team bool) *corev1.Pod {
	labels := map[string]string{"app": "bench"}
	if team {
		labels["team"] = "a"
	}
	f := false
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: &f, Containers: []corev1.Container{{Name: "c", Image: "example.com/hello:1"}}}}
}

// paced creates at o.rate for o.seconds, the cases taking turns create by create, and
// returns each case's latencies.
func paced(ctx context.Context, cs kubernetes.Interface, cases []string, o options, seq *int) ([][]time.Duration, error) {
	n := int(float64(o.rate) * o.seconds)
	interval := time.Second / time.Duration(o.rate)
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		*seq++
		name, ns := fmt.Sprintf("p-%d", *seq), cases[i%len(cases)]
		wg.Go(func() {
			t0 := time.Now()
			_, errs[i] = cs.CoreV1().Pods(ns).Create(ctx, pod(name, true), metav1.CreateOptions{})
			lat[i] = time.Since(t0)
		})
	}
	wg.Wait()
	byCase := make([][]time.Duration, len(cases))
	for i, d := range lat {
		byCase[i%len(cases)] = append(byCase[i%len(cases)], d)
	}
	return byCase, errors.Join(errs...)
}

// clearPods deletes the pods of the cases' namespaces and waits until they are gone
// (neither server schedules them, so they go at once, without a grace period).
func clearPods(ctx context.Context, cs kubernetes.Interface, cases []string) error {
	zero := int64(0)
	for _, c := range cases {
		if err := cs.CoreV1().Pods(c).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting the pods of %s: %w", c, err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, c := range cases {
			l, err := cs.CoreV1().Pods(c).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil || len(l.Items) > 0 {
				return false, err
			}
		}
		return true, nil
	})
}

// saturate creates o.saturation pods with o.workers clients.
func saturate(ctx context.Context, cs kubernetes.Interface, ns string, o options, seq *int) ([]time.Duration, error) {
	base := *seq
	*seq += o.saturation
	var next atomic.Int64
	lat := make([]time.Duration, o.saturation)
	errs := make([]error, o.workers)
	var wg sync.WaitGroup
	for w := range o.workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= o.saturation {
					return
				}
				t0 := time.Now()
				_, err := cs.CoreV1().Pods(ns).Create(ctx, pod(fmt.Sprintf("p-%d", base+i+1), true), metav1.CreateOptions{})
				lat[i] = time.Since(t0)
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return lat, errors.Join(errs...)
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond)) }

func added(d, base time.Duration) string {
	return fmt.Sprintf("%+.0f", float64(d-base)/float64(time.Microsecond))
}

func report(w *os.File, servers []*server, results map[string]map[string]*sample, o options) {
	fmt.Fprintf(w, "\nrule: pods must carry the label team; %d rounds; fixed rate %d creates/s for %.1f s per server and round, its cases taking turns create by create; saturation %d creates per case and round with %d clients\n",
		o.rounds, o.rate, o.seconds, o.saturation, o.workers)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\tcase\tcreates\trate p50 µs\tp99 µs\tadds p50\tadds p99\tsat creates/s\tsat p50 µs\tsat p99 µs\tadds p50\tadds p99\tserver CPU/create µs\tadds\t")
	for _, s := range servers {
		base := results[s.name]["baseline"]
		bp50, bp99 := pct(base.paced, 0.5), pct(base.paced, 0.99)
		bs50, bs99 := pct(base.saturated, 0.5), pct(base.saturated, 0.99)
		bcpu := perCreate(base)
		for _, c := range s.cases {
			r := results[s.name][c]
			p50, p99 := pct(r.paced, 0.5), pct(r.paced, 0.99)
			s50, s99 := pct(r.saturated, 0.5), pct(r.saturated, 0.99)
			tput := 0.0
			if r.satElapsed > 0 {
				tput = float64(r.satCreates) / r.satElapsed.Seconds()
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.name, c, len(r.paced), us(p50), us(p99), added(p50, bp50), added(p99, bp99),
				tput, us(s50), us(s99), added(s50, bs50), added(s99, bs99), us(perCreate(r)), added(perCreate(r), bcpu))
		}
	}
	_ = tw.Flush()
}

// perCreate is the server's CPU per create at saturation.
func perCreate(r *sample) time.Duration {
	return r.satCPU / time.Duration(max(r.satCreates, 1))
}
