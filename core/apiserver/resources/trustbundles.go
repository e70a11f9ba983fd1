package resources

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxTrustBundleSize bounds a ClusterTrustBundle's PEM data, as Kubernetes does (1 MiB):
// every kubelet that projects the bundle keeps a copy.
const maxTrustBundleSize = 1 << 20

// clusterTrustBundles is certificates.k8s.io/v1 ClusterTrustBundle: cluster-scoped sets of
// trust anchors, optionally tied to a signer, whose name then carries the signer's. With
// an authorizer, a write of a signer's bundle needs "attest" on that signer (Kubernetes'
// ClusterTrustBundleAttest admission).
func clusterTrustBundles(a authz.Authorizer) Definition {
	d := stored(certificatesv1.SchemeGroupVersion, "clustertrustbundles", "ClusterTrustBundle", nil, false, false,
		func() runtime.Object { return &certificatesv1.ClusterTrustBundle{} },
		func() runtime.Object { return &certificatesv1.ClusterTrustBundleList{} },
		&strategy{
			validate: func(obj runtime.Object) field.ErrorList {
				return validateClusterTrustBundle(obj.(*certificatesv1.ClusterTrustBundle), true)
			},
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				b, o := obj.(*certificatesv1.ClusterTrustBundle), old.(*certificatesv1.ClusterTrustBundle)
				// An unchanged bundle is not parsed again, so that a newer parser's stricter
				// reading never blocks a label change to an object stored long ago.
				errs := validateClusterTrustBundle(b, b.Spec.TrustBundle != o.Spec.TrustBundle)
				return append(errs, apimachineryvalidation.ValidateImmutableField(b.Spec.SignerName, o.Spec.SignerName, field.NewPath("spec", "signerName"))...)
			},
		},
		// The name's rules depend on spec.signerName, so the store only checks that it is a
		// path segment ("example.com:signer:x" holds colons); Validate checks the rest.
		nameIs(func(p *field.Path, name string) field.ErrorList {
			var errs field.ErrorList
			for _, msg := range path.IsValidPathSegmentName(name) {
				errs = append(errs, field.Invalid(p, name, msg))
			}
			return errs
		}),
		func(r *registry.Resource) {
			r.FieldLabels = []string{"spec.signerName"}
			r.GetAttrs = func(obj runtime.Object) (labels.Set, fields.Set, error) {
				b := obj.(*certificatesv1.ClusterTrustBundle)
				return labels.Set(b.Labels), fields.Set{"metadata.name": b.Name, "spec.signerName": b.Spec.SignerName}, nil
			}
			r.Printer = &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn,
					{Name: "SignerName", Type: "string", Description: certificatesv1.ClusterTrustBundleSpec{}.SwaggerDoc()["signerName"]},
					endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					b := obj.(*certificatesv1.ClusterTrustBundle)
					return []any{b.Name, b.Spec.SignerName, endpoints.Age(b.CreationTimestamp, time.Now())}
				},
			}
		})
	if a != nil {
		d.Resource.CheckWrite = func(ctx context.Context, obj, old runtime.Object) error {
			return checkAttest(ctx, a, obj.(*certificatesv1.ClusterTrustBundle), old)
		}
	}
	return d
}

// checkAttest lets a user write a signer's trust bundle only with the "attest" verb on
// certificates.k8s.io signers, named for the signer or for all of its domain
// ("example.com/*"). A bundle without a signer, and an update that changes nothing but
// what the garbage collector and field managers write, need no permission.
func checkAttest(ctx context.Context, a authz.Authorizer, b *certificatesv1.ClusterTrustBundle, old runtime.Object) error {
	if b.Spec.SignerName == "" {
		return nil
	}
	if o, ok := old.(*certificatesv1.ClusterTrustBundle); ok && o != nil {
		cp := b.DeepCopy()
		cp.OwnerReferences, cp.Finalizers, cp.ManagedFields, cp.ResourceVersion = o.OwnerReferences, o.Finalizers, o.ManagedFields, o.ResourceVersion
		if apiequality.Semantic.DeepEqual(cp, o) {
			return nil
		}
	}
	u, _ := authn.UserFrom(ctx)
	domain, _, _ := strings.Cut(b.Spec.SignerName, "/")
	for _, name := range []string{b.Spec.SignerName, domain + "/*"} {
		d, _, err := a.Authorize(ctx, authz.Attributes{User: u, Verb: "attest", ResourceRequest: true,
			APIGroup: certificatesv1.GroupName, APIVersion: "*", Resource: "signers", Name: name})
		if err == nil && d == authz.DecisionAllow {
			return nil
		}
	}
	return apierrors.NewForbidden(certificatesv1.Resource("clustertrustbundles"), b.Name,
		fmt.Errorf("user not permitted to attest for signerName %q", b.Spec.SignerName))
}

