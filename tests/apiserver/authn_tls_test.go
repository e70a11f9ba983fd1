package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
)

// handshake dials addr with cfg and reports the handshake's error.
func handshake(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	return conn.Close()
}

// TestServingTLSPolicy starts `up` with --tls-min-version VersionTLS13, then with one
// TLS 1.2 cipher suite, and checks which client hellos are refused.
func TestServingTLSPolicy(t *testing.T) {
	start := func(t *testing.T, cfg server.Config) (string, *x509.CertPool) {
		t.Helper()
		cfg.DataDir, cfg.Logger = t.TempDir(), testserver.Logger()
		inst, err := server.Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(inst.Close)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(inst.RESTConfig().CAData)
		return strings.TrimPrefix(inst.URL(), "https://"), pool
	}
	t.Run("minimum TLS 1.3", func(t *testing.T) {
		addr, pool := start(t, server.Config{TLSMinVersion: "VersionTLS13", DisableControllers: true, DisableScheduler: true})
		err := handshake(t, addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12})
		if err == nil || !strings.Contains(err.Error(), "protocol version") {
			t.Fatalf("a TLS 1.2-only client: want a protocol version alert, got %v", err)
		}
		if err := handshake(t, addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}); err != nil {
			t.Fatalf("a TLS 1.3 client: %v", err)
		}
	})
	t.Run("one cipher suite", func(t *testing.T) {
		addr, pool := start(t, server.Config{TLSCipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, DisableControllers: true, DisableScheduler: true})
		tls12 := func(suite uint16) *tls.Config {
			return &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}}
		}
		if err := handshake(t, addr, tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384)); err == nil {
			t.Fatal("a client offering only another suite was served")
		}
		if err := handshake(t, addr, tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)); err != nil {
			t.Fatalf("a client offering the configured suite: %v", err)
		}
	})
	t.Run("bad names are refused at startup", func(t *testing.T) {
		for _, cfg := range []server.Config{{TLSMinVersion: "TLS1.2"}, {TLSCipherSuites: []string{"TLS_NOPE"}},
			{TLSCipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}}} {
			cfg.DataDir = t.TempDir()
			if inst, err := server.Start(context.Background(), cfg); err == nil {
				inst.Close()
				t.Fatalf("%+v: started", cfg)
			} else if !strings.Contains(err.Error(), "--tls-") {
				t.Fatalf("%+v: error %v does not name the flag", cfg, err)
			}
		}
	})
}
