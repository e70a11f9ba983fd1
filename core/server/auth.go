package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	"github.com/wasmplane/wasmplane/core/pki"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Authenticator names for Config.AuthenticationOrder.
const (
	AuthX509           = "x509"
	AuthTokenFile      = "token-file"
	AuthServiceAccount = "serviceaccount"
	AuthBootstrap      = "bootstrap"
	AuthWASM           = "wasm"
)

// DefaultAuthenticationOrder is the chain's order unless configured: built-in
// credentials first, WASM authenticators last.
var DefaultAuthenticationOrder = []string{AuthX509, AuthTokenFile, AuthServiceAccount, AuthBootstrap, AuthWASM}

// security is the server's PKI and credentials.
type security struct {
	ca      *pki.CA
	serving *pki.Pair
	admin   *pki.Pair
	// frontProxyCA signs frontProxy, the client certificate the aggregation layer
	// presents to aggregated API servers (kubeadm's front-proxy-ca and
	// front-proxy-client): a CA of its own, so that no user's certificate can send
	// front-proxy headers.
	frontProxyCA  *pki.CA
	frontProxy    *pki.Pair
	signer        *authn.TokenSigner
	loopbackToken string
	audiences     []string
}

// setupSecurity loads or creates the CA, the serving and admin certificates and the
// ServiceAccount signing key in <data-dir>/pki.
func setupSecurity(cfg *Config) (*security, error) {
	dir := filepath.Join(cfg.DataDir, "pki")
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		return nil, fmt.Errorf("certificate authority: %w", err)
	}
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if h, err := os.Hostname(); err == nil && h != "" {
		dns = append(dns, h)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	if ip := net.ParseIP(cfg.BindAddress); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	for _, san := range cfg.TLSSANs {
		if ip := net.ParseIP(san); ip != nil {
			ips = append(ips, ip)
		} else if san != "" {
			dns = append(dns, san)
		}
	}
	serving, err := ca.Ensure("apiserver", pki.Leaf{CommonName: "wasmplane-apiserver", DNSNames: dedupe(dns), IPs: ips, Usage: pki.ServerAuth})
	if err != nil {
		return nil, err
	}
	admin, err := ca.Ensure("admin", pki.Leaf{CommonName: "system:admin", Organizations: []string{authn.GroupMasters}, Usage: pki.ClientAuth})
	if err != nil {
		return nil, err
	}
	frontProxyCA, err := pki.LoadOrCreateCA(filepath.Join(dir, "front-proxy"))
	if err != nil {
		return nil, fmt.Errorf("front-proxy certificate authority: %w", err)
	}
	frontProxy, err := frontProxyCA.Ensure("front-proxy-client", pki.Leaf{CommonName: frontProxyClientName, Usage: pki.ClientAuth})
	if err != nil {
		return nil, err
	}
	key, err := pki.LoadOrCreateSigningKey(filepath.Join(dir, "sa.key"))
	if err != nil {
		return nil, fmt.Errorf("service account signing key: %w", err)
	}
	signer, err := authn.NewTokenSigner(key, cfg.ServiceAccountIssuer)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("loopback token: %w", err)
	}
	auds := cfg.APIAudiences
	if len(auds) == 0 {
		auds = []string{signer.Issuer()}
	}
	return &security{ca: ca, serving: serving, admin: admin, frontProxyCA: frontProxyCA, frontProxy: frontProxy, signer: signer, loopbackToken: hex.EncodeToString(b), audiences: auds}, nil
}

// frontProxyClientName is the front-proxy client certificate's common name, the one
// name aggregated servers allow to send the user headers.
const frontProxyClientName = "front-proxy-client"

