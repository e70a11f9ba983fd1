package resources

import (
	"context"
	"net/http"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/authn"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TokenReviewer authenticates a bearer token for TokenReview; audiences, when set,
// replace the server's API audiences.
type TokenReviewer func(ctx context.Context, token string, audiences []string) (u *authn.User, auds []string, ok bool, err error)

// Authentication returns authentication.k8s.io/v1: SelfSubjectReview (`kubectl auth
// whoami`) and TokenReview. Both are create-only and never stored.
func Authentication(review TokenReviewer) []Definition {
	gv := authenticationv1.SchemeGroupVersion
	defs := []Definition{
		{Resource: &registry.Resource{AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "selfsubjectreviews", SingularName: "selfsubjectreview", Kind: "SelfSubjectReview",
			ListKind: "SelfSubjectReviewList", Verbs: []string{"create"}, NoTable: true, NewFunc: func() runtime.Object { return &authenticationv1.SelfSubjectReview{} },
			NewListFunc: func() runtime.Object { return &metav1.List{} }, Strategy: &strategy{}},
			CreateHandler: func(s *endpoints.Scope) endpoints.HandlerFunc {
				return func(w http.ResponseWriter, req *http.Request, _ endpoints.Request) {
					s.Custom(w, req, http.StatusCreated, func(ctx context.Context, body func(into runtime.Object) error) (runtime.Object, error) {
						in := &authenticationv1.SelfSubjectReview{}
						if err := body(in); err != nil {
							return nil, err
						}
						u, ok := authn.UserFrom(ctx)
						if !ok {
							return nil, apierrors.NewInternalError(errNoUser)
						}
						in.CreationTimestamp = metav1.Now()
						in.Status.UserInfo = userInfo(u)
						return in, nil
					})
				}
			}},
	}
	if review == nil {
		// TokenReview is served only with a token authenticator to review against.
		return defs
	}
	return append(defs, Definition{Resource: &registry.Resource{AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "tokenreviews", SingularName: "tokenreview", Kind: "TokenReview",
		ListKind: "TokenReviewList", Verbs: []string{"create"}, NoTable: true, NewFunc: func() runtime.Object { return &authenticationv1.TokenReview{} },
		NewListFunc: func() runtime.Object { return &metav1.List{} }, Strategy: &strategy{}},
		CreateHandler: func(s *endpoints.Scope) endpoints.HandlerFunc {
			return func(w http.ResponseWriter, req *http.Request, _ endpoints.Request) {
				s.Custom(w, req, http.StatusCreated, func(ctx context.Context, body func(into runtime.Object) error) (runtime.Object, error) {
					in := &authenticationv1.TokenReview{}
					if err := body(in); err != nil {
						return nil, err
					}
					if in.Spec.Token == "" {
						return nil, apierrors.NewBadRequest("token is required")
					}
					u, auds, ok, err := review(ctx, in.Spec.Token, in.Spec.Audiences)
					in.CreationTimestamp = metav1.Now()
					in.Spec.Token = "" // never echo a credential
					in.Status = authenticationv1.TokenReviewStatus{Authenticated: ok && err == nil}
					if err != nil {
						// Kubernetes answers a generic message; the reason is logged by the chain.
						in.Status.Error = "[invalid bearer token, token lookup failed]"
					}
					if in.Status.Authenticated {
						in.Status.User = userInfo(u)
						in.Status.Audiences = auds
					}
					return in, nil
				})
			}
		}})
}

type constErr string

func (e constErr) Error() string { return string(e) }

const errNoUser = constErr("no user in the request context")

func userInfo(u *authn.User) authenticationv1.UserInfo {
	ui := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		ui.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range u.Extra {
			ui.Extra[k] = v
		}
	}
	return ui
}
