package resources

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/mail"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// The bounds of a pod certificate's lifetime, as Kubernetes sets them: at least an hour,
// at most a day for the kubernetes.io signers and 91 days for any other.
const (
	minMaxExpirationSeconds           = 3600
	kubernetesMaxMaxExpirationSeconds = 86400
	maxMaxExpirationSeconds           = 7862400
	defaultMaxExpirationSeconds       = 86400
	// maxCertificateChainSize bounds an issued chain, as Kubernetes does (100 KiB).
	maxCertificateChainSize = 100 * 1024
	// maxStubRequestSize bounds a request's PKCS#10 data, as Kubernetes does (10 KiB).
	maxStubRequestSize = 10 * 1024
)

// podCertificateKeyTypes are the key types a podCertificate projection may ask kubelet
// to generate.
var podCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// podCertificateRequests is certificates.k8s.io/v1 PodCertificateRequest: a kubelet asks a
// signer for a pod's certificate; the signer answers through the status subresource.
func podCertificateRequests() Definition {
	status := &strategy{
		prepareUpdate: func(obj, old runtime.Object) {
			obj.(*certificatesv1.PodCertificateRequest).Spec = *old.(*certificatesv1.PodCertificateRequest).Spec.DeepCopy()
		},
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validatePodCertificateRequestStatus(obj.(*certificatesv1.PodCertificateRequest), old.(*certificatesv1.PodCertificateRequest), time.Now())
		},
	}
	d := stored(certificatesv1.SchemeGroupVersion, "podcertificaterequests", "PodCertificateRequest", nil, true, false,
		func() runtime.Object { return &certificatesv1.PodCertificateRequest{} },
		func() runtime.Object { return &certificatesv1.PodCertificateRequestList{} },
		&strategy{
			defaults: func(obj runtime.Object) {
				r := obj.(*certificatesv1.PodCertificateRequest)
				if r.Spec.MaxExpirationSeconds == nil {
					r.Spec.MaxExpirationSeconds = ptr.To[int32](defaultMaxExpirationSeconds)
				}
			},
			prepareCreate: func(obj runtime.Object) {
				obj.(*certificatesv1.PodCertificateRequest).Status = certificatesv1.PodCertificateRequestStatus{}
			},
			prepareUpdate: func(obj, old runtime.Object) {
				obj.(*certificatesv1.PodCertificateRequest).Status = old.(*certificatesv1.PodCertificateRequest).Status
			},
			validate: func(obj runtime.Object) field.ErrorList {
				return validatePodCertificateRequestSpec(&obj.(*certificatesv1.PodCertificateRequest).Spec)
			},
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				// Every spec field is immutable; only metadata changes through the object.
				return apimachineryvalidation.ValidateImmutableField(obj.(*certificatesv1.PodCertificateRequest).Spec,
					old.(*certificatesv1.PodCertificateRequest).Spec, field.NewPath("spec"))
			},
		},
		func(r *registry.Resource) {
			r.StatusStrategy = status
			r.FieldLabels = []string{"spec.signerName", "spec.podName", "spec.nodeName"}
			r.GetAttrs = func(obj runtime.Object) (labels.Set, fields.Set, error) {
				p := obj.(*certificatesv1.PodCertificateRequest)
				return labels.Set(p.Labels), fields.Set{"metadata.name": p.Name, "metadata.namespace": p.Namespace,
					"spec.signerName": p.Spec.SignerName, "spec.podName": p.Spec.PodName, "spec.nodeName": string(p.Spec.NodeName)}, nil
			}
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "PodName", Type: "string", Description: certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["podName"]},
					{Name: "SignerName", Type: "string", Description: certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["signerName"]},
					endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					p := obj.(*certificatesv1.PodCertificateRequest)
					return []any{p.Name, p.Spec.PodName, p.Spec.SignerName, endpoints.Age(p.CreationTimestamp, time.Now())}
				},
			}
		})
	d.Subresources = func(s *endpoints.Scope) []endpoints.Subresource {
		return []endpoints.Subresource{endpoints.StatusSubresource(s, status)}
	}
	return d
}

// isKubernetesSigner reports whether a signer name is one the Kubernetes project reserves.
func isKubernetesSigner(name string) bool {
	domain, _, _ := strings.Cut(name, "/")
	return domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io")
}

