package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/pki"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
)

// outcome is what an authenticator answered, reduced to what the tests compare.
type outcome int

const (
	notMine outcome = iota
	accepted
	refused
)

func classify(ok bool, err error) outcome {
	switch {
	case err != nil:
		return refused
	case ok:
		return accepted
	}
	return notMine
}

func clientCert(t testing.TB, ca *pki.CA, l pki.Leaf) *x509.Certificate {
	t.Helper()
	certPEM, _, err := ca.Issue(l)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

// twoCAs returns the trusted CA and another one.
func twoCAs(t *testing.T) (trusted, other *pki.CA) {
	t.Helper()
	trusted, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err = pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return trusted, other
}

func TestX509(t *testing.T) {
	ca, other := twoCAs(t)
	alice := clientCert(t, ca, pki.Leaf{CommonName: "alice", Organizations: []string{"dev", "ops"}, Usage: pki.ClientAuth})
	tests := []struct {
		name   string
		cert   *x509.Certificate
		now    time.Time
		want   outcome
		user   string
		groups int
	}{
		{"good", alice, time.Now(), accepted, "alice", 2},
		{"no certificate", nil, time.Now(), notMine, "", 0},
		{"expired", alice, time.Now().Add(2 * 365 * 24 * time.Hour), refused, "", 0},
		{"wrong CA", clientCert(t, other, pki.Leaf{CommonName: "mallory", Usage: pki.ClientAuth}), time.Now(), refused, "", 0},
		{"serving certificate", clientCert(t, ca, pki.Leaf{CommonName: "api", Usage: pki.ServerAuth}), time.Now(), refused, "", 0},
		{"no common name", clientCert(t, ca, pki.Leaf{Organizations: []string{"x"}, Usage: pki.ClientAuth}), time.Now(), refused, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/api", nil)
			if tc.cert != nil {
				req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{tc.cert}}
			}
			a := &X509{Roots: ca.Pool(), Now: func() time.Time { return tc.now }}
			u, _, ok, err := a.AuthenticateRequest(req)
			if got := classify(ok, err); got != tc.want {
				t.Fatalf("outcome %v (err %v), want %v", got, err, tc.want)
			}
			if tc.want == accepted && (u.Name != tc.user || len(u.Groups) != tc.groups) {
				t.Fatalf("user %+v", u)
			}
		})
	}
}

// TestX509Cache checks that a cached verification (by connection or by bytes) still
// re-checks the validity window, and that what was not verified is not let in by it.
func TestX509Cache(t *testing.T) {
	ca, other := twoCAs(t)
	alice := clientCert(t, ca, pki.Leaf{CommonName: "alice", Usage: pki.ClientAuth})
	aliceAgain, err := x509.ParseCertificate(alice.Raw) // another connection's parse
	if err != nil {
		t.Fatal(err)
	}
	mallory := clientCert(t, other, pki.Leaf{CommonName: "mallory", Usage: pki.ClientAuth})
	now := time.Now()
	a := &X509{Roots: ca.Pool(), Now: func() time.Time { return now }}
	// The steps run in order on one authenticator.
	steps := []struct {
		name  string
		chain []*x509.Certificate
		later time.Duration
		want  outcome
	}{
		{"first request verifies", []*x509.Certificate{alice}, 0, accepted},
		{"same connection", []*x509.Certificate{alice}, 0, accepted},
		{"same connection once expired", []*x509.Certificate{alice}, 2 * 365 * 24 * time.Hour, refused},
		{"same bytes on another connection", []*x509.Certificate{aliceAgain}, 0, accepted},
		{"same bytes once expired", []*x509.Certificate{aliceAgain}, 2 * 365 * 24 * time.Hour, refused},
		{"untrusted after trusted", []*x509.Certificate{mallory}, 0, refused},
		{"untrusted again", []*x509.Certificate{mallory}, 0, refused},
	}
	start := now
	for _, st := range steps {
		now = start.Add(st.later)
		req := httptest.NewRequest(http.MethodGet, "/api", nil)
		req.TLS = &tls.ConnectionState{PeerCertificates: st.chain}
		_, _, ok, err := a.AuthenticateRequest(req)
		if got := classify(ok, err); got != st.want {
			t.Fatalf("%s: outcome %v (err %v), want %v", st.name, got, err, st.want)
		}
	}
}

