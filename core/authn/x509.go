package authn

import (
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/lru"
)

// X509 authenticates client certificates signed by a trusted CA: the common name is the
// user, the organizations are the groups (Kubernetes' convention).
type X509 struct {
	// Roots are the trusted client CAs.
	Roots *x509.CertPool
	// Now is the clock (nil = time.Now), for tests of expired certificates.
	Now func() time.Time
	// verified caches successful chain verifications (an ECDSA verification costs ~90 µs,
	// more than the rest of a GET) by the leaf's and chain's bytes; entries are
	// re-checked against the validity window on every use.
	verified *lru.Cache
	// verifiedConns caches them by the parsed leaf: crypto/tls parses a client's chain once
	// per connection, so every request on a verified connection presents the same
	// *x509.Certificate and chain, and a request costs a lookup rather than hashing the
	// chain (thousands of times a second under a flood of requests the server refuses).
	verifiedConns *lru.Cache
	once          sync.Once
}

// x509CacheSize bounds the verification cache (distinct client certificates in use).
const x509CacheSize = 1024

// AuthenticateRequest implements Authenticator.
func (x *X509) AuthenticateRequest(req *http.Request) (*User, []string, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return nil, nil, false, nil
	}
	now := time.Now
	if x.Now != nil {
		now = x.Now
	}
	leaf := req.TLS.PeerCertificates[0]
	x.once.Do(func() {
		x.verified = lru.New(x509CacheSize)
		x.verifiedConns = lru.New(x509CacheSize)
	})
	t := now()
	if t.Before(leaf.NotBefore) || t.After(leaf.NotAfter) || !x.known(req.TLS.PeerCertificates) {
		opts := x509.VerifyOptions{
			Roots:         x.Roots,
			Intermediates: x509.NewCertPool(),
			CurrentTime:   t,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		for _, c := range req.TLS.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := leaf.Verify(opts); err != nil {
			return nil, nil, false, fmt.Errorf("verifying certificate %q: %w", leaf.Subject.String(), err)
		}
		x.verified.Add(chainKey(req.TLS.PeerCertificates), struct{}{})
		x.verifiedConns.Add(leaf, len(req.TLS.PeerCertificates))
	}
	if leaf.Subject.CommonName == "" {
		return nil, nil, false, fmt.Errorf("certificate %q has no common name", leaf.Subject.String())
	}
	return &User{Name: leaf.Subject.CommonName, Groups: append([]string(nil), leaf.Subject.Organization...)}, nil, true, nil
}

// known reports whether chain was verified before: on the same connection (the same
// parsed leaf, with as many certificates), or with the same bytes on another one.
func (x *X509) known(chain []*x509.Certificate) bool {
	if n, ok := x.verifiedConns.Get(chain[0]); ok && n == len(chain) {
		return true
	}
	if _, ok := x.verified.Get(chainKey(chain)); !ok {
		return false
	}
	x.verifiedConns.Add(chain[0], len(chain))
	return true
}

// chainKey is the SHA-256 of a chain's certificates.
func chainKey(chain []*x509.Certificate) string {
	h := sha256.New()
	for _, c := range chain {
		h.Write(c.Raw)
	}
	return string(h.Sum(nil))
}
