package authn

import (
	"context"
	"crypto/subtle"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Bootstrap token conventions (Kubernetes' bootstrap.kubernetes.io/token secrets).
const (
	// BootstrapSecretPrefix starts the name of a bootstrap token's secret in kube-system.
	BootstrapSecretPrefix = "bootstrap-token-"
	// BootstrapSecretType is the type of a bootstrap token's secret.
	BootstrapSecretType corev1.SecretType = "bootstrap.kubernetes.io/token"
	// BootstrapUserPrefix starts a bootstrap token's user name.
	BootstrapUserPrefix = "system:bootstrap:"
	// Secret data keys.
	BootstrapTokenID          = "token-id"
	BootstrapTokenSecret      = "token-secret"
	BootstrapExpiration       = "expiration"
	BootstrapUsageAuth        = "usage-bootstrap-authentication"
	BootstrapExtraGroups      = "auth-extra-groups"
	BootstrapDescription      = "description"
	BootstrapUsageSigning     = "usage-bootstrap-signing"
	bootstrapExtraGroupPrefix = GroupBootstrappers + ":"
)

// BootstrapTokenRE is the shape of a bootstrap token: "<6 chars>.<16 chars>".
var BootstrapTokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

// SecretGetter reads a secret (NotFound when missing).
type SecretGetter func(namespace, name string) (*corev1.Secret, error)

// BootstrapTokens authenticates nodes joining with a bootstrap token.
type BootstrapTokens struct {
	Secrets SecretGetter
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// AuthenticateToken implements TokenAuthenticator.
func (b *BootstrapTokens) AuthenticateToken(_ context.Context, token string) (*User, []string, bool, error) {
	m := BootstrapTokenRE.FindStringSubmatch(token)
	if m == nil {
		return nil, nil, false, nil
	}
	id, secret := m[1], m[2]
	s, err := b.Secrets("kube-system", BootstrapSecretPrefix+id)
	if apierrors.IsNotFound(err) {
		return nil, nil, false, fmt.Errorf("bootstrap token %s does not exist", id)
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("looking up bootstrap token %s: %w", id, err)
	}
	if s.DeletionTimestamp != nil || s.Type != BootstrapSecretType {
		return nil, nil, false, fmt.Errorf("bootstrap token %s is not usable", id)
	}
	if string(s.Data[BootstrapTokenID]) != id || subtle.ConstantTimeCompare(s.Data[BootstrapTokenSecret], []byte(secret)) != 1 {
		return nil, nil, false, fmt.Errorf("bootstrap token %s: wrong secret", id)
	}
	if string(s.Data[BootstrapUsageAuth]) != "true" {
		return nil, nil, false, fmt.Errorf("bootstrap token %s may not be used for authentication", id)
	}
	if exp := string(s.Data[BootstrapExpiration]); exp != "" {
		t, err := time.Parse(time.RFC3339, exp)
		if err != nil {
			return nil, nil, false, fmt.Errorf("bootstrap token %s: bad expiration %q", id, exp)
		}
		now := time.Now
		if b.Now != nil {
			now = b.Now
		}
		if !now().Before(t) {
			return nil, nil, false, fmt.Errorf("bootstrap token %s expired at %s", id, exp)
		}
	}
	groups := []string{GroupBootstrappers}
	for _, g := range strings.Split(string(s.Data[BootstrapExtraGroups]), ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		if !strings.HasPrefix(g, bootstrapExtraGroupPrefix) {
			return nil, nil, false, fmt.Errorf("bootstrap token %s: extra group %q must start with %q", id, g, bootstrapExtraGroupPrefix)
		}
		groups = append(groups, g)
	}
	return &User{Name: BootstrapUserPrefix + id, Groups: groups}, nil, true, nil
}
