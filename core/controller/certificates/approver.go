// Package certificates holds the CertificateSigningRequest controllers of kubelet TLS
// bootstrapping, as Kubernetes' csrapproving and csrsigning: an approver that approves
// kubelet client certificate requests whose requester may ask for them, and a signer that
// signs approved requests for kubernetes.io/kube-apiserver-client-kubelet with the cluster
// CA.
package certificates

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	authorizationv1 "k8s.io/api/authorization/v1"
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

// Well-known names of kubelet client certificates.
const (
	// NodeUserPrefix starts a node's user name (the certificate's CN).
	NodeUserPrefix = "system:node:"
	// NodesGroup is the single organization of a node's client certificate.
	NodesGroup = "system:nodes"
)

// Decision is what the approver does with a request.
type Decision int

const (
	// Skip leaves the request alone: not a kubelet client request, or already decided.
	Skip Decision = iota
	// Pending leaves a kubelet client request for someone else (an admin) to decide,
	// because its requester is not allowed to have it approved automatically.
	Pending
	// Approve approves the request.
	Approve
)

// Authorize answers whether the requester of csr may create
// certificatesigningrequests/<subresource> (nodeclient or selfnodeclient).
type Authorize func(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, subresource string) (bool, error)

// Decide is the approver's decision table, as Kubernetes' csrapproving: a request for
// kubernetes.io/kube-apiserver-client-kubelet that is not yet approved or denied, whose
// certificate request is a node client certificate (CN system:node:<name>, O system:nodes
// only, no SANs, digital signature / key encipherment / client auth usages only, including
// client auth), is approved when the requester may create
// certificatesigningrequests/selfnodeclient (a node renewing its own certificate: the CN
// is the requester's user name) or certificatesigningrequests/nodeclient (a bootstrap
// token). Everything else is left as it is. The reason names the rule that applied.
func Decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, authorize Authorize) (Decision, string, error) {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return Skip, "not a kubelet client signer", nil
	}
	if decided(csr) {
		return Skip, "already decided", nil
	}
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return Skip, "unparseable request: " + err.Error(), nil
	}
	if err := ValidateKubeletClient(req, csr.Spec.Usages); err != nil {
		return Pending, "not a node client certificate: " + err.Error(), nil
	}
	if req.Subject.CommonName == csr.Spec.Username {
		ok, err := authorize(ctx, csr, "selfnodeclient")
		if err != nil {
			return Skip, "", err
		}
		if ok {
			return Approve, "Auto approving self kubelet client certificate after SubjectAccessReview.", nil
		}
	}
	ok, err := authorize(ctx, csr, "nodeclient")
	if err != nil {
		return Skip, "", err
	}
	if ok {
		return Approve, "Auto approving kubelet client certificate after SubjectAccessReview.", nil
	}
	return Pending, "requester may not create certificatesigningrequests/nodeclient", nil
}

// ValidateKubeletClient checks that req is a node client certificate request with the
// usages Kubernetes allows for kubernetes.io/kube-apiserver-client-kubelet.
func ValidateKubeletClient(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, []string{NodesGroup}) {
		return fmt.Errorf("subject organization must be [%q], not %q", NodesGroup, req.Subject.Organization)
	}
	if !strings.HasPrefix(req.Subject.CommonName, NodeUserPrefix) || len(req.Subject.CommonName) == len(NodeUserPrefix) {
		return fmt.Errorf("subject common name %q must start with %q", req.Subject.CommonName, NodeUserPrefix)
	}
	if len(req.DNSNames) > 0 || len(req.EmailAddresses) > 0 || len(req.IPAddresses) > 0 || len(req.URIs) > 0 {
		return errors.New("subject alternative names are not allowed")
	}
	allowed := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	for _, u := range usages {
		if !slices.Contains(allowed, u) {
			return fmt.Errorf("usage %q is not allowed", u)
		}
	}
	if !slices.Contains(usages, certificatesv1.UsageClientAuth) {
		return errors.New("usages must include client auth")
	}
	return nil
}

// decided reports whether the request is approved or denied.
func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
			return true
		}
	}
	return false
}

// approved reports whether the request is approved and neither denied nor failed.
func approved(csr *certificatesv1.CertificateSigningRequest) bool {
	ok := false
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			ok = c.Status == corev1.ConditionTrue || c.Status == ""
		case certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return false
		}
	}
	return ok
}

// parseRequest decodes the PEM certificate request and checks its signature.
func parseRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the certificate request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	return req, nil
}

// Approver approves kubelet client CertificateSigningRequests (see Decide).
type Approver struct {
	client kubernetes.Interface
	lister certlisters.CertificateSigningRequestLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *slog.Logger
}

// NewApprover returns an approver fed by factory's CertificateSigningRequest informer; it
// asks the API server's SubjectAccessReview whether a requester may have a request
// approved, so that RBAC (the nodeclient and selfnodeclient ClusterRoles) decides.
func NewApprover(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Approver, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inf := factory.Certificates().V1().CertificateSigningRequests()
	a := &Approver{client: client, lister: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: newQueue("csrapproving"), log: log.With("controller", "csrapproving")}
	if _, err := inf.Informer().AddEventHandler(enqueueAll(a.queue)); err != nil {
		return nil, fmt.Errorf("adding csr handler: %w", err)
	}
	return a, nil
}

// Run approves with workers until ctx ends.
func (a *Approver) Run(ctx context.Context, workers int) {
	worker.Run(ctx, a.queue, workers, []cache.InformerSynced{a.synced}, a.sync, a.log, "certificatesigningrequest")
}

func (a *Approver) sync(ctx context.Context, name string) error {
	csr, err := a.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	d, reason, err := Decide(ctx, csr, a.subjectAccessReview)
	if err != nil {
		return err
	}
	switch d {
	case Pending:
		a.log.Debug("leaving certificate signing request pending", "csr", name, "requester", csr.Spec.Username, "reason", reason)
		return nil
	case Skip:
		return nil
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved", Message: reason,
		LastUpdateTime: metav1.Now(),
	})
	if _, err := a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("approving %s: %w", name, err)
	}
	a.log.Info("approved certificate signing request", "csr", name, "requester", csr.Spec.Username)
	return nil
}

// subjectAccessReview asks the API server whether csr's requester may create
// certificatesigningrequests/<subresource>.
func (a *Approver) subjectAccessReview(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, subresource string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range csr.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: certificatesv1.GroupName, Resource: "certificatesigningrequests", Subresource: subresource, Verb: "create",
		},
	}}
	res, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subject access review for %s: %w", csr.Name, err)
	}
	return res.Status.Allowed, nil
}

func newQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}

func enqueueAll(q workqueue.TypedRateLimitingInterface[string]) cache.ResourceEventHandler {
	add := func(obj any) {
		if c, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
			q.Add(c.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
}
