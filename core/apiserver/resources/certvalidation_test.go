package resources

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// testCert returns a PEM certificate for key, self-signed, valid from notBefore for life.
func testCert(t *testing.T, key *ecdsa.PrivateKey, ca bool, notBefore time.Time, life time.Duration) string {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "test"},
		NotBefore: notBefore, NotAfter: notBefore.Add(life), IsCA: ca, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func testKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// errorsMention reports whether errs holds an error whose text contains want ("" = none).
func errorsMention(errs field.ErrorList, want string) bool {
	if want == "" {
		return len(errs) == 0
	}
	for _, e := range errs {
		if strings.Contains(e.Error(), want) {
			return true
		}
	}
	return false
}

func TestValidateClusterTrustBundle(t *testing.T) {
	key := testKey(t)
	ca := testCert(t, key, true, time.Now(), time.Hour)
	leaf := testCert(t, key, false, time.Now(), time.Hour)
	for _, tc := range []struct {
		name, objName, signer, bundle, want string
	}{
		{name: "no signer", objName: "roots", bundle: ca},
		{name: "signer prefix", objName: "example.com:signer:v1", signer: "example.com/signer", bundle: ca},
		{name: "signer without prefix", objName: "v1", signer: "example.com/signer", bundle: ca, want: "must be named with prefix example.com:signer:"},
		{name: "colon without signer", objName: "a:b", bundle: ca, want: `must not have ":" in its name`},
		{name: "unqualified signer", objName: "signer:x", signer: "signer", bundle: ca, want: "fully qualified"},
		{name: "not a CA", objName: "roots", bundle: leaf, want: "entry 0 does not have the CA bit set"},
		{name: "duplicate", objName: "roots", bundle: ca + ca, want: "duplicate trust anchor"},
		{name: "empty", objName: "roots", bundle: "", want: "at least one trust anchor must be provided"},
		{name: "other block", objName: "roots", bundle: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", want: "bad block type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: tc.objName},
				Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: tc.signer, TrustBundle: tc.bundle}}
			if errs := validateClusterTrustBundle(b, true); !errorsMention(errs, tc.want) {
				t.Errorf("errors %v, want one mentioning %q", errs, tc.want)
			}
		})
	}
}

// testPCR returns a valid PodCertificateRequest for key.
func testPCR(t *testing.T, key *ecdsa.PrivateKey) *certificatesv1.PodCertificateRequest {
	t.Helper()
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "pcr", Namespace: "ns"},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/signer", PodName: "pod", PodUID: "uid-1",
			ServiceAccountName: "default", ServiceAccountUID: "uid-2", NodeName: "node", NodeUID: "uid-3",
			MaxExpirationSeconds: ptr.To[int32](86400), StubPKCS10Request: csr}}
}

func TestValidatePodCertificateRequestSpec(t *testing.T) {
	key := testKey(t)
	for _, tc := range []struct {
		name   string
		change func(*certificatesv1.PodCertificateRequestSpec)
		want   string
	}{
		{name: "valid", change: func(*certificatesv1.PodCertificateRequestSpec) {}},
		{name: "too short", change: func(s *certificatesv1.PodCertificateRequestSpec) { s.MaxExpirationSeconds = ptr.To[int32](3599) },
			want: "must be in the range [3600, 7862400]"},
		{name: "kubernetes signer is capped at a day", change: func(s *certificatesv1.PodCertificateRequestSpec) {
			s.SignerName, s.MaxExpirationSeconds = "kubernetes.io/kube-apiserver-client-pod", ptr.To[int32](86401)
		}, want: "must be in the range [3600, 86400]"},
		{name: "no pod uid", change: func(s *certificatesv1.PodCertificateRequestSpec) { s.PodUID = "" }, want: "spec.podUID"},
		{name: "bad request", change: func(s *certificatesv1.PodCertificateRequestSpec) { s.StubPKCS10Request = []byte("junk") },
			want: "must be a valid PKCS#10 CSR"},
		{name: "annotation without domain", change: func(s *certificatesv1.PodCertificateRequestSpec) {
			s.UnverifiedUserAnnotations = map[string]string{"plain": "x"}
		}, want: "spec.unverifiedUserAnnotations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testPCR(t, key)
			tc.change(&r.Spec)
			if errs := validatePodCertificateRequestSpec(&r.Spec); !errorsMention(errs, tc.want) {
				t.Errorf("errors %v, want one mentioning %q", errs, tc.want)
			}
		})
	}
}

