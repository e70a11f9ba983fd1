package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// testCA returns a PEM CA certificate and its key.
func testCA(t *testing.T) (string, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), key
}

// apiTypeCases are the resources served for the conformance suite's API specs:
// certificates.k8s.io ClusterTrustBundles and PodCertificateRequests, DRA
// ResourceClaimTemplates, VolumeAttributesClasses and StorageVersionMigrations.
func apiTypeCases(t *testing.T) []resourceCase {
	ca, key := testCA(t)
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return []resourceCase{
		crudCase("clustertrustbundles", false, func(cs kubernetes.Interface, _ string) crudClient[*certificatesv1.ClusterTrustBundle, *certificatesv1.ClusterTrustBundleList] {
			return cs.CertificatesV1().ClusterTrustBundles()
		}, func(n string) *certificatesv1.ClusterTrustBundle {
			return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: ca}}
		}),
		crudCase("podcertificaterequests", false, func(cs kubernetes.Interface, ns string) crudClient[*certificatesv1.PodCertificateRequest, *certificatesv1.PodCertificateRequestList] {
			return cs.CertificatesV1().PodCertificateRequests(ns)
		}, func(n string) *certificatesv1.PodCertificateRequest {
			return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: certificatesv1.PodCertificateRequestSpec{
				SignerName: "example.com/signer", PodName: "pod", PodUID: "uid-1", ServiceAccountName: "default", ServiceAccountUID: "uid-2",
				NodeName: "node", NodeUID: "uid-3", StubPKCS10Request: csr}}
		}),
		crudCase("resourceclaimtemplates", false, func(cs kubernetes.Interface, ns string) crudClient[*resourcev1.ResourceClaimTemplate, *resourcev1.ResourceClaimTemplateList] {
			return cs.ResourceV1().ResourceClaimTemplates(ns)
		}, func(n string) *resourcev1.ResourceClaimTemplate {
			return &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: resourcev1.ResourceClaimTemplateSpec{
				Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
					Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}}}}
		}),
		crudCase("volumeattributesclasses", false, func(cs kubernetes.Interface, _ string) crudClient[*storagev1.VolumeAttributesClass, *storagev1.VolumeAttributesClassList] {
			return cs.StorageV1().VolumeAttributesClasses()
		}, func(n string) *storagev1.VolumeAttributesClass {
			return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: n}, DriverName: "disk.example.com", Parameters: map[string]string{"iops": "3000"}}
		}),
		crudCase("storageversionmigrations", false, func(cs kubernetes.Interface, _ string) crudClient[*storagemigrationv1.StorageVersionMigration, *storagemigrationv1.StorageVersionMigrationList] {
			return cs.StoragemigrationV1().StorageVersionMigrations()
		}, func(n string) *storagemigrationv1.StorageVersionMigration {
			return &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: n},
				Spec: storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "apps", Resource: "deployments"}}}
		}),
	}
}

// TestAPITypes runs the CRUD, patch and watch cycle on each resource of apiTypeCases in
// both wire encodings, then their validation and status rules, the 406 for a Table of a
// review, and events read through both event APIs.
func TestAPITypes(t *testing.T) {
	srv := testserver.StartAPI(t)
	cases := apiTypeCases(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			cs := srv.Clientset(t, m.json)
			ns := newNamespace(t, cs, "apitypes-"+m.name)
			for _, rc := range cases {
				t.Run(rc.name, func(t *testing.T) { rc.run(t, cs, ns, "apitypes-"+m.name) })
			}
		})
	}
	cs := srv.Clientset(t, false)
	ns := newNamespace(t, cs, "apitypes-rules")
	t.Run("invalid", func(t *testing.T) { testAPITypesInvalid(t, cs, ns) })
	t.Run("pod certificate status", func(t *testing.T) { testPodCertificateStatus(t, cs, ns) })
	t.Run("table of a review", func(t *testing.T) { testReviewTable(t, cs) })
	t.Run("events through both APIs", func(t *testing.T) { testEventVersions(t, cs, ns) })
	t.Run("attest for a signer", func(t *testing.T) { testAttest(t, srv, cs) })
}

// testAttest: a user who may create ClusterTrustBundles writes a signer's bundle only
// once granted "attest" on the signer (here on all of its domain).
func testAttest(t *testing.T, srv *testserver.Server, cs kubernetes.Interface) {
	ctx := ctxFor(t)
	ca, _ := testCA(t)
	rule := rbacv1.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"}}
	role, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "apitypes-ctb-writer"},
		Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "apitypes-ctb-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ctb-writer"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config(false)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "ctb-writer"}
	writer := testserver.NewClientset(t, cfg).CertificatesV1().ClusterTrustBundles()
	bundle := func(name, signer string) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: ca}}
	}
	created := func(b *certificatesv1.ClusterTrustBundle) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			_, err := writer.Create(ctx, b, metav1.CreateOptions{})
			return err == nil, nil
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, created(bundle("apitypes-plain", ""))); err != nil {
		t.Fatalf("the writer never created a bundle without a signer: %v", err)
	}
	_, err = writer.Create(ctx, bundle("example.com:attested:v1", "example.com/attested"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `user not permitted to attest for signerName "example.com/attested"`) {
		t.Fatalf("signer bundle without attest: %v, want 403", err)
	}
	role.Rules = append(role.Rules, rbacv1.PolicyRule{Verbs: []string{"attest"}, APIGroups: []string{"certificates.k8s.io"},
		Resources: []string{"signers"}, ResourceNames: []string{"example.com/*"}})
	if _, err := cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true,
		created(bundle("example.com:attested:v1", "example.com/attested"))); err != nil {
		t.Fatalf("the writer never created the signer's bundle after the grant: %v", err)
	}
}

