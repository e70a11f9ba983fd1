package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"sync"

	"github.com/google/uuid"
	"gopkg.in/go-jose/go-jose.v2"
	"gopkg.in/go-jose/go-jose.v2/jwt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
)

// Extra keys a ServiceAccount token puts on its user, as Kubernetes names them.
const (
	ExtraPodName      = "authentication.kubernetes.io/pod-name"
	ExtraPodUID       = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName     = "authentication.kubernetes.io/node-name"
	ExtraCredentialID = "authentication.kubernetes.io/credential-id"
)

// DefaultIssuer is the issuer of ServiceAccount tokens unless --service-account-issuer
// says otherwise (Kubernetes' conventional value).
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// BoundObject is what a token is bound to besides its ServiceAccount (a pod or a secret);
// the token dies with it.
type BoundObject struct {
	Kind, Name string
	UID        types.UID
}

// TokenRequest describes a ServiceAccount token to issue.
type TokenRequest struct {
	ServiceAccount *corev1.ServiceAccount
	Audiences      []string
	Expiration     time.Duration
	Bound          *BoundObject
	// NodeName is the bound pod's node, recorded for the node authorizer.
	NodeName string
}

type k8sClaims struct {
	Namespace      string           `json:"namespace"`
	ServiceAccount ref              `json:"serviceaccount"`
	Pod            *ref             `json:"pod,omitempty"`
	Secret         *ref             `json:"secret,omitempty"`
	Node           *ref             `json:"node,omitempty"`
	WarnAfter      *jwt.NumericDate `json:"warnafter,omitempty"`
}

type ref struct {
	Name string `json:"name"`
	UID  string `json:"uid,omitempty"`
}

type privateClaims struct {
	Kubernetes k8sClaims `json:"kubernetes.io"`
}

// TokenSigner issues and verifies ServiceAccount JWTs (ES256).
type TokenSigner struct {
	key    *ecdsa.PrivateKey
	issuer string
	kid    string
	signer jose.Signer
	now    func() time.Time
}

// NewTokenSigner builds a signer for key under issuer.
func NewTokenSigner(key *ecdsa.PrivateKey, issuer string) (*TokenSigner, error) {
	if issuer == "" {
		issuer = DefaultIssuer
	}
	der, err := publicKeyID(key)
	if err != nil {
		return nil, err
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: der}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("token signer: %w", err)
	}
	return &TokenSigner{key: key, issuer: issuer, kid: der, signer: s, now: time.Now}, nil
}

