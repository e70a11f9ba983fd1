package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"
)

// KubeletKubeconfigName is the file under an agent's root dir holding the node client
// credentials obtained by TLS bootstrapping.
const KubeletKubeconfigName = "kubelet.kubeconfig"

// DefaultBootstrapTimeout bounds how long a joining node waits for its certificate.
const DefaultBootstrapTimeout = 5 * time.Minute

// BootstrapOptions configures LoadOrBootstrapKubeconfig.
type BootstrapOptions struct {
	// Server is the API server URL and Token a bootstrap token ("<id>.<secret>").
	Server, Token string
	// CAData verifies the API server (PEM); required unless Insecure.
	CAData []byte
	// Insecure skips verifying the API server: only with an explicit request.
	Insecure bool
	// NodeName is the node the certificate is for (CN system:node:<NodeName>).
	NodeName string
	// KubeconfigPath is where the node kubeconfig is read from and written to.
	KubeconfigPath string
	// Timeout bounds the wait for approval and signing (default DefaultBootstrapTimeout).
	Timeout time.Duration
	// PollInterval is how often the request is checked (default 500ms).
	PollInterval time.Duration
	// Logger receives progress (nil = discarded).
	Logger *slog.Logger
}

// LoadOrBootstrapKubeconfig returns the node's client configuration: the kubeconfig at
// opts.KubeconfigPath when it holds a client certificate that has not expired, or else a
// new one obtained as Kubernetes' kubelet TLS bootstrapping does — a fresh key, a
// CertificateSigningRequest for kubernetes.io/kube-apiserver-client-kubelet with subject
// CN=system:node:<name>, O=system:nodes made with the bootstrap token, a wait for approval
// and the signed certificate, and the result written (0600) for later starts.
func LoadOrBootstrapKubeconfig(ctx context.Context, opts BootstrapOptions) (*rest.Config, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.KubeconfigPath == "" {
		return nil, errors.New("bootstrap: no kubeconfig path")
	}
	if rc, err := loadNodeKubeconfig(opts.KubeconfigPath); err == nil {
		opts.Logger.Info("using the node kubeconfig", "path", opts.KubeconfigPath)
		return rc, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		opts.Logger.Warn("node kubeconfig unusable, bootstrapping again", "path", opts.KubeconfigPath, "err", err)
	}
	if opts.Server == "" || opts.Token == "" {
		return nil, fmt.Errorf("no usable node kubeconfig at %s, and bootstrapping needs --server and --token", opts.KubeconfigPath)
	}
	if len(opts.CAData) == 0 && !opts.Insecure {
		return nil, errors.New("bootstrap: the API server's CA is required (--certificate-authority), or skip verification explicitly (--insecure-skip-tls-verify)")
	}
	if opts.NodeName == "" {
		return nil, errors.New("bootstrap: no node name")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultBootstrapTimeout
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	bootstrap := &rest.Config{Host: opts.Server, BearerToken: opts.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: opts.CAData, Insecure: opts.Insecure}, UserAgent: "wasmplane-agent/bootstrap"}
	client, err := certificatesv1client.NewForConfig(bootstrap)
	if err != nil {
		return nil, fmt.Errorf("bootstrap client: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the node key: %w", err)
	}
	csrPEM, err := NodeClientCSR(key, opts.NodeName)
	if err != nil {
		return nil, err
	}
	// Named after the key, so that a retry with the same key finds its request.
	sum := sha256.Sum256(csrPEM)
	name := "node-csr-" + hex.EncodeToString(sum[:12])
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    csrPEM,
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	if _, err := client.CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the certificate signing request: %w", err)
	}
	opts.Logger.Info("waiting for the node client certificate", "csr", name, "node", opts.NodeName)
	var certPEM []byte
	err = wait.PollUntilContextTimeout(ctx, opts.PollInterval, opts.Timeout, true, func(ctx context.Context) (bool, error) {
		got, err := client.CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			opts.Logger.Debug("reading the certificate signing request", "csr", name, "err", err)
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			switch c.Type {
			case certificatesv1.CertificateDenied:
				return false, fmt.Errorf("certificate signing request %s was denied: %s %s", name, c.Reason, c.Message)
			case certificatesv1.CertificateFailed:
				return false, fmt.Errorf("certificate signing request %s failed: %s %s", name, c.Reason, c.Message)
			}
		}
		if len(got.Status.Certificate) == 0 {
			return false, nil
		}
		certPEM = got.Status.Certificate
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for certificate signing request %s to be approved and signed: %w", name, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the node key: %w", err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("the signed certificate does not match the node key: %w", err)
	}
	rc := &rest.Config{Host: opts.Server, TLSClientConfig: rest.TLSClientConfig{
		CAData: opts.CAData, Insecure: opts.Insecure, CertData: certPEM, KeyData: keyPEM}}
	if err := writeNodeKubeconfig(opts.KubeconfigPath, rc); err != nil {
		return nil, err
	}
	opts.Logger.Info("node client certificate issued", "csr", name, "kubeconfig", opts.KubeconfigPath)
	return rc, nil
}

// NodeClientCSR returns a PEM certificate request for node name's client certificate.
func NodeClientCSR(key *ecdsa.PrivateKey, name string) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("creating the certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// loadNodeKubeconfig loads a kubeconfig and checks that its client certificate is still
// valid; a missing file is os.ErrNotExist.
func loadNodeKubeconfig(path string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	pair, err := tls.X509KeyPair(rc.CertData, rc.KeyData)
	if err != nil {
		return nil, fmt.Errorf("%s: client certificate: %w", path, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%s: client certificate: %w", path, err)
	}
	if time.Now().After(cert.NotAfter) {
		return nil, fmt.Errorf("%s: client certificate expired at %s", path, cert.NotAfter)
	}
	return rc, nil
}

// writeNodeKubeconfig writes rc (embedded credentials) to path with mode 0600.
func writeNodeKubeconfig(path string, rc *rest.Config) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData, InsecureSkipTLSVerify: rc.Insecure}
	cfg.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData}
	cfg.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth"}
	cfg.CurrentContext = "default-context"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encoding the node kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing the node kubeconfig: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the node kubeconfig: %w", err)
	}
	return nil
}
