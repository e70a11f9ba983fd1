package authn

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"time"
)

// X509 authenticates client certificates signed by a trusted CA: the common name is the
// user, the organizations are the groups (Kubernetes' convention).
type X509 struct {
	// Roots are the trusted client CAs.
	Roots *x509.CertPool
	// Now is the clock (nil = time.Now), for tests of expired certificates.
	Now func() time.Time
}

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
	opts := x509.VerifyOptions{
		Roots:         x.Roots,
		Intermediates: x509.NewCertPool(),
		CurrentTime:   now(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, c := range req.TLS.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(opts); err != nil {
		return nil, nil, false, fmt.Errorf("verifying certificate %q: %w", leaf.Subject.String(), err)
	}
	if leaf.Subject.CommonName == "" {
		return nil, nil, false, fmt.Errorf("certificate %q has no common name", leaf.Subject.String())
	}
	return &User{Name: leaf.Subject.CommonName, Groups: append([]string(nil), leaf.Subject.Organization...)}, nil, true, nil
}
