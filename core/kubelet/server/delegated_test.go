package server

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// reviews is a fake API server: the token "good" is alice; alice may get nodes/metrics
// of node-1, and the certificate user bob may get nodes/stats.
func reviews(t *testing.T) (*fake.Clientset, *int, *int) {
	t.Helper()
	cs := fake.NewClientset()
	var tokenReviews, accessReviews int
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tokenReviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == "good" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice"}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		accessReviews++
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = ra.Name == "node-1" && ra.Resource == "nodes" && ra.Verb == "get" &&
			((sar.Spec.User == "alice" && ra.Subresource == "metrics") || (sar.Spec.User == "bob" && ra.Subresource == "stats"))
		return true, sar, nil
	})
	return cs, &tokenReviews, &accessReviews
}

func request(path, token string, certUser string, masters bool) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "https://node-1:10250"+path, nil)
	req.TLS = &tls.ConnectionState{}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if certUser != "" {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: certUser}}
		if masters {
			c.Subject.Organization = []string{MastersGroup}
		}
		req.TLS.PeerCertificates = []*x509.Certificate{c}
		req.TLS.VerifiedChains = [][]*x509.Certificate{{c}}
	}
	return req
}

func TestAccess(t *testing.T) {
	cs, tokenReviews, accessReviews := reviews(t)
	delegated := Access{Delegated: NewDelegated(cs, "node-1")}
	for _, tc := range []struct {
		name   string
		access Access
		req    *http.Request
		code   int // 0 = allowed
	}{
		{"the API server's client", delegated, request("/containerLogs/a/b/c", "", "kube-apiserver-kubelet-client", true), 0},
		{"no credentials", delegated, request("/metrics/resource", "", "", false), http.StatusUnauthorized},
		{"no credentials, anonymous kubelet", Access{Anonymous: true}, request("/metrics/resource", "", "", false), 0},
		{"a bad token", delegated, request("/metrics/resource", "bad", "", false), http.StatusUnauthorized},
		{"a token granted nodes/metrics", delegated, request("/metrics/resource", "good", "", false), 0},
		{"the same again (cached)", delegated, request("/metrics/resource", "good", "", false), 0},
		{"a token not granted nodes/stats", delegated, request("/stats/summary", "good", "", false), http.StatusForbidden},
		{"exec is nodes/proxy", delegated, request("/exec/a/b/c", "good", "", false), http.StatusForbidden},
		{"a certificate granted nodes/stats", delegated, request("/stats/summary", "", "bob", false), 0},
		{"a certificate without delegation", Access{}, request("/stats/summary", "", "bob", false), http.StatusForbidden},
		{"a token without delegation", Access{Anonymous: true}, request("/stats/summary", "good", "", false), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.access.check(tc.req, "read stats")
			switch {
			case tc.code == 0 && err != nil:
				t.Errorf("refused: %d %s", err.Code, err.Message)
			case tc.code != 0 && (err == nil || err.Code != tc.code):
				t.Errorf("got %v, want %d", err, tc.code)
			}
		})
	}
	// good/bad tokens reviewed once each; alice metrics, alice stats, alice proxy, bob stats.
	if *tokenReviews != 2 || *accessReviews != 4 {
		t.Errorf("%d token reviews and %d access reviews, want 2 and 4 (the rest from the caches)", *tokenReviews, *accessReviews)
	}
}

func TestSubresourceOf(t *testing.T) {
	for path, want := range map[string]string{"/metrics/resource": "metrics", "/metrics": "metrics", "/stats/summary": "stats",
		"/logs/": "log", "/containerLogs/a/b/c": "proxy", "/exec/a/b/c": "proxy", "/statsx": "proxy", "/pods": "pods"} {
		if got := subresourceOf(path); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
}
