package resources

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"github.com/wasmplane/wasmplane/core/apiserver/apply"
	"net/http"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"slices"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// csrUsages are the key usages a CertificateSigningRequest may ask for (Kubernetes'
// certificates.k8s.io/v1 KeyUsage values).
var csrUsages = []string{
	"signing", "digital signature", "content commitment", "key encipherment", "key agreement",
	"data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
	"server auth", "client auth", "code signing", "email protection", "s/mime",
	"ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
	"microsoft sgc", "netscape sgc",
}

// Certificates returns the certificates.k8s.io/v1 resources: CertificateSigningRequests
// with their status (written by signers) and approval (written by approvers) subresources,
// ClusterTrustBundles (whose signers' bundles a writes only with "attest" on the signer
// when a is set), and PodCertificateRequests with their status subresource.
func Certificates(a authz.Authorizer) []Definition {
	gv := certificatesv1.SchemeGroupVersion
	return []Definition{{
		Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "certificatesigningrequests", SingularName: "certificatesigningrequest",
			Kind: "CertificateSigningRequest", ListKind: "CertificateSigningRequestList", ShortNames: []string{"csr"},
			NewFunc:     func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
			NewListFunc: func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
			Strategy:    csrStrategy{}, StatusStrategy: csrStatusStrategy{},
			ResetFields: map[string][]fieldpath.Path{
				apply.Main:   {fieldpath.MakePathOrDie("status")},
				apply.Status: {fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("status", "conditions")},
				"approval":   {fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("status", "certificate")},
			},
			GetAttrs: func(obj runtime.Object) (labels.Set, fields.Set, error) {
				c := obj.(*certificatesv1.CertificateSigningRequest)
				return labels.Set(c.Labels), fields.Set{"metadata.name": c.Name, "spec.signerName": c.Spec.SignerName}, nil
			},
			FieldLabels: []string{"spec.signerName"},
			Printer:     csrPrinter(),
		},
		Subresources: func(s *endpoints.Scope) []endpoints.Subresource {
			approval := csrApprovalStrategy{}
			return []endpoints.Subresource{
				endpoints.StatusSubresource(s, csrStatusStrategy{}),
				{Name: "approval", Handlers: map[string]endpoints.HandlerFunc{
					http.MethodGet: s.Get,
					http.MethodPut: func(w http.ResponseWriter, req *http.Request, r endpoints.Request) { s.Update(w, req, r, approval) },
					http.MethodPatch: func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
						s.Patch(w, req, r, approval)
					},
				}},
			}
		},
	}, clusterTrustBundles(a), podCertificateRequests()}
}

// csrPrinter renders `kubectl get csr` as Kubernetes does.
func csrPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{endpoints.NameColumn, endpoints.AgeColumn,
			{Name: "SignerName", Type: "string", Description: certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["signerName"]},
			{Name: "Requestor", Type: "string", Description: "Name of the user that requested the certificate"},
			{Name: "RequestedDuration", Type: "string", Description: certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["expirationSeconds"]},
			{Name: "Condition", Type: "string", Description: certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]}},
		Row: func(obj runtime.Object) []any {
			c := obj.(*certificatesv1.CertificateSigningRequest)
			requested := "<none>"
			if c.Spec.ExpirationSeconds != nil {
				requested = duration.HumanDuration(time.Duration(*c.Spec.ExpirationSeconds) * time.Second)
			}
			return []any{c.Name, endpoints.Age(c.CreationTimestamp, time.Now()), c.Spec.SignerName, c.Spec.Username, requested, csrCondition(c)}
		},
	}
}

// csrCondition is the Condition column: Pending, or the conditions joined, plus Issued.
func csrCondition(c *certificatesv1.CertificateSigningRequest) string {
	var parts []string
	for _, cond := range c.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			if cond.Status == "" || cond.Status == corev1.ConditionTrue {
				parts = append(parts, string(cond.Type))
			}
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "Pending")
	}
	if len(c.Status.Certificate) > 0 {
		parts = append(parts, "Issued")
	}
	return strings.Join(parts, ",")
}

// csrStrategy is the main resource: the requester's identity is recorded on create (a
// client cannot choose it), and spec and status never change through it.
type csrStrategy struct{}

// Default is a no-op: usages and signer are required, not defaulted, in v1.
func (csrStrategy) Default(runtime.Object) {}

