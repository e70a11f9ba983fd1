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
// It prints the other users' create p50/p99 in both phases and the ratio of the p99s.
//
//	go run ./tests/bench/apf -peers /work/peers
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
	"k8s.io/utils/ptr"
)

type options struct {
	peersDir, only, bin    string
	duration, probe        time.Duration
	users, objects         int
	probeClients, outstand int
	overload, maxP99Ratio  float64
	timeout                time.Duration
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
	flag.Parse()
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
	// capacity is LISTs/s; offered, served, rejected and unsent count the flood's LISTs.
	capacity                          float64
	offered, served, rejected, unsent int64
	otherErrors                       int64
	baseline, flooded                 []time.Duration
	baselineFailures, floodedFailures int
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
	if s.baseline, s.baselineFailures, err = creates(ctx, s.cp.URL, users, "b", o.duration); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	flooder, err := asUser(s.admin, "flooder")
	if err != nil {
		return err
	}
	floodCtx, stopFlood := context.WithCancel(ctx)
	var flood sync.WaitGroup
	flood.Go(func() { s.flood(floodCtx, flooder, listURL, o) })
	s.flooded, s.floodedFailures, err = creates(ctx, s.cp.URL, users, "f", o.duration)
	stopFlood()
	flood.Wait()
	if err != nil {
		return fmt.Errorf("flooded: %w", err)
	}
	return nil
}

// flood sends LISTs as the tenant at overload × capacity until ctx ends, each LIST in a
// goroutine of its own so that a slow answer does not slow the flood; at most
// max-outstanding are in flight. The LISTs owed are counted from the time elapsed, not
// from ticks, which a loaded machine skips.
func (s *side) flood(ctx context.Context, c *http.Client, url string, o options) {
	rate := s.capacity * o.overload
	slots := make(chan struct{}, o.outstand)
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
			atomic.AddInt64(&s.offered, 1)
			select {
			case slots <- struct{}{}:
			default:
				atomic.AddInt64(&s.unsent, 1)
				continue
			}
			wg.Go(func() {
				defer func() { <-slots }()
				code, err := do(ctx, c, http.MethodGet, url, "")
				switch {
				case ctx.Err() != nil:
					// Cut off at the phase's end: neither served nor refused.
				case err != nil:
					atomic.AddInt64(&s.otherErrors, 1)
				case code == http.StatusTooManyRequests:
					atomic.AddInt64(&s.rejected, 1)
				case code == http.StatusOK:
					atomic.AddInt64(&s.served, 1)
				default:
					atomic.AddInt64(&s.otherErrors, 1)
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

// printResults prints one line of figures per server and the flood LISTs that failed oddly.
func printResults(w io.Writer, sides []*side, o options) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "server\tLIST capacity/s\tflood offered/s\tserved/s\t429/s\tnot sent/s\tbaseline create p50 / p99\tflooded create p50 / p99\tp99 ratio\tcreates baseline / flooded\n")
	for _, s := range sides {
		sec := o.duration.Seconds()
		ratio := float64(pct(s.flooded, 99)) / float64(pct(s.baseline, 99))
		verdict := "within"
		if ratio > o.maxP99Ratio {
			verdict = "ABOVE"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%v / %v\t%v / %v\t%.2f (%s %.0f×)\t%d / %d (failed %d / %d)\n", s.name, s.capacity,
			float64(s.offered)/sec, float64(s.served)/sec, float64(s.rejected)/sec, float64(s.unsent)/sec,
			pct(s.baseline, 50), pct(s.baseline, 99), pct(s.flooded, 50), pct(s.flooded, 99), ratio, verdict, o.maxP99Ratio,
			len(s.baseline), len(s.flooded), s.baselineFailures, s.floodedFailures)
	}
	tw.Flush()
	for _, s := range sides {
		if s.otherErrors > 0 {
			fmt.Fprintf(w, "%s: %d flood LISTs failed otherwise than with 429\n", s.name, s.otherErrors)
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
