// Package server is the kubelet's HTTPS endpoint: /containerLogs/{ns}/{pod}/{container}
// (what the API server's pods/log proxies to), /exec, /attach and /portForward (what
// pods/exec, pods/attach and pods/portforward proxy to), /stats/summary and
// /metrics/resource (what resource metrics are scraped from), /healthz and /debug/pprof/.
package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/wasmplane/wasmplane/core/kubelet/logs"
)

// Error is a failure with the HTTP status the client gets.
type Error struct {
	// Code is the HTTP status.
	Code int
	// Message is the text body.
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// BadRequest is a 400 Error.
func BadRequest(format string, args ...any) error {
	return &Error{Code: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

// NotFound is a 404 Error.
func NotFound(format string, args ...any) error {
	return &Error{Code: http.StatusNotFound, Message: fmt.Sprintf(format, args...)}
}

// LogSource finds the log file of a container instance.
type LogSource interface {
	// ContainerLogFile returns the CRI log file to read and, for the running instance, a
	// function telling whether it is still running (followers stop when it is not).
	ContainerLogFile(ctx context.Context, namespace, pod, container string, previous bool) (path string, alive func() bool, err error)
}

// Handler serves the kubelet API; when src is also a Streamer, /exec, /attach and
// /portForward too, and when it is a StatsSource, /stats/summary and /metrics/resource.
// acc says whom it serves besides the API server's client.
func Handler(src LogSource, log *slog.Logger, acc Access) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", func(w http.ResponseWriter, req *http.Request) {
		if err := acc.check(req, "read container logs"); err != nil {
			writeErr(w, err)
			return
		}
		serveLogs(w, req, src, log)
	})
	if st, ok := src.(Streamer); ok {
		registerStreams(mux, st, log, acc)
	}
	if st, ok := src.(StatsSource); ok {
		registerStats(mux, st, log, acc)
	}
	// Profiles, as the kubelet's enableProfilingHandler serves them: they show where
	// the node agent's CPU and memory go, and only the API server's client may read them.
	profile := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			if err := acc.check(req, "read profiles"); err != nil {
				writeErr(w, err)
				return
			}
			h(w, req)
		}
	}
	mux.HandleFunc("GET /debug/pprof/", profile(pprof.Index))
	mux.HandleFunc("GET /debug/pprof/profile", profile(pprof.Profile))
	mux.HandleFunc("GET /debug/pprof/trace", profile(pprof.Trace))
	return mux
}

// MastersGroup is the certificate organization the kubelet API requires of a client:
// the API server's kubelet-client certificate carries it. Any other certificate the
// cluster CA signed (a tenant's, a node's) is refused, so tenants reach logs only
// through the API server, where RBAC on pods/log applies.
const MastersGroup = "system:masters"

// Access is whom the kubelet API serves besides the API server's client (a verified
// certificate in MastersGroup, always served).
type Access struct {
	// Delegated reviews bearer tokens and other clients' certificates; nil refuses them.
	Delegated *Delegated
	// Anonymous serves requests that bring no credentials, as a kubelet with anonymous
	// auth does; a kubelet without a client CA sees no certificates, so its API server's
	// requests are anonymous too. wasmplane's nodes always have a client CA.
	Anonymous bool
}

// check returns nil when req may go on, else the 401 or 403 to answer.
func (a Access) check(req *http.Request, what string) *Error {
	if req.TLS == nil {
		return nil
	}
	cert := len(req.TLS.PeerCertificates) > 0
	if cert && len(req.TLS.VerifiedChains) > 0 && slices.Contains(req.TLS.PeerCertificates[0].Subject.Organization, MastersGroup) {
		return nil
	}
	if !cert && req.Header.Get("Authorization") == "" {
		if a.Anonymous {
			return nil
		}
		return &Error{Code: http.StatusUnauthorized, Message: "Unauthorized"}
	}
	if a.Delegated != nil {
		return a.Delegated.decide(req)
	}
	if !cert {
		return &Error{Code: http.StatusUnauthorized, Message: "Unauthorized"}
	}
	return &Error{Code: http.StatusForbidden, Message: fmt.Sprintf("forbidden: %s may not %s on this node (only the API server's kubelet client, group %s)", clientName(req), what, MastersGroup)}
}

