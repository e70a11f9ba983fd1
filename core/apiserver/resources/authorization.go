package resources

import (
	"context"
	"fmt"
	"net/http"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Authorization returns the authorization.k8s.io/v1 access reviews: SubjectAccessReview,
// SelfSubjectAccessReview, LocalSubjectAccessReview and SelfSubjectRulesReview. They are
// create-only and never stored: a create answers the question with a and r (this is what
// `kubectl auth can-i` and `kubectl auth can-i --list` ask).
func Authorization(a authz.Authorizer, r authz.RuleResolver) []Definition {
	gv := authorizationv1.SchemeGroupVersion
	review := func(name, kind string, namespaced bool, newFn func() runtime.Object, answer func(ctx context.Context, namespace string, obj runtime.Object) error) Definition {
		return Definition{
			Resource: &registry.Resource{
				AllowUnconditionalUpdate: true, GroupVersion: gv, Name: name, SingularName: name[:len(name)-1], Kind: kind, ListKind: kind + "List",
				Namespaced: namespaced, NewFunc: newFn,
				// Nothing is ever stored; an empty generic list satisfies storage set-up.
				NewListFunc: func() runtime.Object { return &metav1.List{} },
				Strategy:    &strategy{}, Verbs: []string{"create"}, NoTable: true,
			},
			CreateHandler: func(s *endpoints.Scope) endpoints.HandlerFunc {
				return func(w http.ResponseWriter, req *http.Request, rq endpoints.Request) {
					s.Custom(w, req, http.StatusCreated, func(ctx context.Context, body func(into runtime.Object) error) (runtime.Object, error) {
						obj := newFn()
						if err := body(obj); err != nil {
							return nil, err
						}
						if err := answer(ctx, rq.Namespace, obj); err != nil {
							return nil, err
						}
						return obj, nil
					})
				}
			},
		}
	}
	invalid := func(kind string, errs field.ErrorList) error {
		return apierrors.NewInvalid(gv.WithKind(kind).GroupKind(), "", errs)
	}
	requestUser := func(ctx context.Context) (*authn.User, error) {
		u, ok := authn.UserFrom(ctx)
		if !ok || u == nil {
			return nil, apierrors.NewBadRequest("no user present on request")
		}
		return u, nil
	}
	return []Definition{
		review("subjectaccessreviews", "SubjectAccessReview", false, func() runtime.Object { return &authorizationv1.SubjectAccessReview{} },
			func(ctx context.Context, _ string, obj runtime.Object) error {
				sar := obj.(*authorizationv1.SubjectAccessReview)
				errs := validateReviewMeta(&sar.ObjectMeta)
				errs = append(errs, validateSARSpec(&sar.Spec, field.NewPath("spec"))...)
				if sar.Spec.User == "" && len(sar.Spec.Groups) == 0 {
					errs = append(errs, field.Invalid(field.NewPath("spec", "user"), sar.Spec.User, "at least one of user or group must be specified"))
				}
				if len(errs) > 0 {
					return invalid("SubjectAccessReview", errs)
				}
				u := &authn.User{Name: sar.Spec.User, UID: sar.Spec.UID, Groups: sar.Spec.Groups, Extra: extraOf(sar.Spec.Extra)}
				sar.Status = decide(ctx, a, attributesOf(u, sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes))
				return nil
			}),
		review("selfsubjectaccessreviews", "SelfSubjectAccessReview", false, func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} },
			func(ctx context.Context, _ string, obj runtime.Object) error {
				ssar := obj.(*authorizationv1.SelfSubjectAccessReview)
				errs := validateReviewMeta(&ssar.ObjectMeta)
				errs = append(errs, validateSARSpec(&authorizationv1.SubjectAccessReviewSpec{
					ResourceAttributes: ssar.Spec.ResourceAttributes, NonResourceAttributes: ssar.Spec.NonResourceAttributes}, field.NewPath("spec"))...)
				if len(errs) > 0 {
					return invalid("SelfSubjectAccessReview", errs)
				}
				u, err := requestUser(ctx)
				if err != nil {
					return err
				}
				ssar.Status = decide(ctx, a, attributesOf(u, ssar.Spec.ResourceAttributes, ssar.Spec.NonResourceAttributes))
				return nil
			}),
		review("localsubjectaccessreviews", "LocalSubjectAccessReview", true, func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} },
			func(ctx context.Context, namespace string, obj runtime.Object) error {
				lsar := obj.(*authorizationv1.LocalSubjectAccessReview)
				if lsar.Namespace == "" {
					lsar.Namespace = namespace
				}
				if lsar.Namespace != namespace {
					return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
				}
				if ra := lsar.Spec.ResourceAttributes; ra != nil && ra.Namespace != namespace {
					return apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", namespace))
				}
				meta := lsar.ObjectMeta
				meta.Namespace = ""
				errs := validateReviewMeta(&meta)
				errs = append(errs, validateSARSpec(&lsar.Spec, field.NewPath("spec"))...)
				if lsar.Spec.NonResourceAttributes != nil {
					errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), lsar.Spec.NonResourceAttributes, "disallowed on this kind of request"))
				}
				if lsar.Spec.User == "" && len(lsar.Spec.Groups) == 0 {
					errs = append(errs, field.Invalid(field.NewPath("spec", "user"), lsar.Spec.User, "at least one of user or group must be specified"))
				}
				if len(errs) > 0 {
					return invalid("LocalSubjectAccessReview", errs)
				}
				u := &authn.User{Name: lsar.Spec.User, UID: lsar.Spec.UID, Groups: lsar.Spec.Groups, Extra: extraOf(lsar.Spec.Extra)}
				lsar.Status = decide(ctx, a, attributesOf(u, lsar.Spec.ResourceAttributes, nil))
				return nil
			}),
		review("selfsubjectrulesreviews", "SelfSubjectRulesReview", false, func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} },
			func(ctx context.Context, _ string, obj runtime.Object) error {
				ssrr := obj.(*authorizationv1.SelfSubjectRulesReview)
				if errs := validateReviewMeta(&ssrr.ObjectMeta); len(errs) > 0 {
					return invalid("SelfSubjectRulesReview", errs)
				}
				u, err := requestUser(ctx)
				if err != nil {
					return err
				}
				ssrr.Status = rulesReview(ctx, r, u, ssrr.Spec.Namespace)
				return nil
			}),
	}
}