func TestTokenFile(t *testing.T) {
	good := "# comment\nt1,alice,1\nt2,bob,2,\"dev,ops\"\n"
	tf, err := ParseTokenFile(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token  string
		want   outcome
		user   string
		groups []string
	}{
		{"t1", accepted, "alice", nil},
		{"t2", accepted, "bob", []string{"dev", "ops"}},
		{"t3", notMine, "", nil},
		{"t", notMine, "", nil},
	}
	for _, tc := range tests {
		u, _, ok, err := tf.AuthenticateToken(context.Background(), tc.token)
		if got := classify(ok, err); got != tc.want {
			t.Fatalf("%s: outcome %v, want %v", tc.token, got, tc.want)
		}
		if ok && (u.Name != tc.user || strings.Join(u.Groups, ",") != strings.Join(tc.groups, ",")) {
			t.Fatalf("%s: user %+v", tc.token, u)
		}
	}
	for _, bad := range []string{"t1,alice\n", ",alice,1\n", "t1,alice,1\nt1,bob,2\n", "t1,\"alice,1\n"} {
		if _, err := ParseTokenFile(strings.NewReader(bad)); err == nil {
			t.Errorf("malformed token file %q accepted", bad)
		}
	}
}

// objects is an in-memory ServiceAccountGetter.
type objects struct {
	sas     map[string]*corev1.ServiceAccount
	pods    map[string]*corev1.Pod
	secrets map[string]*corev1.Secret
}