// PrepareForCreate records who asked, as Kubernetes' csrStrategy does, and clears status.
func (csrStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	c := obj.(*certificatesv1.CertificateSigningRequest)
	c.Spec.Username, c.Spec.UID, c.Spec.Groups, c.Spec.Extra = "", "", nil, nil
	if u, ok := authn.UserFrom(ctx); ok && u != nil {
		c.Spec.Username, c.Spec.UID = u.Name, u.UID
		c.Spec.Groups = slices.Clone(u.Groups)
		if len(u.Extra) > 0 {
			c.Spec.Extra = map[string]certificatesv1.ExtraValue{}
			for k, v := range u.Extra {
				c.Spec.Extra[k] = slices.Clone(v)
			}
		}
	}
	c.Status = certificatesv1.CertificateSigningRequestStatus{}
}

// PrepareForUpdate keeps spec (immutable) and status (written through the subresources).
func (csrStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	c.Spec = o.Spec
	c.Status = o.Status
}

// Validate checks a new request.
func (csrStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return ValidateCSRSpec(&obj.(*certificatesv1.CertificateSigningRequest).Spec)
}

// ValidateUpdate has nothing to check: PrepareForUpdate restored spec and status.
func (csrStrategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}

// ValidateCSRSpec is Kubernetes' validation of a CertificateSigningRequest's spec: a
// PEM-encoded, correctly self-signed PKCS#10 request, a qualified signerName, known and
// unique usages, and an expirationSeconds of at least ten minutes.
func ValidateCSRSpec(spec *certificatesv1.CertificateSigningRequestSpec) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec")
	if _, err := ParseCSR(spec.Request); err != nil {
		errs = append(errs, field.Invalid(p.Child("request"), "", err.Error()))
	}
	errs = append(errs, validateSignerName(p.Child("signerName"), spec.SignerName)...)
	if len(spec.Usages) == 0 {
		errs = append(errs, field.Required(p.Child("usages"), "usages must be provided"))
	}
	seen := map[certificatesv1.KeyUsage]bool{}
	for i, u := range spec.Usages {
		switch {
		case !slices.Contains(csrUsages, string(u)):
			errs = append(errs, field.NotSupported(p.Child("usages").Index(i), u, csrUsages))
		case seen[u]:
			errs = append(errs, field.Duplicate(p.Child("usages").Index(i), u))
		}
		seen[u] = true
	}
	if spec.ExpirationSeconds != nil && *spec.ExpirationSeconds < 600 {
		errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *spec.ExpirationSeconds, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	return errs
}

// validateSignerName requires "<domain>/<path>", with a DNS-subdomain domain, as Kubernetes.
func validateSignerName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	domain, rest, ok := strings.Cut(name, "/")
	if !ok || rest == "" {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(domain) {
		errs = append(errs, field.Invalid(p, name, "the domain part: "+msg))
	}
	if len(name) > 571 {
		errs = append(errs, field.TooLong(p, "", 571))
	}
	return errs
}

// ParseCSR decodes a PEM "CERTIFICATE REQUEST" and verifies its self-signature.
func ParseCSR(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("PEM block type must be CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the certificate request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("the certificate request's signature: %w", err)
	}
	return req, nil
}

// csrStatusStrategy serves /status, where a signer writes the certificate and its own
// conditions (Failed); approval conditions only change through /approval.
type csrStatusStrategy struct{}

// Default is a no-op.
func (csrStatusStrategy) Default(runtime.Object) {}

// PrepareForCreate is not used: subresources only update.
func (csrStatusStrategy) PrepareForCreate(context.Context, runtime.Object) {}

// PrepareForUpdate keeps the spec and the Approved/Denied conditions of old; the
// metadata, the certificate and the other conditions are the write's.
func (csrStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	status, meta := c.Status, c.ObjectMeta
	*c = *o.DeepCopy()
	c.ObjectMeta = meta
	c.Status.Certificate = status.Certificate
	c.Status.Conditions = statusConditions(o.Status.Conditions, status.Conditions)
}

// Validate is not used on create.
func (csrStatusStrategy) Validate(context.Context, runtime.Object) field.ErrorList { return nil }

// ValidateUpdate lets a certificate be set only on an approved request, once, as a PEM
// certificate chain.
func (csrStatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	p := field.NewPath("status", "certificate")
	errs := validateConditions(c.Status.Conditions)
	if len(o.Status.Certificate) > 0 && string(o.Status.Certificate) != string(c.Status.Certificate) {
		return append(errs, field.Invalid(p, "", "updates may not modify existing certificate content"))
	}
	if len(c.Status.Certificate) == 0 || len(o.Status.Certificate) > 0 {
		return errs
	}
	if !hasCondition(c.Status.Conditions, certificatesv1.CertificateApproved) {
		errs = append(errs, field.Forbidden(p, "certificate can only be set if the Approved condition is present"))
	}
	if hasCondition(c.Status.Conditions, certificatesv1.CertificateFailed) {
		errs = append(errs, field.Forbidden(p, "certificate cannot be set if the Failed condition is present"))
	}
	rest, n := c.Status.Certificate, 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			errs = append(errs, field.Invalid(p, "", "only CERTIFICATE PEM blocks are allowed, found "+block.Type))
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			errs = append(errs, field.Invalid(p, "", err.Error()))
			break
		}
		n++
	}
	if n == 0 {
		errs = append(errs, field.Invalid(p, "", "must contain at least one CERTIFICATE PEM block"))
	}
	return errs
}

