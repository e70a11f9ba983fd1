package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"

	cliflag "k8s.io/component-base/cli/flag"
)

// servingTLS is the serving side's TLS policy, parsed from --tls-min-version and
// --tls-cipher-suites as kube-apiserver parses them (k8s.io/component-base/cli/flag).
type servingTLS struct {
	minVersion   uint16
	cipherSuites []uint16
}

// parseServingTLS checks the TLS flags before anything starts, so that a bad name is a
// clear startup error. An empty minimum is TLS 1.2 and no suites means Go's defaults,
// as in kube-apiserver.
func parseServingTLS(minVersion string, suites []string) (servingTLS, error) {
	v, err := cliflag.TLSVersion(minVersion)
	if err != nil {
		return servingTLS{}, fmt.Errorf("--tls-min-version: %w", err)
	}
	ids, err := cliflag.TLSCipherSuites(suites)
	if err != nil {
		return servingTLS{}, fmt.Errorf("--tls-cipher-suites: %w", err)
	}
	if len(ids) > 0 && v < tls.VersionTLS13 && !slices.Contains(ids, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) && !slices.Contains(ids, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) {
		// Go's HTTP/2 server refuses to start otherwise; say so before anything starts.
		return servingTLS{}, fmt.Errorf("--tls-cipher-suites: HTTP/2 needs TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 in the list")
	}
	return servingTLS{minVersion: v, cipherSuites: ids}, nil
}

// apply sets the policy on cfg, warning about insecure suites as kube-apiserver does.
// TLS 1.3 suites are not configurable in Go, so with a TLS 1.3 minimum the list has no
// effect (kube-apiserver accepts that combination too).
func (p servingTLS) apply(cfg *tls.Config, log *slog.Logger) {
	cfg.MinVersion = p.minVersion
	if len(p.cipherSuites) == 0 {
		return
	}
	cfg.CipherSuites = p.cipherSuites
	insecure := cliflag.InsecureTLSCiphers()
	for name, id := range insecure {
		for _, s := range p.cipherSuites {
			if s == id {
				log.Warn("use of an insecure TLS cipher suite", "cipher", name)
			}
		}
	}
}
