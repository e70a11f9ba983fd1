// The flow-control tests drive API Priority and Fairness against a real server on
// loopback: the bootstrap configuration, the config controller's status, and a tenant
// flooding the server on a tiny share while another user's requests keep being served.

package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/scrape"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// userClient is an HTTP client holding a client certificate of name: raw, because
// client-go retries 429s on its own.
func userClient(t *testing.T, s *testserver.Server, name string) *http.Client {
	t.Helper()
	certPEM, keyPEM, err := s.IssueClientCertificate(name, "tenants")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rest.HTTPClientFor(&rest.Config{Host: s.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: s.CA(), CertData: certPEM, KeyData: keyPEM}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBootstrapConfiguration: the mandatory and suggested objects exist; a deleted
// mandatory object and a changed auto-updated suggested one come back; a changed
// mandatory spec is refused; a schema naming a missing level is marked Dangling.
func TestBootstrapConfiguration(t *testing.T) {
	s := testserver.StartAPI(t, func(c *server.Config) { c.FlowControlBootstrapInterval = 500 * time.Millisecond })
	cs := s.Clientset(t, true)
	fc := cs.FlowcontrolV1()
	ctx := context.Background()
	waitfor.Condition(t, time.Minute, "the bootstrap configuration", func(ctx context.Context) (bool, error) {
		for _, fs := range slices.Concat(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas) {
			if _, err := fc.FlowSchemas().Get(ctx, fs.Name, metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		for _, pl := range slices.Concat(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations) {
			if _, err := fc.PriorityLevelConfigurations().Get(ctx, pl.Name, metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		return true, nil
	})

	old, err := fc.FlowSchemas().Get(ctx, "catch-all", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fc.FlowSchemas().Delete(ctx, "catch-all", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Condition(t, time.Minute, "catch-all to come back", func(ctx context.Context) (bool, error) {
		fs, err := fc.FlowSchemas().Get(ctx, "catch-all", metav1.GetOptions{})
		return err == nil && fs.UID != old.UID, nil
	})

	exempt, err := fc.PriorityLevelConfigurations().Get(ctx, "catch-all", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exempt.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](50)
	if _, err := fc.PriorityLevelConfigurations().Update(ctx, exempt, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("changing the catch-all level's spec: got %v, want 422 Invalid", err)
	}

	gd, err := fc.FlowSchemas().Get(ctx, "global-default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := gd.Spec.MatchingPrecedence
	gd.Spec.MatchingPrecedence = 4242
	if _, err := fc.FlowSchemas().Update(ctx, gd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Condition(t, time.Minute, "global-default's spec to be restored (autoupdate-spec is true)", func(ctx context.Context) (bool, error) {
		fs, err := fc.FlowSchemas().Get(ctx, "global-default", metav1.GetOptions{})
		return err == nil && fs.Spec.MatchingPrecedence == want, nil
	})

	dangling := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "dangling"}, Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "no-such-level"}, MatchingPrecedence: 5000}}
	if _, err := fc.FlowSchemas().Create(ctx, dangling, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Condition(t, time.Minute, "the Dangling condition", func(ctx context.Context) (bool, error) {
		fs, err := fc.FlowSchemas().Get(ctx, "dangling", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range fs.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling && c.Status == flowcontrolv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestTenantFlood puts one tenant on a level with one share, no borrowing and no
// queues, floods the server from it, and checks that the tenant gets 429s with
// Retry-After and the level's UID while another user's GETs all succeed in time, that
// a watch holds its seat only until it starts, and that the rejections are counted.
func TestTenantFlood(t *testing.T) {
	s := testserver.StartAPI(t)
	cs := s.Clientset(t, true)
	ctx := context.Background()
	grantConfigMapReads(t, cs)
	pl, fs, err := tinyTenantLevel(ctx, cs, "tenant-tiny", "tenant-flood")
	if err != nil {
		t.Fatal(err)
	}
	flooder, other := userClient(t, s, "flooder"), userClient(t, s, "bystander")
	list := s.URL() + "/api/v1/namespaces/default/configmaps"
	// The controller picks the new schema up from its informers.
	waitfor.Condition(t, time.Minute, "the tenant's requests to be classified on its level", func(ctx context.Context) (bool, error) {
		resp, err := flooder.Get(list)
		if err != nil {
			return false, err
		}
		drain(resp)
		return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) == string(fs.UID), nil
	})

	// A watch takes a seat of the level only while it starts: with more watches open
	// than the level has seats (one share of 600 is 3), GETs are still served.
	watchCtx, stopWatches := context.WithCancel(ctx)
	var watches []io.Closer
	defer func() {
		stopWatches()
		for _, w := range watches {
			_ = w.Close()
		}
	}()
	for i := range 5 {
		req, _ := http.NewRequestWithContext(watchCtx, http.MethodGet, list+"?watch=1", nil)
		wresp, err := flooder.Do(req)
		if err != nil {
			t.Fatalf("tenant watch %d: %v", i, err)
		}
		watches = append(watches, wresp.Body)
		if wresp.StatusCode != http.StatusOK {
			t.Fatalf("tenant watch %d: %d", i, wresp.StatusCode)
		}
	}
	waitfor.Condition(t, 30*time.Second, "a tenant GET beside its open watch", func(ctx context.Context) (bool, error) {
		resp, err := flooder.Get(list)
		if err != nil {
			return false, err
		}
		drain(resp)
		return resp.StatusCode == http.StatusOK, nil
	})

	var rejected, served atomic.Int64
	var retryAfter, plUID atomic.Value
	floodCtx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for floodCtx.Err() == nil {
				resp, err := flooder.Get(list)
				if err != nil {
					continue
				}
				drain(resp)
				switch resp.StatusCode {
				case http.StatusTooManyRequests:
					rejected.Add(1)
					retryAfter.Store(resp.Header.Get("Retry-After"))
					plUID.Store(resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID))
				case http.StatusOK:
					served.Add(1)
				}
			}
		})
	}
	// The bystander's GETs while the flood runs: every one served, each in time.
	var slowest time.Duration
	for i := range 40 {
		slowest = max(slowest, bystanderGET(t, other, list, i))
	}
	waitfor.Condition(t, time.Minute, "the flooder to be rejected", func(context.Context) (bool, error) { return rejected.Load() > 0, nil })
	stopFlood()
	wg.Wait()
	t.Logf("flooder: %d served, %d rejected; bystander's slowest GET %v", served.Load(), rejected.Load(), slowest)
	if ra, _ := retryAfter.Load().(string); ra == "" {
		t.Error("429 without Retry-After")
	}
	if uid, _ := plUID.Load().(string); uid != string(pl.UID) {
		t.Errorf("429's priority level UID %q, want %q", uid, pl.UID)
	}
	n, err := scrape.MetricSum(ctx, cs, "apiserver_flowcontrol_rejected_requests_total", map[string]string{"priority_level": pl.Name, "flow_schema": fs.Name})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Errorf("apiserver_flowcontrol_rejected_requests_total for %s is %v", pl.Name, n)
	}
	dump, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/api_priority_and_fairness/dump_priority_levels").DoRaw(ctx)
	if err != nil || !strings.Contains(string(dump), pl.Name) {
		t.Errorf("dump_priority_levels: %v\n%s", err, dump)
	}
}

// TestDisabled: with priority and fairness off, the API is still served and requests
// carry no classification.
func TestDisabled(t *testing.T) {
	s := testserver.StartAPI(t, func(c *server.Config) { c.DisablePriorityAndFairness = true })
	resp, err := s.HTTPClient(t).Get(s.URL() + "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas")
	if err != nil {
		t.Fatal(err)
	}
	drain(resp)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != "" {
		t.Fatalf("status %d, schema header %q", resp.StatusCode, resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID))
	}
}

func grantConfigMapReads(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenants-read-configmaps"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "configmap-reader"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "tenants"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// bystanderGET is one GET of the bystander during the flood: served, within 10 s (the
// request's deadline). It returns how long it took, for the log.
func bystanderGET(t *testing.T, c *http.Client, url string, i int) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("bystander GET %d during the flood, within 10 s: %v", i, err)
	}
	drain(resp)
	if ctx.Err() != nil {
		t.Fatalf("bystander GET %d during the flood: not read within 10 s", i)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bystander GET %d during the flood: %d", i, resp.StatusCode)
	}
	return time.Since(start)
}

// TestListSeats: a LIST occupies seats by what it may go through, as kube-apiserver's list
// work estimator charges it from the resource's object count and average size (one seat
// per 100 KB, at most 10): a LIST of ConfigMaps costs one seat while they are small,
// and about 8 once 800 KB of them are stored.
func TestListSeats(t *testing.T) {
	s := testserver.StartAPI(t)
	cs := s.Clientset(t, true)
	ctx := context.Background()
	grantConfigMapReads(t, cs)
	pl, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "listers"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr.To[int32](100),
			LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"*"}
	fs, err := cs.FlowcontrolV1().FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "listers"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: pl.Name}, MatchingPrecedence: 500,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "lister"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: all, APIGroups: all, Resources: all, Namespaces: all, ClusterScope: true}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lister := userClient(t, s, "lister")
	list := s.URL() + "/api/v1/namespaces/default/configmaps"
	labels := map[string]string{"flow_schema": fs.Name}
	// seats lists once as the lister and returns the seats the LIST was estimated at.
	seats := func(ctx context.Context) (float64, bool, error) {
		sum0, err := scrape.MetricSum(ctx, cs, "apiserver_flowcontrol_work_estimated_seats_sum", labels)
		if err != nil {
			return 0, false, err
		}
		n0, err := scrape.MetricSum(ctx, cs, "apiserver_flowcontrol_work_estimated_seats_count", labels)
		if err != nil {
			return 0, false, err
		}
		resp, err := lister.Get(list)
		if err != nil {
			return 0, false, err
		}
		drain(resp)
		if resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != string(fs.UID) {
			return 0, false, nil // not classified on the new schema yet
		}
		sum1, err := scrape.MetricSum(ctx, cs, "apiserver_flowcontrol_work_estimated_seats_sum", labels)
		if err != nil {
			return 0, false, err
		}
		n1, err := scrape.MetricSum(ctx, cs, "apiserver_flowcontrol_work_estimated_seats_count", labels)
		if err != nil {
			return 0, false, err
		}
		if n1-n0 != 1 {
			return 0, false, nil
		}
		return sum1 - sum0, true, nil
	}
	var got float64
	waitfor.Condition(t, time.Minute, "a LIST of few small ConfigMaps estimated", func(ctx context.Context) (bool, error) {
		var ok bool
		var err error
		got, ok, err = seats(ctx)
		return ok, err
	})
	if got != 1 {
		t.Fatalf("a LIST of few small ConfigMaps took %v seats, want 1", got)
	}
	data := strings.Repeat("x", 20_000)
	for i := range 40 {
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("big-", i)},
			Data: map[string]string{"k": data}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The count follows the watch cache, which follows etcd's watch.
	waitfor.Condition(t, time.Minute, "a LIST of 800 KB of ConfigMaps estimated at 8 seats or more", func(ctx context.Context) (bool, error) {
		var ok bool
		var err error
		got, ok, err = seats(ctx)
		return ok && got >= 8, err
	})
	if got > 10 {
		t.Fatalf("a LIST took %v seats, above the estimator's maximum of 10", got)
	}
}

// tinyTenantLevel creates a priority level with one share, no borrowing and no queues
// (refusing at once), and a FlowSchema that puts every request of the user "flooder" on
// it, one flow per user.
func tinyTenantLevel(ctx context.Context, cs kubernetes.Interface, level, schema string) (*flowcontrolv1.PriorityLevelConfiguration, *flowcontrolv1.FlowSchema, error) {
	pl, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: level},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr.To[int32](1), BorrowingLimitPercent: ptr.To[int32](0),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, err
	}
	all := []string{"*"}
	fs, err := cs.FlowcontrolV1().FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: schema},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: pl.Name}, MatchingPrecedence: 500,
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "flooder"}}},
				ResourceRules:    []flowcontrolv1.ResourcePolicyRule{{Verbs: all, APIGroups: all, Resources: all, Namespaces: all, ClusterScope: true}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: all, NonResourceURLs: all}}}}}}, metav1.CreateOptions{})
	return pl, fs, err
}
