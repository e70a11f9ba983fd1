// Command apf measures what API Priority and Fairness buys while a tenant floods the
// server: an in-process API server (no controllers, no scheduler) is started twice,
// with priority and fairness and without it (the max-inflight limits alone). Each time,
// -flooders goroutines of one tenant user list and create ConfigMaps as fast as they
// can, ignoring 429s, for -duration, while -users other users each GET and create
// ConfigMaps one at a time. With priority and fairness the tenant's FlowSchema puts it
// on a level with one share and no borrowing (the recipe of docs/multi-tenancy.md); the
// others are classified by the bootstrap configuration (global-default). The other
// users' GET and create p50/p99 and the tenant's served and rejected counts are printed
// for both runs.
//
//	go run ./tests/bench/apf -duration 10s -flooders 100
package main

import (
	"context"
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
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long each run floods")
	flooders := flag.Int("flooders", 100, "concurrent requests of the flooding tenant")
	users := flag.Int("users", 2, "other users, each sending one request at a time")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	// Request failures the servers log once the runs end (cancelled floods) are noise here.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	for _, apf := range []bool{true, false} {
		r, err := run(ctx, apf, *duration, *flooders, *users)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		r.print(apf)
	}
}

// result is one run's figures.
type result struct {
	gets, creates      []time.Duration
	otherFailures      int64
	flooderServed      int64
	flooderRejected    int64
	flooderOtherErrors int64
}

func (r *result) print(apf bool) {
	mode := "without APF (max-inflight 400/200)"
	if apf {
		mode = "with APF (tenant on 1 share, no borrowing)"
	}
	fmt.Printf("%s:\n", mode)
	fmt.Printf("  other users' GET    n=%d p50=%v p99=%v\n", len(r.gets), pct(r.gets, 50), pct(r.gets, 99))
	fmt.Printf("  other users' create n=%d p50=%v p99=%v failures=%d\n", len(r.creates), pct(r.creates, 50), pct(r.creates, 99), r.otherFailures)
	fmt.Printf("  flooder: %d served, %d rejected (429), %d other errors\n", r.flooderServed, r.flooderRejected, r.flooderOtherErrors)
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(100 * time.Microsecond)
}

func run(ctx context.Context, apf bool, duration time.Duration, flooders, users int) (*result, error) {
	dir, err := os.MkdirTemp("", "wasmplane-apf-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	inst, err := server.Start(ctx, server.Config{DataDir: filepath.Join(dir, "server"), DisableControllers: true, DisableScheduler: true,
		DisablePriorityAndFairness: !apf, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("starting the API server: %w", err)
	}
	defer inst.Close()
	admin := inst.RESTConfig()
	admin.QPS = -1
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	if err := setUp(ctx, cs, apf, users); err != nil {
		return nil, err
	}
	flooder, err := userClient(inst, "flooder")
	if err != nil {
		return nil, err
	}
	r := &result{}
	var mu sync.Mutex
	runCtx, stop := context.WithTimeout(ctx, duration)
	defer stop()
	var served, rejected, failed atomic.Int64
	var wg sync.WaitGroup
	for i := range flooders {
		wg.Go(func() {
			for n := 0; runCtx.Err() == nil; n++ {
				var code int
				var err error
				if n%2 == 0 {
					code, err = do(runCtx, flooder, http.MethodGet, inst.URL()+"/api/v1/namespaces/flood/configmaps", "")
				} else {
					code, err = do(runCtx, flooder, http.MethodPost, inst.URL()+"/api/v1/namespaces/flood/configmaps", configMap(fmt.Sprintf("f-%d-%d", i, n)))
				}
				switch {
				case runCtx.Err() != nil:
				case err != nil:
					failed.Add(1)
				case code == http.StatusTooManyRequests:
					rejected.Add(1)
				case code < 300:
					served.Add(1)
				default:
					failed.Add(1)
				}
			}
		})
	}
	for u := range users {
		c, err := userClient(inst, fmt.Sprintf("user-%d", u))
		if err != nil {
			stop()
			wg.Wait()
			return nil, err
		}
		ns := fmt.Sprintf("user-%d", u)
		wg.Go(func() {
			for n := 0; runCtx.Err() == nil; n++ {
				start := time.Now()
				code, err := do(runCtx, c, http.MethodPost, inst.URL()+"/api/v1/namespaces/"+ns+"/configmaps", configMap(fmt.Sprintf("c-%d", n)))
				created := time.Since(start)
				if runCtx.Err() != nil {
					return
				}
				start = time.Now()
				gcode, gerr := do(runCtx, c, http.MethodGet, inst.URL()+"/api/v1/namespaces/"+ns+"/configmaps/"+fmt.Sprintf("c-%d", n), "")
				got := time.Since(start)
				if runCtx.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil || code >= 300 || gerr != nil || gcode >= 300 {
					r.otherFailures++
				} else {
					r.creates = append(r.creates, created)
					r.gets = append(r.gets, got)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.flooderServed, r.flooderRejected, r.flooderOtherErrors = served.Load(), rejected.Load(), failed.Load()
	return r, nil
}

func configMap(name string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"k":"v"}}`, name)
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

// userClient is a raw HTTP client with a client certificate of name in group "tenants"
// (client-go would retry 429s itself).
func userClient(inst *server.Instance, name string) (*http.Client, error) {
	certPEM, keyPEM, err := inst.IssueClientCertificate(name, "tenants")
	if err != nil {
		return nil, fmt.Errorf("certificate of %s: %w", name, err)
	}
	return rest.HTTPClientFor(&rest.Config{Host: inst.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: inst.CA(), CertData: certPEM, KeyData: keyPEM}})
}

// setUp makes the namespaces, lets the tenants read and write ConfigMaps, and with APF
// puts the flooder on its own tiny level, waiting until the server classifies it there.
func setUp(ctx context.Context, cs kubernetes.Interface, apf bool, users int) error {
	for _, ns := range append([]string{"flood"}, func() []string {
		var out []string
		for u := range users {
			out = append(out, fmt.Sprintf("user-%d", u))
		}
		return out
	}()...) {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
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
	if !apf {
		return nil
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