// validatePodCertificateRequestSpec follows Kubernetes' create validation: the pod,
// service account and node it is for, a lifetime within the signer's bounds, and a
// self-signed PKCS#10 request whose key is of a supported type.
func validatePodCertificateRequestSpec(spec *certificatesv1.PodCertificateRequestSpec) field.ErrorList {
	p := field.NewPath("spec")
	errs := validateSignerName(p.Child("signerName"), spec.SignerName)
	errs = append(errs, validateUserAnnotations(p.Child("unverifiedUserAnnotations"), spec.UnverifiedUserAnnotations)...)
	errs = append(errs, dnsSubdomain(p.Child("podName"), spec.PodName)...)
	errs = append(errs, dnsSubdomain(p.Child("serviceAccountName"), spec.ServiceAccountName)...)
	errs = append(errs, dnsSubdomain(p.Child("nodeName"), string(spec.NodeName))...)
	for _, uid := range []struct {
		name  string
		value string
	}{{"podUID", string(spec.PodUID)}, {"serviceAccountUID", string(spec.ServiceAccountUID)}, {"nodeUID", string(spec.NodeUID)}} {
		switch {
		case uid.value == "":
			errs = append(errs, field.Invalid(p.Child(uid.name), uid.value, "must not be empty"))
		case len(uid.value) > 128:
			errs = append(errs, field.TooLong(p.Child(uid.name), "", 128))
		}
	}
	if spec.MaxExpirationSeconds == nil {
		return append(errs, field.Required(p.Child("maxExpirationSeconds"), "must be set"))
	}
	upper := int32(maxMaxExpirationSeconds)
	if isKubernetesSigner(spec.SignerName) {
		upper = kubernetesMaxMaxExpirationSeconds
	}
	if s := *spec.MaxExpirationSeconds; s < minMaxExpirationSeconds || s > upper {
		errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), s, fmt.Sprintf("must be in the range [%d, %d]", minMaxExpirationSeconds, upper)))
	}
	reqPath := p.Child("stubPKCS10Request")
	if len(spec.StubPKCS10Request) == 0 {
		return append(errs, field.Required(reqPath, ""))
	}
	if len(spec.StubPKCS10Request) > maxStubRequestSize {
		return append(errs, field.TooLong(reqPath, "", maxStubRequestSize))
	}
	req, err := x509.ParseCertificateRequest(spec.StubPKCS10Request)
	if err != nil {
		return append(errs, field.Invalid(reqPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR"))
	}
	switch pub := req.PublicKey.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() && pub.Curve != elliptic.P384() && pub.Curve != elliptic.P521() {
			return append(errs, field.Invalid(reqPath, "curve "+pub.Curve.Params().Name, "elliptic public keys must use curve P256, P384, or P521"))
		}
	case *rsa.PublicKey:
		if bits := pub.Size() * 8; bits != 3072 && bits != 4096 {
			return append(errs, field.Invalid(reqPath, fmt.Sprintf("%d-bit modulus", bits), "RSA keys must have modulus size 3072 or 4096"))
		}
	default:
		return append(errs, field.Invalid(reqPath, field.OmitValueType{}, "unknown public key type; supported types are Ed25519, ECDSA, and RSA"))
	}
	// Only the key and the signature matter: kubelet sends empty requests, and leaving
	// the rest unread lets their contents evolve.
	if err := req.CheckSignature(); err != nil {
		errs = append(errs, field.Invalid(reqPath, field.OmitValueType{}, "invalid signature"))
	}
	return errs
}

