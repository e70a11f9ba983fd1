package apply

import (
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
// object; anything else is a 400 as in Kubernetes.
func DecodePatch(body []byte) (*unstructured.Unstructured, error) {
	obj := map[string]any{}
	if err := yaml.Unmarshal(body, &obj); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// StrictCheck decodes an apply patch strictly (duplicate fields), for
// fieldValidation=Strict|Warn; nil when it is clean.
func StrictCheck(body []byte) error {
	return yaml.UnmarshalStrict(body, &map[string]any{})
}
