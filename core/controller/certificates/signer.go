package certificates

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	"github.com/wasmplane/wasmplane/core/pki"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DefaultSigningDuration is the longest certificate the signer issues, as
// kube-controller-manager's --cluster-signing-duration default.
const DefaultSigningDuration = 365 * 24 * time.Hour

// Signer signs approved kubernetes.io/kube-apiserver-client-kubelet requests with the
// cluster CA, so that the API server's client-certificate authenticator accepts them.
type Signer struct {
	client   kubernetes.Interface
	lister   certlisters.CertificateSigningRequestLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	ca       *pki.CA
	duration time.Duration
	log      *slog.Logger
}

// NewSigner returns a signer with ca fed by factory's CertificateSigningRequest informer;
// maxDuration (0 = DefaultSigningDuration) caps every certificate's validity.
func NewSigner(client kubernetes.Interface, factory informers.SharedInformerFactory, ca *pki.CA, maxDuration time.Duration, log *slog.Logger) (*Signer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if maxDuration <= 0 {
		maxDuration = DefaultSigningDuration
	}
	inf := factory.Certificates().V1().CertificateSigningRequests()
	s := &Signer{client: client, lister: inf.Lister(), synced: inf.Informer().HasSynced, ca: ca, duration: maxDuration,
		queue: newQueue("csrsigning"), log: log.With("controller", "csrsigning")}
	if _, err := inf.Informer().AddEventHandler(enqueueAll(s.queue)); err != nil {
		return nil, fmt.Errorf("adding csr handler: %w", err)
	}
	return s, nil
}

// Run signs with workers until ctx ends.
func (s *Signer) Run(ctx context.Context, workers int) {
	worker.Run(ctx, s.queue, workers, []cache.InformerSynced{s.synced}, s.sync, s.log, "certificatesigningrequest")
}

func (s *Signer) sync(ctx context.Context, name string) error {
	csr, err := s.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || len(csr.Status.Certificate) > 0 || !approved(csr) {
		return nil
	}
	csr = csr.DeepCopy()
	certPEM, failure, err := s.Sign(csr)
	if err != nil {
		return fmt.Errorf("signing %s: %w", name, err)
	}
	if failure != "" {
		// An approved request the signer will never sign is marked Failed, as Kubernetes
		// does, so that the requester stops waiting.
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: "SignerValidationFailure",
			Message: failure, LastUpdateTime: metav1.Now(),
		})
		s.log.Info("refusing to sign certificate signing request", "csr", name, "reason", failure)
	} else {
		csr.Status.Certificate = certPEM
	}
	if _, err := s.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the certificate of %s: %w", name, err)
	}
	if failure == "" {
		s.log.Info("signed certificate signing request", "csr", name, "requester", csr.Spec.Username)
	}
	return nil
}

// Sign checks csr against the kubelet client signer's rules and signs it; a non-empty
// failure says why the request can never be signed, and err is a (retryable) signing error.
func (s *Signer) Sign(csr *certificatesv1.CertificateSigningRequest) (certPEM []byte, failure string, err error) {
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return nil, err.Error(), nil
	}
	if err := ValidateKubeletClient(req, csr.Spec.Usages); err != nil {
		return nil, err.Error(), nil
	}
	var keyUsage x509.KeyUsage
	var ext []x509.ExtKeyUsage
	for _, u := range csr.Spec.Usages {
		switch u {
		case certificatesv1.UsageDigitalSignature:
			keyUsage |= x509.KeyUsageDigitalSignature
		case certificatesv1.UsageKeyEncipherment:
			keyUsage |= x509.KeyUsageKeyEncipherment
		case certificatesv1.UsageClientAuth:
			ext = append(ext, x509.ExtKeyUsageClientAuth)
		}
	}
	validity := s.duration
	if e := csr.Spec.ExpirationSeconds; e != nil && time.Duration(*e)*time.Second < validity {
		validity = time.Duration(*e) * time.Second
	}
	certPEM, err = s.ca.SignRequest(req, keyUsage, ext, validity)
	if err != nil {
		return nil, "", err
	}
	return certPEM, "", nil
}