// validateReviewMeta is Kubernetes' rule that a review's metadata is empty (managed
// fields aside).
func validateReviewMeta(m *metav1.ObjectMeta) field.ErrorList {
	c := *m
	c.ManagedFields = nil
	if !apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, c) {
		return field.ErrorList{field.Invalid(field.NewPath("metadata"), m, "must be empty")}
	}
	return nil
}

func validateSARSpec(spec *authorizationv1.SubjectAccessReviewSpec, p *field.Path) field.ErrorList {
	switch {
	case spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil:
		return field.ErrorList{field.Required(p.Child("resourceAttributes"), "exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	case spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil:
		return field.ErrorList{field.Invalid(p.Child("nonResourceAttributes"), spec.NonResourceAttributes, `cannot be specified in combination with resourceAttributes`)}
	}
	return nil
}

func extraOf(e map[string]authorizationv1.ExtraValue) map[string][]string {
	if len(e) == 0 {
		return nil
	}
	out := make(map[string][]string, len(e))
	for k, v := range e {
		out[k] = v
	}
	return out
}

func attributesOf(u *authn.User, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authz.Attributes {
	if ra != nil {
		return authz.Attributes{User: u, Verb: ra.Verb, ResourceRequest: true, APIGroup: ra.Group, APIVersion: ra.Version,
			Resource: ra.Resource, Subresource: ra.Subresource, Namespace: ra.Namespace, Name: ra.Name}
	}
	return authz.Attributes{User: u, Verb: nra.Verb, Path: nra.Path}
}

func decide(ctx context.Context, a authz.Authorizer, attrs authz.Attributes) authorizationv1.SubjectAccessReviewStatus {
	d, reason, err := a.Authorize(ctx, attrs)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authz.DecisionAllow, Denied: d == authz.DecisionDeny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}

// rulesReview lists u's rules in namespace; an error while resolving them makes the
// answer incomplete, as in Kubernetes.
func rulesReview(ctx context.Context, r authz.RuleResolver, u *authn.User, namespace string) authorizationv1.SubjectRulesReviewStatus {
	rules, err := r.RulesFor(ctx, u, namespace)
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	if err != nil {
		st.Incomplete = true
		st.EvaluationError = err.Error()
	}
	if _, isNode := authz.NodeName(u); isNode {
		// The node authorizer's grants depend on the objects asked about; they cannot be listed.
		st.Incomplete = true
	}
	for _, rule := range rules {
		st.ResourceRules, st.NonResourceRules = appendRule(st.ResourceRules, st.NonResourceRules, rule)
	}
	return st
}

func appendRule(rr []authorizationv1.ResourceRule, nr []authorizationv1.NonResourceRule, rule rbacv1.PolicyRule) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule) {
	if len(rule.NonResourceURLs) > 0 {
		return rr, append(nr, authorizationv1.NonResourceRule{Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
	}
	return append(rr, authorizationv1.ResourceRule{Verbs: rule.Verbs, APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: rule.ResourceNames}), nr
}