func TestValidatePodCertificateRequestStatus(t *testing.T) {
	key, other := testKey(t), testKey(t)
	now := time.Now().Truncate(time.Second)
	notBefore := now.Add(-time.Minute)
	issued := func(chain string, refresh time.Time) certificatesv1.PodCertificateRequestStatus {
		return certificatesv1.PodCertificateRequestStatus{CertificateChain: chain,
			NotBefore: ptr.To(metav1.NewTime(notBefore)), NotAfter: ptr.To(metav1.NewTime(notBefore.Add(time.Hour))),
			BeginRefreshAt: ptr.To(metav1.NewTime(refresh)),
			Conditions:     []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue, Reason: "Issued", LastTransitionTime: metav1.NewTime(now)}}}
	}
	good := issued(testCert(t, key, false, notBefore, time.Hour), notBefore.Add(15*time.Minute))
	for _, tc := range []struct {
		name      string
		oldStatus certificatesv1.PodCertificateRequestStatus
		status    certificatesv1.PodCertificateRequestStatus
		want      string
	}{
		{name: "issue", status: good},
		{name: "another key", status: issued(testCert(t, other, false, notBefore, time.Hour), notBefore.Add(15*time.Minute)),
			want: "not issued to the requested public key"},
		{name: "refresh too early", status: issued(good.CertificateChain, notBefore.Add(5*time.Minute)), want: "at least 10 minutes after"},
		{name: "unknown condition", status: certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{
			{Type: "Other", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.NewTime(now)}}}, want: "Unsupported value"},
		{name: "issued is final", oldStatus: good, status: certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{
			{Type: "Denied", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.NewTime(now)}}}, want: "immutable after"},
		{name: "denial carries nothing else", status: certificatesv1.PodCertificateRequestStatus{CertificateChain: good.CertificateChain,
			Conditions: []metav1.Condition{{Type: "Denied", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.NewTime(now)}}},
			want: "must be empty when denying"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := testPCR(t, key)
			old.Status = tc.oldStatus
			r := old.DeepCopy()
			r.Status = tc.status
			if errs := validatePodCertificateRequestStatus(r, old, now); !errorsMention(errs, tc.want) {
				t.Errorf("errors %v, want one mentioning %q", errs, tc.want)
			}
		})
	}
}