// validateUserAnnotations checks annotations passed to a signer: every key
// domain-prefixed (case does not matter), and annotations' size limit overall.
func validateUserAnnotations(p *field.Path, annotations map[string]string) field.ErrorList {
	var errs field.ErrorList
	for k := range annotations {
		errs = append(errs, validation.IsDomainPrefixedKey(p, strings.ToLower(k))...)
	}
	if err := apimachineryvalidation.ValidateAnnotationsSize(annotations); err != nil {
		errs = append(errs, field.TooLong(p, "", apimachineryvalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

// pcrTerminal is the Issued, Denied or Failed condition of a request, if any.
func pcrTerminal(r *certificatesv1.PodCertificateRequest) string {
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied,
			certificatesv1.PodCertificateRequestConditionTypeFailed:
			if c.Status == metav1.ConditionTrue {
				return c.Type
			}
		}
	}
	return ""
}

// validatePodCertificateRequestStatus follows Kubernetes' status validation: at most one
// of the Issued, Denied and Failed conditions, True; the status changes only by reaching
// one of them and never after; a denial or failure carries nothing else; an issue carries
// a chain whose leaf was issued for the requested key and whose validity the notBefore,
// notAfter and beginRefreshAt fields restate.
func validatePodCertificateRequestStatus(r, old *certificatesv1.PodCertificateRequest, now time.Time) field.ErrorList {
	var errs field.ErrorList
	cp := field.NewPath("status", "conditions")
	known := 0
	for i, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied,
			certificatesv1.PodCertificateRequestConditionTypeFailed:
			if known++; known > 1 {
				errs = append(errs, field.Invalid(cp.Index(i).Child("type"), c.Type, `There may be at most one condition with type "Issued", "Denied", or "Failed"`))
			}
			if c.Status != metav1.ConditionTrue {
				errs = append(errs, field.NotSupported(cp.Index(i).Child("status"), c.Status, []metav1.ConditionStatus{metav1.ConditionTrue}))
			}
		default:
			errs = append(errs, field.NotSupported(cp.Index(i).Child("type"), c.Type, []string{certificatesv1.PodCertificateRequestConditionTypeIssued,
				certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed}))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(r.Status.Conditions, cp)...)
	if len(errs) > 0 {
		return errs
	}
	sp := field.NewPath("status")
	unchanged := func(want certificatesv1.PodCertificateRequestStatus, detail string) field.ErrorList {
		if apiequality.Semantic.DeepEqual(r.Status, want) {
			return nil
		}
		return field.ErrorList{field.Invalid(sp, field.OmitValueType{}, detail)}
	}
	if pcrTerminal(old) != "" {
		return unchanged(old.Status, "immutable after PodCertificateRequest is issued, denied, or failed")
	}
	switch pcrTerminal(r) {
	case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
		return unchanged(certificatesv1.PodCertificateRequestStatus{Conditions: r.Status.Conditions},
			"non-condition status fields must be empty when denying or failing the PodCertificateRequest")
	case certificatesv1.PodCertificateRequestConditionTypeIssued:
		return validateIssuedPodCertificate(r, old, now)
	}
	return unchanged(old.Status, `status is immutable unless transitioning to "Issued", "Denied", or "Failed"`)
}

// validateIssuedPodCertificate checks an issued request's chain and validity fields.
func validateIssuedPodCertificate(r, old *certificatesv1.PodCertificateRequest, now time.Time) field.ErrorList {
	chainPath := field.NewPath("status", "certificateChain")
	st := r.Status
	if len(st.CertificateChain) > maxCertificateChainSize {
		return field.ErrorList{field.TooLong(chainPath, "", maxCertificateChainSize)}
	}
	leafBlock, rest := pem.Decode([]byte(st.CertificateChain))
	if leafBlock == nil {
		return field.ErrorList{field.Invalid(chainPath, field.OmitValueType{}, "issued certificate chain must contain at least one certificate")}
	}
	if leafBlock.Type != "CERTIFICATE" {
		return field.ErrorList{field.Invalid(chainPath, field.OmitValueType{}, "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")}
	}
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		return field.ErrorList{field.Invalid(chainPath, field.OmitValueType{}, "leaf certificate does not parse as valid X.509")}
	}
	var errs field.ErrorList
	for _, name := range leaf.DNSNames {
		if name == "" || strings.Contains(name, "..") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
			errs = append(errs, field.Invalid(chainPath, name, "leaf certificate's DNSName must not be empty, contain '..', or start or end with '.'"))
		}
	}
	for _, addr := range leaf.EmailAddresses {
		if _, err := mail.ParseAddress(addr); err != nil {
			errs = append(errs, field.Invalid(chainPath, addr, "leaf certificate should not contain invalid EmailAddress"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	// The signer must have certified the key the pod holds, nothing else.
	req, err := x509.ParseCertificateRequest(old.Spec.StubPKCS10Request)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "stubPKCS10Request"), field.OmitValueType{}, "must be a valid PKCS#10 CSR")}
	}
	if key, ok := req.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !key.Equal(leaf.PublicKey) {
		return field.ErrorList{field.Invalid(chainPath, field.OmitValueType{}, "leaf certificate was not issued to the requested public key")}
	}
	notBefore, notAfter, refresh := field.NewPath("status", "notBefore"), field.NewPath("status", "notAfter"), field.NewPath("status", "beginRefreshAt")
	if st.NotBefore == nil {
		errs = append(errs, field.Required(notBefore, "must be present and consistent with the issued certificate"))
	}
	if st.NotAfter == nil {
		errs = append(errs, field.Required(notAfter, "must be present and consistent with the issued certificate"))
	}
	if st.BeginRefreshAt == nil {
		errs = append(errs, field.Required(refresh, "must be present and in the range [notbefore+10min, notafter-10min]"))
	}
	if len(errs) > 0 {
		return errs
	}
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	switch {
	case !st.NotBefore.Time.Equal(leaf.NotBefore):
		return field.ErrorList{field.Invalid(notBefore, st.NotBefore.Time, "must be set to the NotBefore time encoded in the leaf certificate")}
	case st.NotBefore.Time.Before(now.Add(-5*time.Minute)) || st.NotBefore.Time.After(now.Add(5*time.Minute)):
		return field.ErrorList{field.Invalid(notBefore, st.NotBefore.Time, "must be set to within 5 minutes of kube-apiserver's current time")}
	case !st.NotAfter.Time.Equal(leaf.NotAfter):
		return field.ErrorList{field.Invalid(notAfter, st.NotAfter.Time, "must be set to the NotAfter time encoded in the leaf certificate")}
	case lifetime < time.Hour:
		return field.ErrorList{field.Invalid(chainPath, lifetime, "leaf certificate lifetime must be >= 1 hour")}
	case r.Spec.MaxExpirationSeconds != nil && lifetime > time.Duration(*r.Spec.MaxExpirationSeconds)*time.Second:
		return field.ErrorList{field.Invalid(chainPath, lifetime, fmt.Sprintf("leaf certificate lifetime must be <= spec.maxExpirationSeconds (%v)", *r.Spec.MaxExpirationSeconds))}
	case st.BeginRefreshAt.Time.Before(st.NotBefore.Time.Add(10 * time.Minute)):
		return field.ErrorList{field.Invalid(refresh, st.BeginRefreshAt.Time, "must be at least 10 minutes after status.notBefore")}
	case st.BeginRefreshAt.Time.After(st.NotAfter.Time.Add(-10 * time.Minute)):
		return field.ErrorList{field.Invalid(refresh, st.BeginRefreshAt.Time, "must be at least 10 minutes before status.notAfter")}
	}
	// The rest of the chain cannot be verified without its root; each must at least be a
	// certificate.
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return nil
		}
		if block.Type != "CERTIFICATE" {
			return field.ErrorList{field.Invalid(chainPath, field.OmitValueType{}, "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")}
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return field.ErrorList{field.Invalid(chainPath, field.OmitValueType{}, "intermediate certificate does not parse as valid X.509")}
		}
	}
}

