package apply

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// IsApply reports whether a patch type is a server-side apply. CBOR apply patches are
// not served, as kube-apiserver v1.37 does not serve them by default (the
// CBORServingAndStorage gate is alpha): they get 415 like any unknown patch type.
func IsApply(pt types.PatchType) bool {
	return pt == types.ApplyYAMLPatchType
}

// ManagerName is the manager a write is recorded under: the fieldManager parameter, or
// the User-Agent up to its first "/" as Kubernetes defaults it ("kubectl" for
// "kubectl/v1.37.2 (linux/amd64) …"), without unprintable runes and at most 128 bytes.
func ManagerName(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	prefix, _, _ := strings.Cut(userAgent, "/")
	var b strings.Builder
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ValidatePatchOptions checks a PATCH's options as Kubernetes does (an apply names its
// fieldManager; force is for apply only), answering 422 on PatchOptions.
func ValidatePatchOptions(opts *metav1.PatchOptions, pt types.PatchType) error {
	return invalidOptions("PatchOptions", metav1validation.ValidatePatchOptions(opts, pt))
}

// ValidateFieldManager checks the fieldManager of a create or update (at most 128
// printable characters), answering 422 on kind.
func ValidateFieldManager(kind, fieldManager string) error {
	return invalidOptions(kind, metav1validation.ValidateFieldManager(fieldManager, field.NewPath("fieldManager")))
}

func invalidOptions(kind string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
}

// DecodePatch reads an apply patch (YAML, which includes JSON) into an unstructured
// object; anything else is a 400 as in Kubernetes. With strict, it also returns the
// duplicate fields it found (for fieldValidation=Strict|Warn). JSON, which is what
// client-go and kubectl send, is read in one pass that keeps integers as integers.
func DecodePatch(body []byte, strict bool) (*unstructured.Unstructured, error, error) {
	obj := map[string]any{}
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		strictErrs, err := sigsjson.UnmarshalStrict(body, &obj, sigsjson.DisallowDuplicateFields)
		if err == nil {
			if !strict {
				strictErrs = nil
			}
			return &unstructured.Unstructured{Object: obj}, errors.Join(strictErrs...), nil
		}
		// Not JSON after all: YAML may still read it (a flow mapping).
		obj = map[string]any{}
	}
	if err := yaml.Unmarshal(body, &obj); err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	var strictErr error
	if strict {
		strictErr = yaml.UnmarshalStrict(body, &map[string]any{})
	}
	return &unstructured.Unstructured{Object: obj}, strictErr, nil
}
