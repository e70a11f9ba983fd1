// Command apf measures what API Priority and Fairness buys while a tenant floods the
// server with LIST requests, on wasmplane and on the real kube-apiserver v1.37.2 + etcd
// side by side, in one run and with the same flood: the issue's benchmark, "a tenant
// flooding LIST requests at 10× the server's capacity must not raise another tenant's
// create p99 above 2× its baseline".
//
// On each server (`wasmplane up` without kubelet, scheduler or controllers; etcd +
// kube-apiserver, both with priority and fairness on as by default): the tenant user
// "flooder" gets a FlowSchema that puts it on a level of one share without borrowing (the
// recipe of docs/multi-tenancy.md); the other users fall under the bootstrap
// configuration (global-default). -objects ConfigMaps fill the namespace the tenant lists.
// Then, per server:
//
//   - capacity: the LISTs per second the server completes for -probe-clients exempt
//     (admin) clients, one request at a time each, over -probe;
//   - baseline: -users other users each create ConfigMaps one at a time for -duration,
//     alone;
//   - flooded: the same, while the tenant sends LISTs open-loop at -overload × the
//     capacity (each LIST in its own request, up to -max-outstanding at once; what the
//     limit holds back is counted as not sent), ignoring 429s.
//
// It prints the other users' create p50/p99 in both phases and the ratio of the p99s, and
// the CPU each party used in each phase: the server (wasmplane; kube-apiserver and etcd),
// this program's other users, and the flooding client.
//
// The flooding client runs in a process of its own (this program, re-executed with
// -flood-child), under `nice -n 19` and with GOMAXPROCS=1 by default (-flood-nice,
// -flood-gomaxprocs), for both servers alike. On the 2-core machine the benchmark runs on,
// a flood of thousands of requests a second costs its client about as much CPU as it
// costs the server to refuse them; in a cluster that client runs on another machine.
// Left at the same priority as the server, the benchmark would measure the client
// stealing the server's CPU rather than how the server treats the other tenants. The
// flood's definition is unchanged: open loop at -overload × the measured capacity, LISTs
// each in their own request; the client counts the LISTs it owed and could not send (at
// -max-outstanding in flight), and the CPU it used is printed so that a starved client
// shows. The flood runs for -flood-warmup before the phase starts: a cold client's burst
// of TLS handshakes is not what the benchmark is about. -profile-dir writes each server's
// CPU profile of the flooded phase; -flood-rate floods at a fixed rate instead, to compare
// two builds of one server under the same flood (e.g. with -only wasmplane
// -wasmplane-bin).
//
//	go run ./tests/bench/apf -peers /work/peers
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/peers"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

type options struct {
	peersDir, only, bin    string
	duration, probe        time.Duration
	users, objects         int
	probeClients, outstand int
	overload, maxP99Ratio  float64
	timeout                time.Duration
	floodNice, floodProcs  int
	floodWarmup            time.Duration
	// floodRate, when set, replaces overload × capacity: the same flood for two builds
	// of one server whose capacities differ.
	floodRate  float64
	profileDir string
	// child runs this process as the flooding client (see floodChild).
	child                     bool
	childKubeconfig, childURL string
	childRate                 float64
}