func testAPITypesInvalid(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	ca, _ := testCA(t)
	ctbs := cs.CertificatesV1().ClusterTrustBundles()
	_, err := ctbs.Create(ctx, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "v1"},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: ca}}, metav1.CreateOptions{})
	wantInvalid(t, "trust bundle without the signer prefix", err, "metadata.name")
	_, err = ctbs.Create(ctx, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "junk"},
		Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: "not pem"}}, metav1.CreateOptions{})
	wantInvalid(t, "trust bundle without anchors", err, "spec.trustBundle")
	if _, err := ctbs.Create(ctx, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:signer:v1"},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: ca}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create signer trust bundle: %v", err)
	}
	list, err := ctbs.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/signer"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "example.com:signer:v1" {
		t.Fatalf("list by signer: %v %v", err, list)
	}
	_, err = ctbs.Patch(ctx, "example.com:signer:v1", types.MergePatchType, []byte(`{"spec":{"signerName":"example.com/other"}}`), metav1.PatchOptions{})
	wantInvalid(t, "trust bundle signer change", err, "metadata.name", "spec.signerName")

	pcr := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "short"}, Spec: certificatesv1.PodCertificateRequestSpec{
		SignerName: "example.com/signer", PodName: "pod", PodUID: "u", ServiceAccountName: "default", ServiceAccountUID: "u",
		NodeName: "node", NodeUID: "u", MaxExpirationSeconds: ptr.To[int32](60), StubPKCS10Request: []byte("junk")}}
	_, err = cs.CertificatesV1().PodCertificateRequests(ns).Create(ctx, pcr, metav1.CreateOptions{})
	wantInvalid(t, "pod certificate request", err, "spec.maxExpirationSeconds", "spec.stubPKCS10Request")

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: podSpec()}
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "foo-", Value: "1"}, {Name: "kernel.shmmax", Value: "1"}}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/signer", KeyType: "ED25519",
			CredentialBundlePath: "creds.pem", MaxExpirationSeconds: ptr.To[int32](7862401)}}}}}}}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	wantInvalid(t, "pod sysctls and certificate lifetime", err, "spec.securityContext.sysctls[0].name",
		"spec.volumes[0].projected.sources[0].podCertificate.maxExpirationSeconds")

	vacs := cs.StorageV1().VolumeAttributesClasses()
	_, err = vacs.Create(ctx, &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, DriverName: "disk.example.com"}, metav1.CreateOptions{})
	wantInvalid(t, "volume attributes class without parameters", err, "parameters")
	if _, err := vacs.Create(ctx, &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "apitypes-gold"}, DriverName: "disk.example.com",
		Parameters: map[string]string{"iops": "3000"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create volume attributes class: %v", err)
	}
	_, err = vacs.Patch(ctx, "apitypes-gold", types.MergePatchType, []byte(`{"parameters":{"iops":"6000"}}`), metav1.PatchOptions{})
	wantInvalid(t, "volume attributes class parameters change", err, "parameters")

	svms := cs.StoragemigrationV1().StorageVersionMigrations()
	_, err = svms.Create(ctx, &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}, metav1.CreateOptions{})
	wantInvalid(t, "migration without a resource", err, "spec.resource.resource")
	svm, err := svms.Create(ctx, &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "apitypes-migrate"},
		Spec: storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Resource: "secrets"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create migration: %v", err)
	}
	now := metav1.Now()
	svm.Status.Conditions = []metav1.Condition{{Type: "Succeeded", Status: metav1.ConditionTrue, Reason: "Done", LastTransitionTime: now}}
	if svm, err = svms.UpdateStatus(ctx, svm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("finish migration: %v", err)
	}
	svm.Status.Conditions = []metav1.Condition{{Type: "Succeeded", Status: metav1.ConditionFalse, Reason: "Undone", LastTransitionTime: now}}
	_, err = svms.UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	wantInvalid(t, "unfinishing a migration", err, "status.conditions")
}

