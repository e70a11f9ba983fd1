// The bootstrap tests check kubelet TLS bootstrapping: a node joining with a bootstrap token
// gets its client certificate through a CertificateSigningRequest that the controllers
// approve and sign, and nothing else is approved automatically.

package apiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	tokenID     = "abcdef"
	tokenSecret = "0123456789abcdef"
	token       = tokenID + "." + tokenSecret
)

// createBootstrapToken stores a bootstrap token as `wasmplane token create` does.
func createBootstrapToken(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: authn.BootstrapSecretPrefix + tokenID, Namespace: "kube-system"},
		Type: authn.BootstrapSecretType, Data: map[string][]byte{
			authn.BootstrapTokenID: []byte(tokenID), authn.BootstrapTokenSecret: []byte(tokenSecret),
			authn.BootstrapUsageAuth: []byte("true"), authn.BootstrapUsageSigning: []byte("true"),
			authn.BootstrapExpiration: []byte(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)),
		}}
	if _, err := cs.CoreV1().Secrets("kube-system").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the bootstrap token: %v", err)
	}
}

// requestPEM is a PEM certificate request for cn and orgs with a fresh key.
func requestPEM(t *testing.T, cn string, orgs ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func kubeletCSR(name string, req []byte) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}}
}

func approvedCond(c *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequestCondition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == certificatesv1.CertificateApproved {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// waitCSR polls until cond holds for the named request.
func waitCSR(t *testing.T, cs kubernetes.Interface, name string, what string, cond func(*certificatesv1.CertificateSigningRequest) bool) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	var got *certificatesv1.CertificateSigningRequest
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = c
		return cond(c), nil
	})
	if err != nil {
		t.Fatalf("csr %s never %s: %v (last %+v)", name, what, err, got)
	}
	return got
}

func TestTLSBootstrapJoinsNode(t *testing.T) {
	s := testserver.Start(t)
	admin := s.Clientset(t, false)
	createBootstrapToken(t, admin)
	rootDir, err := os.MkdirTemp("", "wp-boot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(rootDir) })
	const nodeName = "boot-node"
	kubeconfig := filepath.Join(rootDir, server.KubeletKubeconfigName)
	opts := server.BootstrapOptions{Server: s.URL(), Token: token, CAData: s.CA(), NodeName: nodeName,
		KubeconfigPath: kubeconfig, Timeout: 30 * time.Second, PollInterval: 100 * time.Millisecond, Logger: testserver.Logger()}
	start := time.Now()
	rc, err := server.LoadOrBootstrapKubeconfig(context.Background(), opts)
	if err != nil {
		t.Fatalf("bootstrapping: %v", err)
	}
	t.Logf("bootstrap took %v", time.Since(start))

	// The request records the bootstrap token's identity, and was approved and signed.
	list, err := admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d certificate signing requests, want 1", len(list.Items))
	}
	csr := list.Items[0]
	if csr.Spec.Username != authn.BootstrapUserPrefix+tokenID || !slices.Contains(csr.Spec.Groups, authn.GroupBootstrappers) {
		t.Fatalf("requester %q %v, want the bootstrap token's user in %s", csr.Spec.Username, csr.Spec.Groups, authn.GroupBootstrappers)
	}
	if c := approvedCond(&csr); c == nil || c.Reason != "AutoApproved" || c.Status != corev1.ConditionTrue {
		t.Fatalf("conditions %+v, want AutoApproved", csr.Status.Conditions)
	}
	if len(csr.Status.Certificate) == 0 {
		t.Fatal("no certificate issued")
	}
	fi, err := os.Stat(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig mode %v, want 0600", fi.Mode().Perm())
	}

	// The credentials are the node's.
	nodeClient, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ssr, err := nodeClient.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review with the node credentials: %v", err)
	}
	if u := ssr.Status.UserInfo; u.Username != authn.NodeUserPrefix+nodeName || !slices.Contains(u.Groups, authn.GroupNodes) {
		t.Fatalf("node credentials authenticate as %q %v", u.Username, u.Groups)
	}

	// The node may renew its own certificate (selfnodeclient) but not get another node's.
	nodeCSRs := nodeClient.CertificatesV1().CertificateSigningRequests()
	if _, err := nodeCSRs.Create(context.Background(), kubeletCSR("other-node", requestPEM(t, "system:node:other", authn.GroupNodes)), metav1.CreateOptions{}); err != nil {
		t.Fatalf("node creating a request: %v", err)
	}
	if _, err := nodeCSRs.Create(context.Background(), kubeletCSR("renewal", requestPEM(t, authn.NodeUserPrefix+nodeName, authn.GroupNodes)), metav1.CreateOptions{}); err != nil {
		t.Fatalf("node creating a request: %v", err)
	}
	renewal := waitCSR(t, admin, "renewal", "signed", func(c *certificatesv1.CertificateSigningRequest) bool { return len(c.Status.Certificate) > 0 })
	if c := approvedCond(renewal); c == nil || c.Message != "Auto approving self kubelet client certificate after SubjectAccessReview." {
		t.Fatalf("renewal conditions %+v", renewal.Status.Conditions)
	}
	if other, err := admin.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "other-node", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if approvedCond(other) != nil {
		t.Fatalf("node %s got a certificate for system:node:other approved", nodeName)
	}

	// A later start reuses the kubeconfig, without the token.
	again, err := server.LoadOrBootstrapKubeconfig(context.Background(), server.BootstrapOptions{KubeconfigPath: kubeconfig, NodeName: nodeName})
	if err != nil {
		t.Fatalf("reusing the kubeconfig: %v", err)
	}
	if string(again.CertData) != string(rc.CertData) {
		t.Fatal("a later start did not reuse the issued certificate")
	}

	// The kubelet registers the node with these credentials, and it becomes Ready.
	stop, err := server.StartNode(context.Background(), server.NodeConfig{RESTConfig: rc, NodeName: nodeName,
		RootDir: filepath.Join(rootDir, "n"), Port: -1, Logger: testserver.Logger()})
	if err != nil {
		t.Fatalf("starting the node: %v", err)
	}
	t.Cleanup(stop)
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("node %s never Ready: %v", nodeName, err)
	}
	t.Logf("node Ready %v after the start of bootstrapping", time.Since(start))
}