func TestValidatePodSpecSysctlsAndPodCertificates(t *testing.T) {
	projected := func(src corev1.PodCertificateProjection) []corev1.Volume {
		return []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{PodCertificate: &src}}}}}}
	}
	valid := corev1.PodCertificateProjection{SignerName: "example.com/signer", KeyType: "ED25519", CredentialBundlePath: "creds.pem"}
	for _, tc := range []struct {
		name string
		spec func(*corev1.PodSpec)
		want string
	}{
		{name: "valid", spec: func(s *corev1.PodSpec) {
			s.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "net/ipv4/ip_forward", Value: "1"}}
			s.Volumes = projected(valid)
		}},
		{name: "bad sysctl name", spec: func(s *corev1.PodSpec) { s.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "foo-"}} },
			want: `Invalid value: "foo-"`},
		{name: "double dot", spec: func(s *corev1.PodSpec) { s.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "bar.."}} },
			want: `Invalid value: "bar.."`},
		{name: "duplicate sysctl", spec: func(s *corev1.PodSpec) {
			s.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "kernel.msgmax"}, {Name: "kernel.msgmax"}}
		}, want: "Duplicate value"},
		{name: "net sysctl with host network", spec: func(s *corev1.PodSpec) {
			s.HostNetwork = true
			s.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_forward"}}
		}, want: "may not be specified when 'hostNetwork' is true"},
		{name: "lifetime over 91 days", spec: func(s *corev1.PodSpec) {
			v := valid
			v.MaxExpirationSeconds = ptr.To[int32](7862401)
			s.Volumes = projected(v)
		}, want: "if provided, maxExpirationSeconds must be <= 7862400"},
		{name: "lifetime under an hour", spec: func(s *corev1.PodSpec) {
			v := valid
			v.MaxExpirationSeconds = ptr.To[int32](3599)
			s.Volumes = projected(v)
		}, want: "if provided, maxExpirationSeconds must be >= 3600"},
		{name: "no path", spec: func(s *corev1.PodSpec) {
			v := valid
			v.CredentialBundlePath = ""
			s.Volumes = projected(v)
		}, want: "specify at least one of credentialBundlePath"},
		{name: "same path twice", spec: func(s *corev1.PodSpec) {
			v := valid
			v.KeyPath, v.CertificateChainPath = "creds.pem", "../chain.pem"
			s.Volumes = projected(v)
		}, want: "conflicting duplicate paths"},
		{name: "unknown key type", spec: func(s *corev1.PodSpec) {
			v := valid
			v.KeyType = "DSA"
			s.Volumes = projected(v)
		}, want: "keyType: Unsupported value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}
			defaultPodSpec(spec)
			tc.spec(spec)
			if errs := validatePodSpec(spec, field.NewPath("spec")); !errorsMention(errs, tc.want) {
				t.Errorf("errors %v, want one mentioning %q", errs, tc.want)
			}
		})
	}
}

func TestCheckAttest(t *testing.T) {
	key := testKey(t)
	ca := testCert(t, key, true, time.Now(), time.Hour)
	// The authorizer lets alice attest for example.com/a and bob for all of example.com.
	a := authz.AuthorizerFunc(func(_ context.Context, at authz.Attributes) (authz.Decision, string, error) {
		if at.Verb != "attest" || at.Resource != "signers" || at.APIGroup != "certificates.k8s.io" {
			return authz.DecisionNoOpinion, "", nil
		}
		if (at.User.Name == "alice" && at.Name == "example.com/a") || (at.User.Name == "bob" && at.Name == "example.com/*") {
			return authz.DecisionAllow, "", nil
		}
		return authz.DecisionNoOpinion, "", nil
	})
	bundle := func(signer string) *certificatesv1.ClusterTrustBundle {
		name := "plain"
		if signer != "" {
			name = strings.ReplaceAll(signer, "/", ":") + ":v1"
		}
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: ca}}
	}
	relabeled := bundle("example.com/b")
	relabeled.OwnerReferences = []metav1.OwnerReference{{Name: "owner"}}
	for _, tc := range []struct {
		name, user string
		obj        *certificatesv1.ClusterTrustBundle
		old        runtime.Object
		wantErr    bool
	}{
		{name: "no signer needs nothing", user: "carol", obj: bundle("")},
		{name: "signer named", user: "alice", obj: bundle("example.com/a")},
		{name: "signer not named", user: "alice", obj: bundle("example.com/b"), wantErr: true},
		{name: "domain wildcard", user: "bob", obj: bundle("example.com/b")},
		{name: "nobody", user: "carol", obj: bundle("example.com/a"), wantErr: true},
		{name: "garbage collector fields only", user: "carol", obj: relabeled, old: bundle("example.com/b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := authn.WithUser(context.Background(), &authn.User{Name: tc.user})
			err := checkAttest(ctx, a, tc.obj, tc.old)
			if (err != nil) != tc.wantErr || (err != nil && !apierrors.IsForbidden(err)) {
				t.Errorf("err = %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}