// proxyClientCertificate is the front-proxy client certificate as a TLS certificate.
func (s *security) proxyClientCertificate() (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(s.frontProxy.CertPEM, s.frontProxy.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	return &c, nil
}

// tlsConfig serves the API with the serving certificate and asks (without requiring)
// for client certificates, which the x509 authenticator verifies: a bad certificate is a
// 401 Status, not a failed handshake.
func (s *security) tlsConfig() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(s.serving.CertPEM, s.serving.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"}}, nil
}

// verifiedCertificate returns the request's client certificate if this CA signed it.
func (s *security) verifiedCertificate(req *http.Request) *x509.Certificate {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return nil
	}
	c := req.TLS.PeerCertificates[0]
	if _, err := c.Verify(x509.VerifyOptions{Roots: s.ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil
	}
	return c
}

// lookupFunc reads one object from the server's own storage.
type lookupFunc func(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)

// lookupGetter reads ServiceAccounts, pods and secrets for the token authenticators: from
// the watch cache, and from etcd when the cache does not have the object yet (a token
// used right after its ServiceAccount was created).
type lookupGetter struct{ cached, fresh lookupFunc }

func (l lookupGetter) get(gr schema.GroupResource, ns, name string) (runtime.Object, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o, err := l.cached(ctx, gr, ns, name)
	if apierrors.IsNotFound(err) {
		return l.fresh(ctx, gr, ns, name)
	}
	return o, err
}

func (l lookupGetter) ServiceAccount(ns, name string) (*corev1.ServiceAccount, error) {
	o, err := l.get(corev1.Resource("serviceaccounts"), ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.ServiceAccount), nil
}

func (l lookupGetter) Pod(ns, name string) (*corev1.Pod, error) {
	o, err := l.get(corev1.Resource("pods"), ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Pod), nil
}

func (l lookupGetter) Secret(ns, name string) (*corev1.Secret, error) {
	o, err := l.get(corev1.Resource("secrets"), ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Secret), nil
}

// authenticator assembles the chain in cfg.AuthenticationOrder. The loopback token (the
// server's own controllers and scheduler) always comes first.
func (s *security) authenticator(cfg *Config, lookup lookupGetter, wasmSource authn.Source, log *slog.Logger) (*authn.Chain, error) {
	chain := &authn.Chain{APIAudiences: s.audiences, Anonymous: cfg.AnonymousAuth, Log: log}
	chain.Authenticators = append(chain.Authenticators, authn.Named{Name: "loopback", Authenticator: authn.Bearer{Token: authn.StaticToken{
		Token: s.loopbackToken, User: authn.User{Name: "system:apiserver", Groups: []string{authn.GroupMasters}}}}})
	order := cfg.AuthenticationOrder
	if len(order) == 0 {
		order = DefaultAuthenticationOrder
	}
	for _, name := range order {
		var a authn.Authenticator
		switch name {
		case AuthX509:
			a = &authn.X509{Roots: s.ca.Pool()}
		case AuthTokenFile:
			if cfg.TokenAuthFile == "" {
				continue
			}
			tf, err := authn.LoadTokenFile(cfg.TokenAuthFile)
			if err != nil {
				return nil, err
			}
			a = authn.Bearer{Token: tf}
		case AuthServiceAccount:
			a = authn.Bearer{Token: &authn.ServiceAccountTokens{Signer: s.signer, APIAudiences: s.audiences, Getter: lookup}}
		case AuthBootstrap:
			a = authn.Bearer{Token: &authn.BootstrapTokens{Secrets: lookup.Secret}}
		case AuthWASM:
			if wasmSource == nil {
				continue
			}
			a = authn.Dynamic{Source: wasmSource}
		default:
			return nil, fmt.Errorf("unknown authenticator %q in the authentication order (known: %v)", name, DefaultAuthenticationOrder)
		}
		chain.Authenticators = append(chain.Authenticators, authn.Named{Name: name, Authenticator: a})
	}
	return chain, nil
}

// loopbackConfig is how the server's own components reach it.
func (s *security) loopbackConfig(url string) *rest.Config {
	return &rest.Config{Host: url, BearerToken: s.loopbackToken, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.ca.CertPEM}}
}

// adminConfig authenticates with the admin client certificate (system:masters).
func (s *security) adminConfig(url string) *rest.Config {
	return &rest.Config{Host: url, QPS: -1, TLSClientConfig: rest.TLSClientConfig{
		CAData: s.ca.CertPEM, CertData: s.admin.CertPEM, KeyData: s.admin.KeyPEM}}
}

func dedupe(in []string) []string {
	slices.Sort(in)
	return slices.Compact(in)
}

// tokenReviewer answers TokenReview with the chain's token authenticators; audiences,
// when given, replace the API audiences.
func tokenReviewer(chain *authn.Chain) resources.TokenReviewer {
	return func(ctx context.Context, token string, audiences []string) (*authn.User, []string, bool, error) {
		c := *chain
		c.Anonymous = false
		if len(audiences) > 0 {
			c.APIAudiences = audiences
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews", nil)
		if err != nil {
			return nil, nil, false, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		return c.AuthenticateRequest(req)
	}
}

// newAuthorizer builds the union the seed's withAuthorization consults: system:masters,
// then the node authorizer, then RBAC — over informers that reach this server through its
// loopback credential, started by startAuthorizer once the server serves.
func newAuthorizer(loopback *rest.Config) (informers.SharedInformerFactory, authz.Authorizer, *authz.RBAC, error) {
	cfg := rest.CopyConfig(loopback)
	cfg.UserAgent = "wasmplane-authorizer"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("authorizer client: %w", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(authz.TrimPod))
	rbac := authz.NewRBACFromInformers(factory)
	node, err := authz.NewNodeAuthorizer(factory.Core().V1().Pods().Informer())
	if err != nil {
		return nil, nil, nil, err
	}
	return factory, authz.Union(authz.PrivilegedGroups(authn.GroupMasters), node, rbac), rbac, nil
}

// startAuthorizer starts the authorizer's informers, bootstraps the default RBAC policy
// and waits until the authorizer sees it, so that no user meets a spurious 403 just after
// start. The returned stop shuts the informers down once ctx has ended.
func startAuthorizer(ctx context.Context, factory informers.SharedInformerFactory, loopback *rest.Config) (stop func(), err error) {
	factory.Start(ctx.Done())
	client, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return factory.Shutdown, fmt.Errorf("bootstrap policy client: %w", err)
	}
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := authz.EnsureBootstrapPolicy(bctx, client); err != nil {
		return factory.Shutdown, fmt.Errorf("bootstrapping the default RBAC policy: %w", err)
	}
	for typ, ok := range factory.WaitForCacheSync(bctx.Done()) {
		if !ok {
			return factory.Shutdown, fmt.Errorf("authorizer informer %v did not sync", typ)
		}
	}
	return factory.Shutdown, nil
}