// validatePodCertificateProjection follows Kubernetes' validation of a projected
// podCertificate source: a qualified signer, a supported key type, a lifetime within the
// signer's bounds, at least one of the file paths, each a relative path used only once in
// the volume.
func validatePodCertificateProjection(src *corev1.PodCertificateProjection, p, volPath *field.Path, paths sets.Set[string]) field.ErrorList {
	errs := validateSignerName(p.Child("signerName"), src.SignerName)
	if src.UserAnnotations != nil {
		errs = append(errs, validateUserAnnotations(p.Child("userAnnotations"), src.UserAnnotations)...)
	}
	if src.User != nil {
		for _, msg := range validation.IsValidUserID(*src.User) {
			errs = append(errs, field.Invalid(p.Child("user"), *src.User, msg))
		}
	}
	if !slices.Contains(podCertificateKeyTypes, src.KeyType) {
		errs = append(errs, field.NotSupported(p.Child("keyType"), src.KeyType, podCertificateKeyTypes))
	}
	if m := src.MaxExpirationSeconds; m != nil {
		if *m < minMaxExpirationSeconds {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *m, fmt.Sprintf("if provided, maxExpirationSeconds must be >= %d", minMaxExpirationSeconds)))
		}
		upper := int32(maxMaxExpirationSeconds)
		if isKubernetesSigner(src.SignerName) {
			upper = kubernetesMaxMaxExpirationSeconds
		}
		if *m > upper {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *m, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", upper)))
		}
	}
	set := 0
	for _, f := range []struct{ name, value string }{
		{"credentialBundlePath", src.CredentialBundlePath}, {"keyPath", src.KeyPath}, {"certificateChainPath", src.CertificateChainPath},
	} {
		if f.value == "" {
			continue
		}
		set++
		errs = append(errs, validateProjectedPath(p.Child(f.name), volPath, f.value, paths)...)
	}
	if set == 0 {
		errs = append(errs, field.Required(p, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath"))
	}
	return errs
}

// validateProjectedPath requires a relative path without ".." elements, not starting
// with "..", and not already used by another file of the same projected volume.
func validateProjectedPath(p, volPath *field.Path, target string, paths sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(target) {
		errs = append(errs, field.Invalid(p, target, "must be a relative path"))
	}
	if slices.Contains(strings.Split(filepath.ToSlash(target), "/"), "..") {
		errs = append(errs, field.Invalid(p, target, "must not contain '..'"))
	} else if strings.HasPrefix(target, "..") {
		errs = append(errs, field.Invalid(p, target, "must not start with '..'"))
	}
	if paths.Has(target) {
		errs = append(errs, field.Invalid(volPath, target, "conflicting duplicate paths"))
	}
	paths.Insert(target)
	return errs
}

// validateProjectedVolumes checks the podCertificate sources of a pod spec's projected
// volumes (the other sources are not validated by wasmplane).
func validateProjectedVolumes(volumes []corev1.Volume, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, v := range volumes {
		if v.Projected == nil {
			continue
		}
		paths := sets.New[string]()
		vp := p.Index(i).Child("projected")
		for j, src := range v.Projected.Sources {
			if src.PodCertificate != nil {
				errs = append(errs, validatePodCertificateProjection(src.PodCertificate, vp.Child("sources").Index(j).Child("podCertificate"), vp, paths)...)
			}
		}
	}
	return errs
}