func TestOnlyNodeClientRequestsAreApproved(t *testing.T) {
	s := testserver.Start(t)
	admin := s.Clientset(t, false)
	createBootstrapToken(t, admin)
	tokenClient, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: s.CA()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	csrs := tokenClient.CertificatesV1().CertificateSigningRequests()

	// A client cannot choose the identity recorded as the requester.
	forged := kubeletCSR("forged-user", requestPEM(t, "system:node:forged", authn.GroupNodes))
	forged.Spec.Username, forged.Spec.Groups = "system:node:forged", []string{authn.GroupNodes}
	got, err := csrs.Create(ctx, forged, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Username != authn.BootstrapUserPrefix+tokenID || slices.Contains(got.Spec.Groups, authn.GroupNodes) {
		t.Fatalf("requester recorded as %q %v", got.Spec.Username, got.Spec.Groups)
	}

	// Validation: a request that is not a PEM CSR, no signer, an unknown usage.
	bad := kubeletCSR("bad", []byte("not a csr"))
	bad.Spec.SignerName = ""
	bad.Spec.Usages = append(bad.Spec.Usages, "flying")
	_, err = csrs.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("invalid request: got %v, want 422 Invalid", err)
	}
	fields := map[string]bool{}
	if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			fields[c.Field] = true
		}
	}
	for _, f := range []string{"spec.request", "spec.signerName", "spec.usages[2]"} {
		if !fields[f] {
			t.Errorf("no cause for %s in %v", f, err)
		}
	}

	// Requests the approver must leave alone, made with the bootstrap token.
	refused := map[string][]byte{
		"masters-org":  requestPEM(t, "system:node:evil", authn.GroupNodes, authn.GroupMasters),
		"masters-only": requestPEM(t, "system:node:evil", authn.GroupMasters),
		"not-a-node":   requestPEM(t, "admin", authn.GroupNodes),
	}
	for name, req := range refused {
		if _, err := csrs.Create(ctx, kubeletCSR(name, req), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	// A user outside system:bootstrappers allowed to create requests (but not
	// certificatesigningrequests/nodeclient) asks for a node certificate.
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-csr"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := s.IssueClientCertificate("alice")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: s.CA(), CertData: certPEM, KeyData: keyPEM}})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := alice.CertificatesV1().CertificateSigningRequests().Create(ctx, kubeletCSR("alice", requestPEM(t, "system:node:alice", authn.GroupNodes)), metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			return false, nil // the binding is not yet in the authorizer's cache
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("alice creating a request: %v", err)
	}
	// A user without any CSR permission cannot even create one.
	bobCert, bobKey, err := s.IssueClientCertificate("bob")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: s.CA(), CertData: bobCert, KeyData: bobKey}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.CertificatesV1().CertificateSigningRequests().Create(ctx, kubeletCSR("bob", requestPEM(t, "system:node:bob", authn.GroupNodes)), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("bob creating a request: got %v, want Forbidden", err)
	}

	// A good request made after all of them is approved and signed; the approver works
	// through its queue in order with one worker, so by then it has decided the others.
	if _, err := csrs.Create(ctx, kubeletCSR("good", requestPEM(t, "system:node:good", authn.GroupNodes)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCSR(t, admin, "good", "signed", func(c *certificatesv1.CertificateSigningRequest) bool { return len(c.Status.Certificate) > 0 })
	for _, name := range []string{"masters-org", "masters-only", "not-a-node", "alice"} {
		c, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if approvedCond(c) != nil || len(c.Status.Certificate) > 0 {
			t.Errorf("%s (requested by %s) was approved: %+v", name, c.Spec.Username, c.Status)
		}
	}

	// An admin may approve by hand (kubectl certificate approve uses /approval); the signer
	// then signs alice's request, whose subject is a valid node client certificate.
	c, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, "alice", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KubectlApprove", Message: "approved by the test"})
	// A client cannot set the certificate itself through /approval.
	c.Status.Certificate = []byte("forged")
	if _, err := admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, "alice", c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("approving: %v", err)
	}
	signed := waitCSR(t, admin, "alice", "signed", func(c *certificatesv1.CertificateSigningRequest) bool { return len(c.Status.Certificate) > 0 })
	if string(signed.Status.Certificate) == "forged" {
		t.Fatal("the approval subresource wrote the certificate")
	}
	// An approved request cannot be denied afterwards.
	signed.Status.Conditions = append(signed.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "Late"})
	if _, err := admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, "alice", signed, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("approving and denying: got %v, want Invalid", err)
	}
	// The signer refuses an approved request for a system:masters certificate.
	c, err = admin.CertificatesV1().CertificateSigningRequests().Get(ctx, "masters-org", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Mistake"})
	if _, err := admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, "masters-org", c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	failed := waitCSR(t, admin, "masters-org", "failed", func(c *certificatesv1.CertificateSigningRequest) bool {
		return slices.ContainsFunc(c.Status.Conditions, func(x certificatesv1.CertificateSigningRequestCondition) bool {
			return x.Type == certificatesv1.CertificateFailed
		})
	})
	if len(failed.Status.Certificate) > 0 {
		t.Fatal("signed a system:masters certificate")
	}
}