// csrApprovalStrategy serves /approval, where only the Approved and Denied conditions
// change.
type csrApprovalStrategy struct{}

// Default is a no-op.
func (csrApprovalStrategy) Default(runtime.Object) {}

// PrepareForCreate is not used: subresources only update.
func (csrApprovalStrategy) PrepareForCreate(context.Context, runtime.Object) {}

// PrepareForUpdate keeps the spec and the status of old but its conditions, which are the
// write's, as its metadata is (Kubernetes' approval strategy; ValidateUpdate keeps a
// decision from being taken back).
func (csrApprovalStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	conds, meta := c.Status.Conditions, c.ObjectMeta
	*c = *o.DeepCopy()
	c.ObjectMeta = meta
	c.Status.Conditions = stampConditions(o.Status.Conditions, conds)
}

// Validate is not used on create.
func (csrApprovalStrategy) Validate(context.Context, runtime.Object) field.ErrorList { return nil }

// ValidateUpdate forbids approving and denying at once, and taking a decision back.
func (csrApprovalStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	errs := validateConditions(c.Status.Conditions)
	p := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
		if hasCondition(o.Status.Conditions, t) && !hasCondition(c.Status.Conditions, t) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	return errs
}

// statusConditions are the conditions of a /status write: the decisions (Approved,
// Denied) of old, which only /approval writes, and the other conditions of next.
func statusConditions(old, next []certificatesv1.CertificateSigningRequestCondition) []certificatesv1.CertificateSigningRequestCondition {
	isDecision := func(t certificatesv1.RequestConditionType) bool {
		return t == certificatesv1.CertificateApproved || t == certificatesv1.CertificateDenied
	}
	var out, taken []certificatesv1.CertificateSigningRequestCondition
	for _, c := range old {
		if isDecision(c.Type) {
			out = append(out, c)
		}
	}
	for _, c := range next {
		if !isDecision(c.Type) {
			taken = append(taken, c)
		}
	}
	return append(out, stampConditions(old, taken)...)
}

// stampConditions defaults the conditions of a write as Kubernetes does: status True,
// the update time now, the transition time that of the same condition in old (same type
// and status) or now.
func stampConditions(old, next []certificatesv1.CertificateSigningRequestCondition) []certificatesv1.CertificateSigningRequestCondition {
	now := metav1.Now()
	out := make([]certificatesv1.CertificateSigningRequestCondition, 0, len(next))
	for _, c := range next {
		if c.Status == "" {
			c.Status = corev1.ConditionTrue
		}
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = now
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
			for _, o := range old {
				if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
					c.LastTransitionTime = o.LastTransitionTime
					break
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// validateConditions is Kubernetes' condition check: known types at most once, not both
// Approved and Denied, and a True/False/Unknown status.
func validateConditions(conds []certificatesv1.CertificateSigningRequestCondition) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("status", "conditions")
	seen := map[certificatesv1.RequestConditionType]bool{}
	for i, c := range conds {
		if c.Type == "" {
			errs = append(errs, field.Required(p.Index(i).Child("type"), ""))
		}
		if seen[c.Type] {
			errs = append(errs, field.Duplicate(p.Index(i).Child("type"), c.Type))
		}
		seen[c.Type] = true
		switch c.Status {
		case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
		default:
			errs = append(errs, field.NotSupported(p.Index(i).Child("status"), c.Status, []string{"True", "False", "Unknown"}))
		}
	}
	if hasCondition(conds, certificatesv1.CertificateApproved) && hasCondition(conds, certificatesv1.CertificateDenied) {
		errs = append(errs, field.Invalid(p, certificatesv1.CertificateDenied, "Approved and Denied conditions are mutually exclusive"))
	}
	return errs
}

// hasCondition reports whether a condition of type t is True.
func hasCondition(conds []certificatesv1.CertificateSigningRequestCondition, t certificatesv1.RequestConditionType) bool {
	for _, c := range conds {
		if c.Type == t && (c.Status == corev1.ConditionTrue || c.Status == "") {
			return true
		}
	}
	return false
}
