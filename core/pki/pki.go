// Package pki keeps wasmplane's certificate authority and the certificates it issues:
// the API server's serving certificate, client certificates for the admin, components and
// tenants, and the ServiceAccount token signing key. Everything lives in one directory
// with 0600 permissions and is reused across restarts.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Validity periods: the CA outlives everything it signs.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore reissues a leaf certificate that expires sooner than this.
	renewBefore = 30 * 24 * time.Hour
)

// CA is the cluster's certificate authority.
type CA struct {
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// CertPEM is Cert PEM-encoded (what kubeconfigs embed).
	CertPEM []byte
	// CertFile is where CertPEM is stored.
	CertFile string
	key      crypto.Signer
	dir      string
}

// Usage says what a leaf certificate is for.
type Usage int

const (
	// ServerAuth is a TLS serving certificate.
	ServerAuth Usage = iota
	// ClientAuth is a TLS client certificate.
	ClientAuth
)

// Leaf describes a certificate to issue.
type Leaf struct {
	// CommonName is the user name for client certificates.
	CommonName string
	// Organizations are the groups for client certificates.
	Organizations []string
	// DNSNames and IPs are the serving certificate's subject alternative names.
	DNSNames []string
	IPs      []net.IP
	// Usage is ServerAuth or ClientAuth.
	Usage Usage
	// Validity defaults to one year.
	Validity time.Duration
}

// Pair is an issued certificate and its key on disk, plus their PEM bytes.
type Pair struct {
	CertFile, KeyFile string
	CertPEM, KeyPEM   []byte
}

// LoadOrCreateCA loads the CA in dir (ca.crt, ca.key) or creates it on first start.
func LoadOrCreateCA(dir string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	ca := &CA{dir: dir, CertFile: filepath.Join(dir, "ca.crt")}
	keyFile := filepath.Join(dir, "ca.key")
	if certPEM, err := os.ReadFile(ca.CertFile); err == nil {
		certs, err := certutil.ParseCertsPEM(certPEM)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", ca.CertFile, err)
		}
		key, err := loadKey(keyFile)
		if err != nil {
			return nil, err
		}
		ca.Cert, ca.CertPEM, ca.key = certs[0], certPEM, key
		return ca, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", ca.CertFile, err)
	}
	key, err := newKey(keyFile)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "wasmplane-ca@" + host},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(caValidity),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	ca.Cert, _ = x509.ParseCertificate(der)
	ca.CertPEM, _ = certutil.EncodeCertificates(ca.Cert)
	ca.key = key
	if err := writeFile(ca.CertFile, ca.CertPEM); err != nil {
		return nil, err
	}
	return ca, nil
}

// Pool is a cert pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Ensure returns the certificate name.crt/name.key in the CA's directory, issuing it
// when it is missing, about to expire, not signed by this CA, or does not match l.
func (ca *CA) Ensure(name string, l Leaf) (*Pair, error) {
	p := &Pair{CertFile: filepath.Join(ca.dir, name+".crt"), KeyFile: filepath.Join(ca.dir, name+".key")}
	if certPEM, err := os.ReadFile(p.CertFile); err == nil {
		if keyPEM, err := os.ReadFile(p.KeyFile); err == nil && ca.matches(certPEM, l) {
			p.CertPEM, p.KeyPEM = certPEM, keyPEM
			return p, nil
		}
	}
	certPEM, keyPEM, err := ca.Issue(l)
	if err != nil {
		return nil, fmt.Errorf("issuing %s: %w", name, err)
	}
	if err := writeFile(p.KeyFile, keyPEM); err != nil {
		return nil, err
	}
	if err := writeFile(p.CertFile, certPEM); err != nil {
		return nil, err
	}
	p.CertPEM, p.KeyPEM = certPEM, keyPEM
	return p, nil
}

// Issue signs a new certificate for l with a fresh key and returns both PEM-encoded,
// without writing anything (for kubeconfigs handed to users).
func (ca *CA) Issue(l Leaf) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	validity := l.Validity
	if validity == 0 {
		validity = leafValidity
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.CommonName, Organization: l.Organizations},
		NotBefore:    time.Now().Add(-5 * time.Minute),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPs,
	}
	if l.Usage == ServerAuth {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the certificate: %w", err)
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM, _ = certutil.EncodeCertificates(cert)
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the key: %w", err)
	}
	return certPEM, keyPEM, nil
}

// matches reports whether an existing certificate can be reused for l.
func (ca *CA) matches(certPEM []byte, l Leaf) bool {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil || len(certs) == 0 {
		return false
	}
	c := certs[0]
	if time.Until(c.NotAfter) < renewBefore || c.CheckSignatureFrom(ca.Cert) != nil {
		return false
	}
	if c.Subject.CommonName != l.CommonName || !sameSet(c.Subject.Organization, l.Organizations) || !sameSet(c.DNSNames, l.DNSNames) {
		return false
	}
	have := make([]string, 0, len(c.IPAddresses))
	for _, ip := range c.IPAddresses {
		have = append(have, ip.String())
	}
	want := make([]string, 0, len(l.IPs))
	for _, ip := range l.IPs {
		want = append(want, ip.String())
	}
	return sameSet(have, want)
}

// LoadOrCreateSigningKey returns the ECDSA key in file (ServiceAccount token signing),
// creating it on first start.
func LoadOrCreateSigningKey(file string) (*ecdsa.PrivateKey, error) {
	if _, err := os.Stat(file); err == nil {
		k, err := loadKey(file)
		if err != nil {
			return nil, err
		}
		ek, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: want an ECDSA key, have %T", file, k)
		}
		return ek, nil
	}
	k, err := newKey(file)
	if err != nil {
		return nil, err
	}
	return k.(*ecdsa.PrivateKey), nil
}

func newKey(file string) (crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	pemBytes, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a key: %w", err)
	}
	if err := writeFile(file, pemBytes); err != nil {
		return nil, err
	}
	return key, nil
}

func loadKey(file string) (crypto.Signer, error) {
	k, err := keyutil.PrivateKeyFromFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading key %s: %w", file, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key %s cannot sign", file)
	}
	return s, nil
}

// writeFile writes atomically with owner-only permissions, so a crash never leaves a
// half-written key and no other user can read one.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