func (o *objects) ServiceAccount(ns, name string) (*corev1.ServiceAccount, error) {
	if sa, ok := o.sas[ns+"/"+name]; ok {
		return sa, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
}

func (o *objects) Pod(ns, name string) (*corev1.Pod, error) {
	if p, ok := o.pods[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func (o *objects) Secret(ns, name string) (*corev1.Secret, error) {
	if s, ok := o.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func newSigner(t *testing.T, issuer string) *TokenSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewTokenSigner(key, issuer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServiceAccountTokens(t *testing.T) {
	signer := newSigner(t, "")
	otherKey := newSigner(t, "") // same issuer, different key: a forged signature
	otherIssuer := newSigner(t, "https://elsewhere")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "robot", UID: "sa-1"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pod-1"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	store := &objects{sas: map[string]*corev1.ServiceAccount{"ns/robot": sa}, pods: map[string]*corev1.Pod{"ns/p": pod}}
	issue := func(s *TokenSigner, r TokenRequest) string {
		if r.ServiceAccount == nil {
			r.ServiceAccount = sa
		}
		if r.Expiration == 0 {
			r.Expiration = time.Hour
		}
		if r.Audiences == nil {
			r.Audiences = []string{DefaultIssuer}
		}
		tok, _, err := s.Issue(r)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := issue(signer, TokenRequest{})
	expired := func() string {
		s := *signer
		s.now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
		return issue(&s, TokenRequest{})
	}()
	bound := issue(signer, TokenRequest{Bound: &BoundObject{Kind: "Pod", Name: "p", UID: "pod-1"}, NodeName: "n1"})
	boundGone := issue(signer, TokenRequest{Bound: &BoundObject{Kind: "Pod", Name: "p", UID: "pod-old"}})
	revoked := issue(signer, TokenRequest{ServiceAccount: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "robot", UID: "sa-0"}}})
	deleted := issue(signer, TokenRequest{ServiceAccount: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", UID: "x"}}})
	tests := []struct {
		name  string
		token string
		want  outcome
		check func(t *testing.T, u *User, auds []string)
	}{
		{"good", good, accepted, func(t *testing.T, u *User, auds []string) {
			if u.Name != "system:serviceaccount:ns:robot" || u.UID != "sa-1" || !u.InGroup("system:serviceaccounts") || !u.InGroup("system:serviceaccounts:ns") {
				t.Fatalf("user %+v", u)
			}
			if len(auds) != 1 || auds[0] != DefaultIssuer {
				t.Fatalf("audiences %v", auds)
			}
		}},
		{"bound to a live pod", bound, accepted, func(t *testing.T, u *User, _ []string) {
			if u.Extra[ExtraPodName][0] != "p" || u.Extra[ExtraPodUID][0] != "pod-1" || u.Extra[ExtraNodeName][0] != "n1" {
				t.Fatalf("extra %v", u.Extra)
			}
		}},
		{"expired", expired, refused, nil},
		{"wrong audience", issue(signer, TokenRequest{Audiences: []string{"vault"}}), refused, nil},
		{"wrong signature", issue(otherKey, TokenRequest{}), refused, nil},
		{"another issuer", issue(otherIssuer, TokenRequest{}), notMine, nil},
		{"revoked: ServiceAccount recreated", revoked, refused, nil},
		{"revoked: ServiceAccount deleted", deleted, refused, nil},
		{"revoked: bound pod replaced", boundGone, refused, nil},
		{"malformed", "not-a-jwt", notMine, nil},
		{"truncated", good[:len(good)-10], refused, nil},
	}
	a := &ServiceAccountTokens{Signer: signer, APIAudiences: []string{DefaultIssuer}, Getter: store}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, auds, ok, err := a.AuthenticateToken(context.Background(), tc.token)
			if got := classify(ok, err); got != tc.want {
				t.Fatalf("outcome %v (err %v), want %v", got, err, tc.want)
			}
			if tc.check != nil {
				tc.check(t, u, auds)
			}
		})
	}
}

func TestBootstrapTokens(t *testing.T) {
	secret := func(mut func(s *corev1.Secret)) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-abcdef"}, Type: BootstrapSecretType,
			Data: map[string][]byte{BootstrapTokenID: []byte("abcdef"), BootstrapTokenSecret: []byte("0123456789abcdef"),
				BootstrapUsageAuth: []byte("true"), BootstrapExtraGroups: []byte("system:bootstrappers:workers")}}
		if mut != nil {
			mut(s)
		}
		return s
	}
	const tok = "abcdef.0123456789abcdef"
	tests := []struct {
		name   string
		secret *corev1.Secret
		token  string
		want   outcome
	}{
		{"good", secret(nil), tok, accepted},
		{"not a bootstrap token", secret(nil), "hello", notMine},
		{"unknown id", nil, tok, refused},
		{"wrong secret", secret(nil), "abcdef.aaaaaaaaaaaaaaaa", refused},
		{"expired", secret(func(s *corev1.Secret) {
			s.Data[BootstrapExpiration] = []byte(time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
		}), tok, refused},
		{"not yet expired", secret(func(s *corev1.Secret) {
			s.Data[BootstrapExpiration] = []byte(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		}), tok, accepted},
		{"not for authentication", secret(func(s *corev1.Secret) { delete(s.Data, BootstrapUsageAuth) }), tok, refused},
		{"bad extra group", secret(func(s *corev1.Secret) { s.Data[BootstrapExtraGroups] = []byte("system:masters") }), tok, refused},
		{"wrong type", secret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), tok, refused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &BootstrapTokens{Secrets: func(ns, name string) (*corev1.Secret, error) {
				if tc.secret == nil || tc.secret.Name != name {
					return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
				}
				return tc.secret, nil
			}}
			u, _, ok, err := b.AuthenticateToken(context.Background(), tc.token)
			if got := classify(ok, err); got != tc.want {
				t.Fatalf("outcome %v (err %v), want %v", got, err, tc.want)
			}
			if ok && (u.Name != "system:bootstrap:abcdef" || !u.InGroup(GroupBootstrappers) || !u.InGroup("system:bootstrappers:workers")) {
				t.Fatalf("user %+v", u)
			}
		})
	}
}

// fixed answers every request the same way, and counts calls.
type fixed struct {
	u     *User
	auds  []string
	ok    bool
	err   error
	calls int
}

func (f *fixed) AuthenticateRequest(*http.Request) (*User, []string, bool, error) {
	f.calls++
	if f.u != nil {
		c := *f.u
		return &c, f.auds, f.ok, f.err
	}
	return nil, f.auds, f.ok, f.err
}

func TestChain(t *testing.T) {
	alice := &User{Name: "alice"}
	tests := []struct {
		name      string
		members   []*fixed
		anonymous bool
		path      string
		header    string
		want      outcome
		user      string
		called    []int
	}{
		{"first that accepts wins", []*fixed{{}, {u: alice, ok: true}, {u: &User{Name: "bob"}, ok: true}}, false, "/api", "", accepted, "alice", []int{1, 1, 0}},
		{"a refusal does not stop the chain", []*fixed{{err: errors.New("bad")}, {u: alice, ok: true}}, false, "/api", "", accepted, "alice", []int{1, 1}},
		{"refusals with no acceptance fail", []*fixed{{err: errors.New("bad")}, {}}, false, "/api", "", refused, "", []int{1, 1}},
		{"nobody: unauthenticated", []*fixed{{}, {}}, false, "/api", "", notMine, "", []int{1, 1}},
		{"wrong audience does not authenticate", []*fixed{{u: alice, ok: true, auds: []string{"vault"}}}, false, "/api", "", refused, "", []int{1}},
		{"matching audience", []*fixed{{u: alice, ok: true, auds: []string{"vault", "api"}}}, false, "/api", "", accepted, "alice", []int{1}},
		{"anonymous may read /healthz", []*fixed{{}}, true, "/healthz", "", accepted, Anonymous, []int{1}},
		{"anonymous may read /version", []*fixed{{}}, true, "/version", "", accepted, Anonymous, []int{1}},
		{"anonymous may not list pods", []*fixed{{}}, true, "/api/v1/pods", "", notMine, "", []int{1}},
		{"anonymous off by default", []*fixed{{}}, false, "/healthz", "", notMine, "", []int{1}},
		{"a rejected credential does not fall back to anonymous", []*fixed{{}}, true, "/healthz", "Bearer nope", notMine, "", []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Chain{APIAudiences: []string{"api"}, Anonymous: tc.anonymous}
			for i, m := range tc.members {
				c.Authenticators = append(c.Authenticators, Named{Name: string(rune('a' + i)), Authenticator: m})
			}
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			u, _, ok, err := c.AuthenticateRequest(req)
			if got := classify(ok, err); got != tc.want {
				t.Fatalf("outcome %v (err %v), want %v", got, err, tc.want)
			}
			if ok {
				if u.Name != tc.user {
					t.Fatalf("user %q, want %q", u.Name, tc.user)
				}
				if (u.Name == Anonymous) == u.InGroup(GroupAuthenticated) {
					t.Fatalf("groups %v", u.Groups)
				}
			}
			for i, m := range tc.members {
				if m.calls != tc.called[i] {
					t.Errorf("member %d called %d times, want %d", i, m.calls, tc.called[i])
				}
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer   abc  ", "abc", true},
		{"Basic abc", "", false},
		{"Bearer ", "", false},
		{"", "", false},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", tc.header)
		tok, ok := BearerToken(req)
		if tok != tc.token || ok != tc.ok {
			t.Errorf("%q: got %q %v", tc.header, tok, ok)
		}
	}
}

// BenchmarkAuthenticate measures the chain alone, per credential kind: what
// authentication adds to a request before any handler runs.
func BenchmarkAuthenticate(b *testing.B) {
	ca, err := pki.LoadOrCreateCA(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	certPEM, _, err := ca.Issue(pki.Leaf{CommonName: "alice", Organizations: []string{"dev"}, Usage: pki.ClientAuth})
	if err != nil {
		b.Fatal(err)
	}
	certs, _ := certutil.ParseCertsPEM(certPEM)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signer, _ := NewTokenSigner(key, "")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "robot", UID: "sa-1"}}
	jwt, _, err := signer.Issue(TokenRequest{ServiceAccount: sa, Audiences: []string{DefaultIssuer}, Expiration: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	tf, _ := ParseTokenFile(strings.NewReader("file-token,bob,1\n"))
	chain := &Chain{APIAudiences: []string{DefaultIssuer}, Authenticators: []Named{
		{Name: "x509", Authenticator: &X509{Roots: ca.Pool()}},
		{Name: "token-file", Authenticator: Bearer{Token: tf}},
		{Name: "serviceaccount", Authenticator: Bearer{Token: &ServiceAccountTokens{Signer: signer, APIAudiences: []string{DefaultIssuer},
			Getter: &objects{sas: map[string]*corev1.ServiceAccount{"ns/robot": sa}}}}},
	}}
	for _, m := range []struct {
		name string
		prep func(r *http.Request)
	}{
		{"x509", func(r *http.Request) { r.TLS = &tls.ConnectionState{PeerCertificates: certs} }},
		{"token-file", func(r *http.Request) { r.Header.Set("Authorization", "Bearer file-token") }},
		{"serviceaccount-jwt", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+jwt) }},
	} {
		b.Run(m.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/pods", nil)
			m.prep(req)
			for b.Loop() {
				if _, _, ok, err := chain.AuthenticateRequest(req); !ok || err != nil {
					b.Fatalf("not authenticated: %v", err)
				}
			}
		})
	}
}