// testPodCertificateStatus issues a certificate through the status subresource, which
// then no longer changes; the main resource never writes status.
func testPodCertificateStatus(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	_, key := testCA(t)
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	pcrs := cs.CertificatesV1().PodCertificateRequests(ns)
	pcr, err := pcrs.Create(ctx, &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "issued"}, Spec: certificatesv1.PodCertificateRequestSpec{
		SignerName: "example.com/signer", PodName: "pod", PodUID: "u", ServiceAccountName: "default", ServiceAccountUID: "u",
		NodeName: "node", NodeUID: "u", StubPKCS10Request: csr}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if pcr.Spec.MaxExpirationSeconds == nil || *pcr.Spec.MaxExpirationSeconds != 86400 {
		t.Fatalf("maxExpirationSeconds not defaulted to a day: %v", pcr.Spec.MaxExpirationSeconds)
	}
	notBefore := time.Now().Add(-time.Minute).Truncate(time.Second)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "pod"}, NotBefore: notBefore, NotAfter: notBefore.Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pcr.Status = certificatesv1.PodCertificateRequestStatus{CertificateChain: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		NotBefore: ptr.To(metav1.NewTime(notBefore)), NotAfter: ptr.To(metav1.NewTime(notBefore.Add(time.Hour))),
		BeginRefreshAt: ptr.To(metav1.NewTime(notBefore.Add(30 * time.Minute))),
		Conditions:     []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue, Reason: "Issued", LastTransitionTime: metav1.Now()}}}
	pcr.Spec.PodName = "ignored"
	issued, err := pcrs.UpdateStatus(ctx, pcr, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("issue: %v", err)
	}
	if issued.Status.CertificateChain == "" || issued.Spec.PodName != "pod" {
		t.Fatalf("after issue: chain %q, podName %q", issued.Status.CertificateChain, issued.Spec.PodName)
	}
	issued.Status.Conditions[0].Message = "changed"
	_, err = pcrs.UpdateStatus(ctx, issued, metav1.UpdateOptions{})
	wantInvalid(t, "status after issue", err, "status")
	_, err = pcrs.Patch(ctx, "issued", types.MergePatchType, []byte(`{"spec":{"podName":"other"}}`), metav1.PatchOptions{})
	wantInvalid(t, "spec change", err, "spec")
}

// testReviewTable: a review has no Table form, so asking for one is 406 Not Acceptable.
func testReviewTable(t *testing.T, cs kubernetes.Interface) {
	ctx := ctxFor(t)
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/", Verb: "get"}}}
	err := cs.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Body(sar).Do(ctx).Into(&metav1.Table{})
	var status apierrors.APIStatus
	if se, ok := err.(apierrors.APIStatus); ok {
		status = se
	}
	if status == nil || status.Status().Code != http.StatusNotAcceptable {
		t.Fatalf("Table of a SelfSubjectAccessReview: %v, want 406", err)
	}
	if err := cs.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").Body(sar).Do(ctx).Error(); err != nil {
		t.Fatalf("the same review as JSON: %v", err)
	}
}

// testEventVersions: core/v1 and events.k8s.io/v1 Events are the same objects, each
// found through the other API's field selectors and watches.
func testEventVersions(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := ctxFor(t)
	w, err := cs.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := cs.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "new-api"},
		EventTime: metav1.NowMicro(), ReportingController: "example.com/ctl", ReportingInstance: "ctl-1", Action: "Do", Reason: "Test",
		Type: corev1.EventTypeNormal, Note: "written as events.k8s.io", Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: ns}},
		metav1.CreateOptions{}); err != nil {
		t.Fatalf("create events.k8s.io event: %v", err)
	}
	core, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "source=example.com/ctl"})
	if err != nil || len(core.Items) != 1 || core.Items[0].Message != "written as events.k8s.io" || core.Items[0].InvolvedObject.Name != "p" {
		t.Fatalf("core list by source: %v %+v", err, core)
	}
	if _, err := cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "old-api"}, Reason: "Old",
		Message: "written as core", Type: corev1.EventTypeWarning, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n"},
		Source: corev1.EventSource{Component: "kubelet"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create core event: %v", err)
	}
	got, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.kind=Node"})
	if err != nil || len(got.Items) != 1 || got.Items[0].Note != "written as core" || got.Items[0].DeprecatedSource.Component != "kubelet" {
		t.Fatalf("events.k8s.io list by regarding.kind: %v %+v", err, got)
	}
	got, err = cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reportingController=example.com/ctl"})
	if err != nil || len(got.Items) != 1 || got.Items[0].Name != "new-api" {
		t.Fatalf("events.k8s.io list by reportingController: %v %+v", err, got)
	}
	seen := map[string]bool{}
	for !seen["new-api"] || !seen["old-api"] {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch closed")
			}
			e, isEvent := ev.Object.(*eventsv1.Event)
			if ev.Type != watch.Added || !isEvent {
				t.Fatalf("watch event %s %T", ev.Type, ev.Object)
			}
			seen[e.Name] = true
		case <-ctx.Done():
			t.Fatalf("watch saw %v before the deadline", seen)
		}
	}
}
