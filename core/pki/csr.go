package pki

import (
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// LoadCA loads an existing CA from a certificate and key file without creating anything,
// for a controller-manager given --cluster-signing-cert-file/--cluster-signing-key-file.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", certFile, err)
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", certFile, err)
	}
	if !certs[0].IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", certFile)
	}
	key, err := loadKey(keyFile)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: certs[0], CertPEM: certPEM, CertFile: certFile, key: key}, nil
}

// SignRequest signs a certificate for a verified certificate request with the CA: subject
// and public key come from req, the key usages are the given ones, and the validity is
// capped at the CA's own expiry. It returns the certificate PEM-encoded.
func (ca *CA) SignRequest(req *x509.CertificateRequest, keyUsage x509.KeyUsage, extUsages []x509.ExtKeyUsage, validity time.Duration) ([]byte, error) {
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	if validity <= 0 {
		validity = leafValidity
	}
	// Backdate a little, as Kubernetes' signer does, to tolerate clock skew.
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               req.Subject,
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              notAfter,
		KeyUsage:              keyUsage,
		ExtKeyUsage:           extUsages,
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPAddresses,
		EmailAddresses:        req.EmailAddresses,
		URIs:                  req.URIs,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the signed certificate: %w", err)
	}
	certPEM, err := certutil.EncodeCertificates(cert)
	if err != nil {
		return nil, fmt.Errorf("encoding the certificate: %w", err)
	}
	return certPEM, nil
}