// clientName names req's client for errors.
func clientName(req *http.Request) string {
	if req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
		return fmt.Sprintf("%q", req.TLS.PeerCertificates[0].Subject.CommonName)
	}
	return "an anonymous client"
}

func writeErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var e *Error
	if errors.As(err, &e) {
		code = e.Code
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(err.Error()))
}

// ParseOptions reads the pods/log query parameters.
func ParseOptions(q map[string][]string, now time.Time) (opts logs.Options, previous bool, err error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	opts.TailLines = -1
	boolean := func(k string) (bool, error) {
		v := get(k)
		if v == "" {
			return false, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, BadRequest("invalid %s %q", k, v)
		}
		return b, nil
	}
	if opts.Follow, err = boolean("follow"); err != nil {
		return
	}
	if previous, err = boolean("previous"); err != nil {
		return
	}
	if opts.Timestamps, err = boolean("timestamps"); err != nil {
		return
	}
	integer := func(k string) (int64, bool, error) {
		v := get(k)
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, false, BadRequest("invalid %s %q: must be a non-negative integer", k, v)
		}
		return n, true, nil
	}
	if n, ok, e := integer("tailLines"); e != nil {
		return opts, false, e
	} else if ok {
		opts.TailLines = n
	}
	if n, ok, e := integer("limitBytes"); e != nil {
		return opts, false, e
	} else if ok {
		if n == 0 {
			return opts, false, BadRequest("limitBytes must be greater than zero")
		}
		opts.LimitBytes = n
	}
	if n, ok, e := integer("sinceSeconds"); e != nil {
		return opts, false, e
	} else if ok {
		opts.Since = now.Add(-time.Duration(n) * time.Second)
	}
	if v := get("sinceTime"); v != "" {
		t, e := time.Parse(time.RFC3339, v)
		if e != nil {
			return opts, false, BadRequest("invalid sinceTime %q", v)
		}
		opts.Since = t
	}
	return opts, previous, nil
}

func serveLogs(w http.ResponseWriter, req *http.Request, src LogSource, log *slog.Logger) {
	opts, previous, err := ParseOptions(req.URL.Query(), time.Now())
	if err != nil {
		writeErr(w, err)
		return
	}
	ns, pod, container := req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container")
	path, alive, err := src.ContainerLogFile(req.Context(), ns, pod, container, previous)
	if err != nil {
		writeErr(w, err)
		return
	}
	if _, err := os.Stat(path); err != nil {
		writeErr(w, NotFound("log file of container %q in pod %q is not available: %v", container, pod, err))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if err := logs.ReadLogs(req.Context(), path, opts, w, alive); err != nil && req.Context().Err() == nil {
		log.Warn("streaming container logs", "pod", ns+"/"+pod, "container", container, "err", err)
	}
}

// Serve runs the HTTPS server on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config, h http.Handler, log *slog.Logger) error {
	hs := &http.Server{Handler: h, TLSConfig: tlsConfig, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(tls.NewListener(ln, tlsConfig)) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		_ = hs.Close()
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("kubelet server: %w", err)
	}
}

// TLSConfig builds the serving configuration: the certificate pair, and when clientCA is
// set, only clients with certificates it signed are accepted.
func TLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading kubelet serving certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("reading kubelet client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kubelet client CA %s holds no certificate", clientCAFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// SelfSignedCert returns dir/kubelet.crt and dir/kubelet.key, creating a self-signed
// serving pair for hosts (names or IPs) when they do not exist yet, as the kubelet does
// without --tls-cert-file.
func SelfSignedCert(dir string, hosts []string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, "kubelet.crt"), filepath.Join(dir, "kubelet.key")
	if _, err1 := os.Stat(certFile); err1 == nil {
		if _, err2 := os.Stat(keyFile); err2 == nil {
			return certFile, keyFile, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("creating certificate directory: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generating kubelet key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", fmt.Errorf("generating serial: %w", err)
	}
	name := "kubelet"
	if len(hosts) > 0 {
		name = hosts[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name + "@" + strconv.FormatInt(time.Now().Unix(), 10)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", fmt.Errorf("creating kubelet certificate: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("encoding kubelet key: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return "", "", fmt.Errorf("writing kubelet key: %w", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", fmt.Errorf("writing kubelet certificate: %w", err)
	}
	return certFile, keyFile, nil
}