// validateClusterTrustBundle follows Kubernetes' ValidateClusterTrustBundle: the name
// carries the signer name (slashes as colons) as a prefix when there is one, and no colon
// when there is none; the signer name is qualified; the bundle (when parse is set) is one
// or more distinct PEM CA certificates without headers.
func validateClusterTrustBundle(b *certificatesv1.ClusterTrustBundle, parse bool) field.ErrorList {
	var errs field.ErrorList
	namePath := field.NewPath("metadata", "name")
	if b.Spec.SignerName == "" {
		if strings.Contains(b.Name, ":") {
			errs = append(errs, field.Invalid(namePath, b.Name, `ClusterTrustBundle without signer name must not have ":" in its name`))
		} else {
			errs = append(errs, dnsSubdomain(namePath, b.Name)...)
		}
	} else {
		errs = append(errs, validateSignerName(field.NewPath("spec", "signerName"), b.Spec.SignerName)...)
		prefix := strings.ReplaceAll(b.Spec.SignerName, "/", ":") + ":"
		if !strings.HasPrefix(b.Name, prefix) {
			errs = append(errs, field.Invalid(namePath, b.Name, fmt.Sprintf("ClusterTrustBundle for signerName %s must be named with prefix %s", b.Spec.SignerName, prefix)))
		} else {
			errs = append(errs, dnsSubdomain(namePath, strings.TrimPrefix(b.Name, prefix))...)
		}
	}
	if parse {
		errs = append(errs, validateTrustBundle(field.NewPath("spec", "trustBundle"), b.Spec.TrustBundle)...)
	}
	return errs
}

// validateTrustBundle accepts only headerless PEM CERTIFICATE blocks of CA certificates,
// at least one, each at most once.
func validateTrustBundle(p *field.Path, bundle string) field.ErrorList {
	if len(bundle) > maxTrustBundleSize {
		return field.ErrorList{field.TooLong(p, "", maxTrustBundleSize)}
	}
	const omitted = "<value omitted>"
	var errs field.ErrorList
	var seen [][]byte
	var dups []string
	rest := []byte(bundle)
	for i := 0; ; i++ {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			errs = append(errs, field.Invalid(p, omitted, fmt.Sprintf("entry %d has bad block type: %v", i, block.Type)))
			continue
		}
		if len(block.Headers) != 0 {
			errs = append(errs, field.Invalid(p, omitted, fmt.Sprintf("entry %d has PEM block headers", i)))
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p, omitted, fmt.Sprintf("entry %d does not parse as X.509", i)))
			continue
		case !cert.IsCA:
			errs = append(errs, field.Invalid(p, omitted, fmt.Sprintf("entry %d does not have the CA bit set", i)))
			continue
		case !cert.BasicConstraintsValid:
			errs = append(errs, field.Invalid(p, omitted, fmt.Sprintf("entry %d has invalid basic constraints", i)))
			continue
		}
		if j := slices.IndexFunc(seen, func(b []byte) bool { return string(b) == string(block.Bytes) }); j >= 0 {
			dups = append(dups, fmt.Sprintf("duplicate trust anchor (indices [%d %d])", j, i))
		}
		seen = append(seen, block.Bytes)
	}
	// A malformed block already says what is wrong; duplicates and emptiness come after.
	if len(errs) > 0 {
		return errs
	}
	if len(seen) == 0 {
		return field.ErrorList{field.Invalid(p, omitted, "at least one trust anchor must be provided")}
	}
	for _, d := range dups {
		errs = append(errs, field.Invalid(p, omitted, d))
	}
	return errs
}
