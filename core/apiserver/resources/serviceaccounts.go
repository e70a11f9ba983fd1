package resources

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/authn"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TokenIssuer signs ServiceAccount tokens (authn.TokenSigner).
type TokenIssuer interface {
	Issue(r authn.TokenRequest) (string, time.Time, error)
}

// Lookup reads one stored object by group resource, namespace and name.
type Lookup func(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)

// TokenRequestConfig configures serviceaccounts/token.
type TokenRequestConfig struct {
	Issuer TokenIssuer
	Lookup Lookup
	// APIAudiences are the default audiences of a requested token.
	APIAudiences []string
	// MaxExpiration caps expirationSeconds (0 = no cap beyond Kubernetes' 2^32 s).
	MaxExpiration time.Duration
}

// Kubernetes' bounds on TokenRequest.spec.expirationSeconds.
const (
	minTokenExpiration     = 10 * time.Minute
	defaultTokenExpiration = time.Hour
)

// AddTokenRequest gives the serviceaccounts resource in defs its token subresource.
func AddTokenRequest(defs []Definition, cfg TokenRequestConfig) {
	appendSubresource(defs, corev1.Resource("serviceaccounts"), func(s *endpoints.Scope) endpoints.Subresource {
		return endpoints.Subresource{Name: "token", Kind: authenticationv1.SchemeGroupVersion.WithKind("TokenRequest"),
			Handlers: map[string]endpoints.HandlerFunc{http.MethodPost: tokenRequestHandler(s, cfg)}}
	})
}

// appendSubresource adds the subresource sub builds to the resource gr of defs, after
// the ones it already has.
func appendSubresource(defs []Definition, gr schema.GroupResource, sub func(s *endpoints.Scope) endpoints.Subresource) {
	for i := range defs {
		if defs[i].Resource.Name != gr.Resource || defs[i].Resource.GroupVersion.Group != gr.Group {
			continue
		}
		prev := defs[i].Subresources
		defs[i].Subresources = func(s *endpoints.Scope) []endpoints.Subresource {
			var subs []endpoints.Subresource
			if prev != nil {
				subs = prev(s)
			}
			return append(subs, sub(s))
		}
	}
}

func tokenRequestHandler(s *endpoints.Scope, cfg TokenRequestConfig) endpoints.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		s.Custom(w, req, http.StatusCreated, func(ctx context.Context, body func(into runtime.Object) error) (runtime.Object, error) {
			tr := &authenticationv1.TokenRequest{}
			if err := body(tr); err != nil {
				return nil, err
			}
			gk := authenticationv1.SchemeGroupVersion.WithKind("TokenRequest").GroupKind()
			if errs := validateTokenRequest(tr, cfg.MaxExpiration); len(errs) > 0 {
				return nil, apierrors.NewInvalid(gk, r.Name, errs)
			}
			obj, err := cfg.Lookup(ctx, corev1.Resource("serviceaccounts"), r.Namespace, r.Name)
			if err != nil {
				return nil, err
			}
			sa := obj.(*corev1.ServiceAccount)
			if sa.DeletionTimestamp != nil {
				return nil, apierrors.NewConflict(corev1.Resource("serviceaccounts"), r.Name, fmt.Errorf("service account is being deleted"))
			}
			in := authn.TokenRequest{ServiceAccount: sa, Audiences: tr.Spec.Audiences, Expiration: time.Duration(*tr.Spec.ExpirationSeconds) * time.Second}
			if len(in.Audiences) == 0 {
				in.Audiences = cfg.APIAudiences
			}
			if b := tr.Spec.BoundObjectRef; b != nil {
				bound, node, err := boundObject(ctx, cfg.Lookup, r.Namespace, b)
				if err != nil {
					return nil, err
				}
				in.Bound, in.NodeName = bound, node
			}
			token, exp, err := cfg.Issuer.Issue(in)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			out := tr.DeepCopy()
			out.Name, out.Namespace = r.Name, r.Namespace
			out.CreationTimestamp = metav1.Now()
			out.Spec.Audiences = in.Audiences
			out.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(exp)}
			return out, nil
		})
	}
}

func validateTokenRequest(tr *authenticationv1.TokenRequest, maxExp time.Duration) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "expirationSeconds")
	if tr.Spec.ExpirationSeconds == nil {
		s := int64(defaultTokenExpiration / time.Second)
		tr.Spec.ExpirationSeconds = &s
	}
	exp := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	switch {
	case exp < minTokenExpiration:
		errs = append(errs, field.Invalid(p, *tr.Spec.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
	case *tr.Spec.ExpirationSeconds > 1<<32:
		errs = append(errs, field.TooLong(p, *tr.Spec.ExpirationSeconds, 1<<32))
	case maxExp > 0 && exp > maxExp:
		s := int64(maxExp / time.Second)
		tr.Spec.ExpirationSeconds = &s
	}
	if b := tr.Spec.BoundObjectRef; b != nil {
		bp := field.NewPath("spec", "boundObjectRef")
		if b.Kind != "Pod" && b.Kind != "Secret" {
			errs = append(errs, field.NotSupported(bp.Child("kind"), b.Kind, []string{"Pod", "Secret"}))
		}
		if b.Name == "" {
			errs = append(errs, field.Required(bp.Child("name"), ""))
		}
	}
	return errs
}

// boundObject checks the object a token is to be bound to exists (and has the UID the
// caller expects) and returns it, with the pod's node for pods.
func boundObject(ctx context.Context, lookup Lookup, ns string, b *authenticationv1.BoundObjectReference) (*authn.BoundObject, string, error) {
	gr := corev1.Resource("secrets")
	if b.Kind == "Pod" {
		gr = corev1.Resource("pods")
	}
	obj, err := lookup(ctx, gr, ns, b.Name)
	if err != nil {
		return nil, "", err
	}
	m := obj.(metav1.Object)
	if b.UID != "" && b.UID != m.GetUID() {
		return nil, "", apierrors.NewConflict(gr, b.Name, fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record (%s); the object might have been deleted and then recreated", b.UID, m.GetUID()))
	}
	node := ""
	if p, ok := obj.(*corev1.Pod); ok {
		node = p.Spec.NodeName
	}
	return &authn.BoundObject{Kind: b.Kind, Name: b.Name, UID: m.GetUID()}, node, nil
}
