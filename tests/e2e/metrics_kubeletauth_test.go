package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestKubeletDelegatedAuth reaches the kubelet API as an in-cluster scraper does, with a
// ServiceAccount token: the kubelet asks the API server who it is (TokenReview) and
// whether it may (SubjectAccessReview on nodes/<subresource>), as a kubelet with webhook
// authentication and authorization does.
func TestKubeletDelegatedAuth(t *testing.T) {
	s := testserver.StartAPI(t)
	testserver.StartWASINode(t, s, modules, "toolbox")
	cs := s.Clientset(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var port int32
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		port = n.Status.DaemonEndpoints.KubeletEndpoint.Port
		return port != 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "scraper", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "node-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "scraper"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func(path string, token string) (int, string) {
		t.Helper()
		tc := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the kubelet's self-signed serving certificate
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, path, token string
		code              int
		body              string
	}{
		{"no credentials", "/metrics/resource", "", http.StatusUnauthorized, "Unauthorized"},
		{"a token that is no token", "/metrics/resource", "not-a-token", http.StatusUnauthorized, "Unauthorized"},
		{"granted nodes/metrics", "/metrics/resource", tr.Status.Token, http.StatusOK, "node_cpu_usage_seconds_total"},
		{"not granted nodes/stats", "/stats/summary", tr.Status.Token, http.StatusForbidden,
			"Forbidden (user=system:serviceaccount:default:scraper, verb=get, resource=nodes, subresource=stats)"},
		{"not granted nodes/proxy (logs)", "/containerLogs/default/x/main", tr.Status.Token, http.StatusForbidden, "subresource=proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.path, tc.token)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("GET %s: %d %q, want %d containing %q", tc.path, code, body, tc.code, tc.body)
			}
		})
	}
}