func main() {
	var o options
	flag.StringVar(&o.peersDir, "peers", peers.DefaultDir(), "directory holding etcd and kube-apiserver v1.37.2")
	flag.StringVar(&o.only, "only", "", "run one side only: wasmplane or kube-apiserver")
	flag.StringVar(&o.bin, "wasmplane-bin", "", "run this wasmplane binary instead of building ./cmd/wasmplane")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of the baseline and of the flooded phase")
	flag.DurationVar(&o.probe, "probe", 3*time.Second, "length of the capacity probe")
	flag.IntVar(&o.users, "users", 2, "other users, each creating one ConfigMap at a time")
	flag.IntVar(&o.objects, "objects", 100, "ConfigMaps (1 KiB each) in the namespace the tenant lists")
	flag.IntVar(&o.probeClients, "probe-clients", 8, "exempt clients of the capacity probe")
	flag.IntVar(&o.outstand, "max-outstanding", 1000, "the flood's bound on LISTs in flight")
	flag.Float64Var(&o.overload, "overload", 10, "the flood's rate as a multiple of the measured capacity")
	flag.Float64Var(&o.maxP99Ratio, "max-p99-ratio", 2, "the issue's bound on flooded/baseline create p99")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.IntVar(&o.floodNice, "flood-nice", 19, "niceness of the flooding client's process (0: as the rest)")
	flag.IntVar(&o.floodProcs, "flood-gomaxprocs", 1, "GOMAXPROCS of the flooding client's process (0: the Go default)")
	flag.DurationVar(&o.floodWarmup, "flood-warmup", 2*time.Second, "how long the flood runs before the flooded phase starts")
	flag.Float64Var(&o.floodRate, "flood-rate", 0, "LISTs/s of the flood instead of -overload × the measured capacity (to compare two builds under the same flood)")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write each server's CPU profile of the flooded phase here")
	flag.BoolVar(&o.child, "flood-child", false, "internal: be the flooding client")
	flag.StringVar(&o.childKubeconfig, "flood-kubeconfig", "", "internal: the flooding client's admin kubeconfig")
	flag.StringVar(&o.childURL, "flood-url", "", "internal: the URL the flooding client lists")
	flag.Float64Var(&o.childRate, "flood-child-rate", 0, "internal: the flooding client's LISTs per second")
	flag.Parse()
	if o.child {
		if err := floodChild(o); err != nil {
			fmt.Fprintln(os.Stderr, "flooding client:", err)
			os.Exit(1)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := run(ctx, o); err != nil {
		slog.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

// side is one server and its figures.
type side struct {
	name  string
	cp    *peers.ControlPlane
	admin *rest.Config
	// capacity is LISTs/s; flood counts the flood's LISTs.
	capacity                          float64
	flood                             floodCounts
	baseline, flooded                 []time.Duration
	baselineFailures, floodedFailures int
	// The CPU used in the baseline (b) and the flooded (f) phase by the server's
	// processes, by this program (the other users) and by the flooding client.
	serverB, serverF, usersB, usersF, flooderCPU time.Duration
}

// floodCounts are the flooding client's LISTs, as it reports them.
type floodCounts struct {
	// Offered is what the rate owed; Unsent those held back at -max-outstanding.
	Offered, Served, Rejected, Unsent, OtherErrors int64
}

func run(ctx context.Context, o options) error {
	work, err := os.MkdirTemp("", "wasmplane-apf-bench-")
	if err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	defer os.RemoveAll(work)
	var sides []*side
	if o.only != "kube-apiserver" {
		dir := filepath.Join(work, "wasmplane")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		cp, err := peers.StartWasmplane(ctx, o.bin, dir, "--disable-kubelet", "--disable-scheduler", "--disable-controllers")
		if err != nil {
			return fmt.Errorf("starting wasmplane: %w", err)
		}
		defer cp.Stop()
		sides = append(sides, &side{name: "wasmplane", cp: cp})
	}
	if o.only != "wasmplane" {
		dir := filepath.Join(work, "kube")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		cp, err := peers.Start(ctx, peers.Options{Dir: o.peersDir, WorkDir: dir})
		if err != nil {
			return fmt.Errorf("starting kube-apiserver: %w", err)
		}
		defer cp.Stop()
		sides = append(sides, &side{name: "kube-apiserver", cp: cp})
	}
	if len(sides) == 0 {
		return fmt.Errorf("-only %q: want wasmplane or kube-apiserver", o.only)
	}
	// Every side is set up before any is measured, so that the idle other server costs the
	// same in every phase.
	for _, s := range sides {
		if s.admin, err = s.cp.RESTConfig(); err != nil {
			return fmt.Errorf("%s: admin config: %w", s.name, err)
		}
		s.admin.QPS, s.admin.Burst = -1, 0 // the server is measured, not client-side throttling
		if err := setUp(ctx, s.admin, o); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	for _, s := range sides {
		if err := measure(ctx, s, o); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	printResults(os.Stdout, sides, o)
	return nil
}

// measure runs the capacity probe, the baseline and the flooded phase on one server.
func measure(ctx context.Context, s *side, o options) error {
	listURL := s.cp.URL + "/api/v1/namespaces/flood/configmaps"
	admin, err := rest.HTTPClientFor(s.admin)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	var done atomic.Int64
	probeCtx, stop := context.WithTimeout(ctx, o.probe)
	var wg sync.WaitGroup
	for range o.probeClients {
		wg.Go(func() {
			for probeCtx.Err() == nil {
				if code, err := do(probeCtx, admin, http.MethodGet, listURL, ""); err == nil && code == http.StatusOK {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	stop()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.capacity = float64(done.Load()) / o.probe.Seconds()
	if s.capacity == 0 {
		return errors.New("capacity probe: no LIST completed")
	}
	users := make([]*http.Client, o.users)
	for u := range users {
		if users[u], err = asUser(s.admin, fmt.Sprintf("user-%d", u)); err != nil {
			return err
		}
	}
	cpu0 := s.cpu()
	if s.baseline, s.baselineFailures, err = creates(ctx, s.cp.URL, users, "b", o.duration); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	cpu1 := s.cpu()
	flood, err := startFlood(ctx, s, listURL, o)
	if err != nil {
		return err
	}
	profiled := make(chan error, 1)
	if o.profileDir != "" {
		cs, err := kubernetes.NewForConfig(s.admin)
		if err != nil {
			return fmt.Errorf("profile client: %w", err)
		}
		go func() {
			profiled <- peers.CPUProfile(ctx, cs, max(o.duration-time.Second, time.Second), o.profileDir, s.name+" flooded")
		}()
	} else {
		profiled <- nil
	}
	cpu2 := s.cpu()
	s.flooded, s.floodedFailures, err = creates(ctx, s.cp.URL, users, "f", o.duration)
	cpu3 := s.cpu()
	s.flood, s.flooderCPU = flood.stop()
	if perr := <-profiled; perr != nil {
		slog.Warn("no CPU profile", "server", s.name, "err", perr)
	}
	if err != nil {
		return fmt.Errorf("flooded: %w", err)
	}
	s.serverB, s.usersB = cpu1.server-cpu0.server, cpu1.self-cpu0.self
	s.serverF, s.usersF = cpu3.server-cpu2.server, cpu3.self-cpu2.self
	return nil
}

// floodRate is the flood's LISTs per second on s.
func (s *side) floodRate(o options) float64 {
	if o.floodRate > 0 {
		return o.floodRate
	}
	return s.capacity * o.overload
}

// cpuSample is the CPU time used so far by a server's processes and by this program.
type cpuSample struct{ server, self time.Duration }

// cpu samples the CPU time of the server's processes (each counted once, whatever the
// names it is known by) and of this process.
func (s *side) cpu() cpuSample {
	var c cpuSample
	c.server, _ = s.cp.CPUTime()
	c.self, _ = peers.SelfCPU()
	return c
}

// floodProcess is the flooding client's process while it runs.
type floodProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

// startFlood starts this program again as the flooding client of s at overload × its
// capacity (under nice and GOMAXPROCS as the options say) and returns once it floods.
func startFlood(ctx context.Context, s *side, listURL string, o options) (*floodProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program: %w", err)
	}
	args := []string{self, "-flood-child", "-flood-kubeconfig", s.cp.Kubeconfig, "-flood-url", listURL,
		"-flood-child-rate", strconv.FormatFloat(s.floodRate(o), 'f', 1, 64), "-max-outstanding", strconv.Itoa(o.outstand),
		"-flood-warmup", o.floodWarmup.String()}
	if o.floodNice != 0 {
		args = append([]string{"nice", "-n", strconv.Itoa(o.floodNice)}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = os.Environ()
	if o.floodProcs > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(o.floodProcs))
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("flooding client: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("flooding client: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the flooding client: %w", err)
	}
	f := &floodProcess{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(out)}
	if line, err := f.stdout.ReadString('\n'); err != nil || line != "flooding\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the flooding client did not start (%q): %v", line, err)
	}
	return f, nil
}

// stop tells the flooding client to stop (by closing its input) and returns its counts
// and the CPU it used.
func (f *floodProcess) stop() (floodCounts, time.Duration) {
	_ = f.stdin.Close()
	var c floodCounts
	if err := json.NewDecoder(f.stdout).Decode(&c); err != nil {
		slog.Warn("no counts from the flooding client", "err", err)
	}
	if err := f.cmd.Wait(); err != nil {
		slog.Warn("flooding client", "err", err)
	}
	if f.cmd.ProcessState == nil {
		return c, 0
	}
	return c, f.cmd.ProcessState.UserTime() + f.cmd.ProcessState.SystemTime()
}

// floodChild is the flooding client: it lists o.childURL as the tenant at o.childRate
// from the line "flooding" on its output until its input ends, then writes its counts
// as JSON.
func floodChild(o options) error {
	admin, err := clientcmd.BuildConfigFromFlags("", o.childKubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	admin.QPS, admin.Burst = -1, 0
	flooder, err := asUser(admin, "flooder")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c floodCounts
	done := make(chan struct{})
	go func() {
		defer close(done)
		flood(ctx, flooder, o.childURL, o.childRate, o.outstand, &c)
	}()
	// The warm-up opens the client's connections (Go's client dials one per request while
	// none is ready: hundreds of TLS handshakes at a cold start) and brings the server to
	// its steady state under the flood before anything is counted.
	time.Sleep(o.floodWarmup)
	before := c.load()
	fmt.Println("flooding")
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	<-done
	after := c.load()
	return json.NewEncoder(os.Stdout).Encode(floodCounts{Offered: after.Offered - before.Offered, Served: after.Served - before.Served,
		Rejected: after.Rejected - before.Rejected, Unsent: after.Unsent - before.Unsent, OtherErrors: after.OtherErrors - before.OtherErrors})
}

// load reads the counts while the flood updates them.
func (c *floodCounts) load() floodCounts {
	return floodCounts{Offered: atomic.LoadInt64(&c.Offered), Served: atomic.LoadInt64(&c.Served), Rejected: atomic.LoadInt64(&c.Rejected),
		Unsent: atomic.LoadInt64(&c.Unsent), OtherErrors: atomic.LoadInt64(&c.OtherErrors)}
}

// flood sends LISTs as the tenant at rate until ctx ends, each LIST in a goroutine of its
// own so that a slow answer does not slow the flood; at most outstanding are in flight.
// The LISTs owed are counted from the time elapsed, not from ticks, which a loaded
// machine skips.
func flood(ctx context.Context, c *http.Client, url string, rate float64, outstanding int, n *floodCounts) {
	slots := make(chan struct{}, outstanding)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	start, sent := time.Now(), 0.0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		owed := rate*time.Since(start).Seconds() - sent
		for ; owed >= 1; owed-- {
			sent++
			atomic.AddInt64(&n.Offered, 1)
			select {
			case slots <- struct{}{}:
			default:
				atomic.AddInt64(&n.Unsent, 1)
				continue
			}
			wg.Go(func() {
				defer func() { <-slots }()
				code, err := do(ctx, c, http.MethodGet, url, "")
				switch {
				case ctx.Err() != nil:
					// Cut off at the phase's end: neither served nor refused.
				case err != nil:
					atomic.AddInt64(&n.OtherErrors, 1)
				case code == http.StatusTooManyRequests:
					atomic.AddInt64(&n.Rejected, 1)
				case code == http.StatusOK:
					atomic.AddInt64(&n.Served, 1)
				default:
					atomic.AddInt64(&n.OtherErrors, 1)
				}
			})
		}
	}
}

// creates has each user create ConfigMaps in its namespace one at a time for d, and
// returns the latencies of the creates that succeeded and the count of those that did not.
func creates(ctx context.Context, url string, users []*http.Client, prefix string, d time.Duration) ([]time.Duration, int, error) {
	phase, stop := context.WithTimeout(ctx, d)
	defer stop()
	var mu sync.Mutex
	var lat []time.Duration
	failures := 0
	var wg sync.WaitGroup
	for u, c := range users {
		ns := fmt.Sprintf("user-%d", u)
		wg.Go(func() {
			for n := 0; ; n++ {
				start := time.Now()
				code, err := do(phase, c, http.MethodPost, url+"/api/v1/namespaces/"+ns+"/configmaps", configMap(fmt.Sprintf("%s-%d", prefix, n), 16))
				took := time.Since(start)
				if phase.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil || code != http.StatusCreated {
					failures++
				} else {
					lat = append(lat, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	if len(lat) == 0 {
		return nil, failures, fmt.Errorf("no create succeeded (%d failed)", failures)
	}
	return lat, failures, nil
}

// printResults prints one line of figures per server, the CPU each party used, and the
// flood LISTs that failed oddly.
func printResults(w io.Writer, sides []*side, o options) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	sec := o.duration.Seconds()
	fmt.Fprintf(tw, "server\tLIST capacity/s\tflood offered/s\tserved/s\t429/s\tnot sent/s\tbaseline create p50 / p99\tflooded create p50 / p99\tp99 ratio\tcreates baseline / flooded\n")
	for _, s := range sides {
		ratio := float64(pct(s.flooded, 99)) / float64(pct(s.baseline, 99))
		verdict := "within"
		if ratio > o.maxP99Ratio {
			verdict = "ABOVE"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%v / %v\t%v / %v\t%.2f (%s %.0f×)\t%d / %d (failed %d / %d)\n", s.name, s.capacity,
			float64(s.flood.Offered)/sec, float64(s.flood.Served)/sec, float64(s.flood.Rejected)/sec, float64(s.flood.Unsent)/sec,
			pct(s.baseline, 50), pct(s.baseline, 99), pct(s.flooded, 50), pct(s.flooded, 99), ratio, verdict, o.maxP99Ratio,
			len(s.baseline), len(s.flooded), s.baselineFailures, s.floodedFailures)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nCPU used, in cores (CPU seconds per second of the phase); the flooding client under nice %d, GOMAXPROCS %d:\n", o.floodNice, o.floodProcs)
	fmt.Fprintf(tw, "server\tserver baseline\tserver flooded\tother users baseline\tother users flooded\tflooding client\n")
	for _, s := range sides {
		c := func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()/sec) }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.name, c(s.serverB), c(s.serverF), c(s.usersB), c(s.usersF), c(s.flooderCPU))
	}
	tw.Flush()
	for _, s := range sides {
		if s.flood.OtherErrors > 0 {
			fmt.Fprintf(w, "%s: %d flood LISTs failed otherwise than with 429\n", s.name, s.flood.OtherErrors)
		}
	}
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(100 * time.Microsecond)
}

// configMap is a ConfigMap of about kib KiB of data.
func configMap(name string, kib int) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"k":%q}}`, name, strings.Repeat("v", kib<<10))
}

// do sends one request and reads the whole answer.
func do(ctx context.Context, c *http.Client, method, url, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// asUser is a raw HTTP client (client-go's would retry 429s itself) that acts as name in
// group "tenants" by impersonation: both servers classify a request for priority and
// fairness by the impersonated user, as the filter runs after impersonation.
func asUser(admin *rest.Config, name string) (*http.Client, error) {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"tenants"}}
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", name, err)
	}
	return c, nil
}

// setUp makes the namespaces and the ConfigMaps the tenant lists, lets the tenants read
// and write ConfigMaps, and puts the flooder on its own tiny level, waiting until the
// server classifies it there.
func setUp(ctx context.Context, admin *rest.Config, o options) error {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	nss := []string{"flood"}
	for u := range o.users {
		nss = append(nss, fmt.Sprintf("user-%d", u))
	}
	for _, ns := range nss {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	data := strings.Repeat("v", 1<<10)
	for i := range o.objects {
		if _, err := cs.CoreV1().ConfigMaps("flood").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)},
			Data: map[string]string{"k": data}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("ConfigMap %d: %w", i, err)
		}
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "configmap-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create"}}}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster role: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenants-write-configmaps"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "configmap-writer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "tenants"}}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster role binding: %w", err)
	}
	fc := cs.FlowcontrolV1()
	pl, err := fc.PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "tenant-flood"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr.To[int32](1), BorrowingLimitPercent: ptr.To[int32](0),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 2, QueueLengthLimit: 10}}}}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("priority level: %w", err)
	}
	all := []string{"*"}
	if _, err := fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "tenant-flood"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: pl.Name}, MatchingPrecedence: 500,
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "flooder"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: all, APIGroups: all, Resources: all, Namespaces: all, ClusterScope: true}}}}}},
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("flow schema: %w", err)
	}
	// The level's state exists once the config controller digested it: its dump lists it.
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		dump, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/api_priority_and_fairness/dump_priority_levels").DoRaw(ctx)
		return err == nil && strings.Contains(string(dump), pl.Name), nil
	})
}