func publicKeyID(key *ecdsa.PrivateKey) (string, error) {
	jwk := jose.JSONWebKey{Key: key.Public()}
	b, err := jwk.MarshalJSON()
	if err != nil {
		return "", fmt.Errorf("token signer key id: %w", err)
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// Issuer is the iss claim of the tokens this signer issues.
func (s *TokenSigner) Issuer() string { return s.issuer }

// Issue signs a token for r and returns it with its expiry.
func (s *TokenSigner) Issue(r TokenRequest) (string, time.Time, error) {
	sa := r.ServiceAccount
	now := s.now()
	exp := now.Add(r.Expiration)
	pc := privateClaims{Kubernetes: k8sClaims{Namespace: sa.Namespace, ServiceAccount: ref{Name: sa.Name, UID: string(sa.UID)}}}
	if b := r.Bound; b != nil {
		switch b.Kind {
		case "Pod":
			pc.Kubernetes.Pod = &ref{Name: b.Name, UID: string(b.UID)}
			if r.NodeName != "" {
				pc.Kubernetes.Node = &ref{Name: r.NodeName}
			}
		case "Secret":
			pc.Kubernetes.Secret = &ref{Name: b.Name, UID: string(b.UID)}
		default:
			return "", time.Time{}, fmt.Errorf("cannot bind a token to a %s", b.Kind)
		}
	}
	claims := jwt.Claims{
		Issuer:    s.issuer,
		Subject:   ServiceAccountUserPrefix + sa.Namespace + ":" + sa.Name,
		Audience:  jwt.Audience(r.Audiences),
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		Expiry:    jwt.NewNumericDate(exp),
		ID:        uuid.NewString(),
	}
	tok, err := jwt.Signed(s.signer).Claims(claims).Claims(pc).CompactSerialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("signing the token: %w", err)
	}
	return tok, exp, nil
}

// ServiceAccountGetter looks up the objects a token refers to, so that a token dies
// with its ServiceAccount or bound object (revocation). Getters return NotFound errors
// for missing objects.
type ServiceAccountGetter interface {
	ServiceAccount(namespace, name string) (*corev1.ServiceAccount, error)
	Pod(namespace, name string) (*corev1.Pod, error)
	Secret(namespace, name string) (*corev1.Secret, error)
}

// ServiceAccountTokens authenticates the JWTs a TokenSigner issued.
type ServiceAccountTokens struct {
	Signer *TokenSigner
	// APIAudiences must intersect the token's audiences.
	APIAudiences []string
	// Getter checks the ServiceAccount and bound objects still exist.
	Getter ServiceAccountGetter
	// verified caches the claims of tokens whose signature was checked (an ECDSA
	// verification costs more than the rest of a GET). Expiry, audiences and the
	// ServiceAccount's existence are still checked on every request.
	verified *lru.Cache
	once     sync.Once
}

// verifiedClaims are a token's claims after its signature was checked.
type verifiedClaims struct {
	public  jwt.Claims
	private privateClaims
}

// saCacheSize bounds the verified-token cache.
const saCacheSize = 4096

// AuthenticateToken implements TokenAuthenticator.
func (a *ServiceAccountTokens) AuthenticateToken(_ context.Context, token string) (*User, []string, bool, error) {
	a.once.Do(func() { a.verified = lru.New(saCacheSize) })
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	var public jwt.Claims
	var pc privateClaims
	if v, ok := a.verified.Get(key); ok {
		vc := v.(*verifiedClaims)
		public, pc = vc.public, vc.private
	} else {
		tok, err := jwt.ParseSigned(token)
		if err != nil {
			return nil, nil, false, nil // not a JWT: not ours
		}
		if err := tok.UnsafeClaimsWithoutVerification(&public); err != nil || public.Issuer != a.Signer.issuer {
			return nil, nil, false, nil // another issuer's JWT
		}
		if err := tok.Claims(&a.Signer.key.PublicKey, &public, &pc); err != nil {
			return nil, nil, false, fmt.Errorf("invalid ServiceAccount token signature: %w", err)
		}
		a.verified.Add(key, &verifiedClaims{public: public, private: pc})
	}
	if err := public.ValidateWithLeeway(jwt.Expected{Issuer: a.Signer.issuer, Time: a.Signer.now()}, 0); err != nil {
		if errors.Is(err, jwt.ErrExpired) {
			return nil, nil, false, errors.New("service account token has expired")
		}
		return nil, nil, false, fmt.Errorf("invalid ServiceAccount token: %w", err)
	}
	var auds []string
	for _, aud := range public.Audience {
		if len(a.APIAudiences) == 0 || slices.Contains(a.APIAudiences, aud) {
			auds = append(auds, aud)
		}
	}
	if len(auds) == 0 {
		return nil, nil, false, fmt.Errorf("token audiences %q are invalid for the target audiences %q", []string(public.Audience), a.APIAudiences)
	}
	k := pc.Kubernetes
	if k.Namespace == "" || k.ServiceAccount.Name == "" || public.Subject != ServiceAccountUserPrefix+k.Namespace+":"+k.ServiceAccount.Name {
		return nil, nil, false, errors.New("ServiceAccount token claims are malformed")
	}
	sa, err := a.Getter.ServiceAccount(k.Namespace, k.ServiceAccount.Name)
	if err != nil {
		return nil, nil, false, lookupErr("service account", k.Namespace, k.ServiceAccount.Name, err)
	}
	if sa.DeletionTimestamp != nil || string(sa.UID) != k.ServiceAccount.UID {
		return nil, nil, false, fmt.Errorf("service account %s/%s has been deleted or recreated", k.Namespace, k.ServiceAccount.Name)
	}
	u := &User{Name: public.Subject, UID: string(sa.UID),
		Groups: []string{GroupServiceAccounts, GroupServiceAccounts + ":" + k.Namespace},
		Extra:  map[string][]string{ExtraCredentialID: {"JTI=" + public.ID}}}
	if p := k.Pod; p != nil {
		pod, err := a.Getter.Pod(k.Namespace, p.Name)
		if err != nil {
			return nil, nil, false, lookupErr("pod", k.Namespace, p.Name, err)
		}
		if pod.DeletionTimestamp != nil || string(pod.UID) != p.UID {
			return nil, nil, false, fmt.Errorf("pod %s/%s the token is bound to has been deleted", k.Namespace, p.Name)
		}
		u.Extra[ExtraPodName] = []string{p.Name}
		u.Extra[ExtraPodUID] = []string{p.UID}
		if k.Node != nil {
			u.Extra[ExtraNodeName] = []string{k.Node.Name}
		}
	}
	if s := k.Secret; s != nil {
		sec, err := a.Getter.Secret(k.Namespace, s.Name)
		if err != nil {
			return nil, nil, false, lookupErr("secret", k.Namespace, s.Name, err)
		}
		if sec.DeletionTimestamp != nil || string(sec.UID) != s.UID {
			return nil, nil, false, fmt.Errorf("secret %s/%s the token is bound to has been deleted", k.Namespace, s.Name)
		}
	}
	return u, auds, true, nil
}

func lookupErr(kind, ns, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s/%s the token refers to no longer exists", kind, ns, name)
	}
	return fmt.Errorf("looking up %s %s/%s: %w", kind, ns, name, err)
}
