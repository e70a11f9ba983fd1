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
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/kubelet/logs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// optsView is logs.Options under a local name.
type optsView = logs.Options

func TestParseOptions(t *testing.T) {
	now := time.Unix(10_000, 0)
	tests := []struct {
		query    string
		check    func(opts optsView) bool
		previous bool
		err      bool
	}{
		{query: "", check: func(o optsView) bool { return o.TailLines == -1 && !o.Follow && o.Since.IsZero() }},
		{query: "follow=true&timestamps=1&tailLines=5", check: func(o optsView) bool { return o.Follow && o.Timestamps && o.TailLines == 5 }},
		{query: "previous=true", previous: true, check: func(optsView) bool { return true }},
		{query: "sinceSeconds=10", check: func(o optsView) bool { return o.Since.Equal(now.Add(-10 * time.Second)) }},
		{query: "sinceTime=2026-01-01T00:00:00Z", check: func(o optsView) bool { return o.Since.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }},
		{query: "limitBytes=100", check: func(o optsView) bool { return o.LimitBytes == 100 }},
		{query: "limitBytes=0", err: true},
		{query: "tailLines=-1", err: true},
		{query: "follow=maybe", err: true},
		{query: "sinceTime=yesterday", err: true},
	}
	for _, tc := range tests {
		q, _ := url.ParseQuery(tc.query)
		opts, prev, err := ParseOptions(q, now)
		if (err != nil) != tc.err {
			t.Errorf("%q: err = %v", tc.query, err)
			continue
		}
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Code != http.StatusBadRequest {
				t.Errorf("%q: error %v is not a 400", tc.query, err)
			}
			continue
		}
		if prev != tc.previous || !tc.check(opts) {
			t.Errorf("%q: got %+v previous=%v", tc.query, opts, prev)
		}
	}
}

type fakeSource struct{ path string }

// Summary implements StatsSource with one pod of one container.
func (fakeSource) Summary(context.Context) (*statsapi.Summary, error) {
	at := metav1.NewTime(time.Unix(1700000000, 0))
	cpu, mem := uint64(1500000000), uint64(4096)
	return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "n1", CPU: &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: &cpu},
		Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: &mem}},
		Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Name: "p", Namespace: "ns"}, Containers: []statsapi.ContainerStats{{Name: "c", StartTime: at,
			CPU: &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: &cpu}, Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: &mem}}}}}}, nil
}

func (f fakeSource) ContainerLogFile(_ context.Context, ns, pod, container string, previous bool) (string, func() bool, error) {
	switch {
	case pod != "p":
		return "", nil, NotFound("pod %q not found", ns+"/"+pod)
	case previous:
		return "", nil, BadRequest("previous terminated container %q in pod %q not found", container, pod)
	}
	return f.path, nil, nil
}

func genCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func clientCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, orgs ...string) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestServeLogsOverTLSWithClientCA(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "0.log")
	if err := os.WriteFile(logFile, []byte("2026-01-01T00:00:00Z stdout F hello\n2026-01-01T00:00:01Z stderr F world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := SelfSignedCert(filepath.Join(dir, "pki"), []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	// A second call reuses the pair.
	if c2, _, err := SelfSignedCert(filepath.Join(dir, "pki"), nil); err != nil || c2 != certFile {
		t.Fatalf("reuse: %s %v", c2, err)
	}
	ca, caKey, caPEM := genCA(t, "client-ca")
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := TLSConfig(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, cfg, Handler(fakeSource{path: logFile}, slog.New(slog.NewTextHandler(io.Discard, nil)), Access{Anonymous: true}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); <-done }()
	serverPEM, _ := os.ReadFile(certFile)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(serverPEM)
	base := fmt.Sprintf("https://%s", ln.Addr())
	get := func(client *http.Client, path string) (int, string, error) {
		resp, err := client.Get(base + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	if _, _, err := get(anonymous, "/containerLogs/ns/p/c"); err == nil {
		t.Error("a client without a certificate was served")
	}
	withCert := func(c tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{c}}}}
	}
	// A certificate the same CA signed for a user or a node is not the API server's.
	for _, c := range []tls.Certificate{clientCert(t, ca, caKey, "alice", "tenant-a"), clientCert(t, ca, caKey, "system:node:n1", "system:nodes")} {
		code, body, err := get(withCert(c), "/containerLogs/ns/p/c")
		if err != nil || code != http.StatusForbidden || !strings.Contains(body, "may not read container logs") {
			t.Errorf("non-master client: %d %q %v, want 403", code, body, err)
		}
		for _, path := range []string{"/metrics/resource", "/stats/summary"} {
			if code, _, err := get(withCert(c), path); err != nil || code != http.StatusForbidden {
				t.Errorf("non-master client, %s: %d %v, want 403", path, code, err)
			}
		}
		// Profiles show as much of the node as logs do.
		if code, body, err := get(withCert(c), "/debug/pprof/heap"); err != nil || code != http.StatusForbidden || !strings.Contains(body, "may not read profiles") {
			t.Errorf("non-master client, profile: %d %q %v, want 403", code, body, err)
		}
	}
	client := withCert(clientCert(t, ca, caKey, "wasmplane-apiserver-kubelet-client", MastersGroup))
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/containerLogs/ns/p/c", 200, "hello\nworld\n"},
		{"/containerLogs/ns/p/c?tailLines=1&timestamps=true", 200, "2026-01-01T00:00:01Z world\n"},
		{"/containerLogs/ns/p/c?previous=true", 400, `previous terminated container "c" in pod "p" not found`},
		{"/containerLogs/ns/other/c", 404, `pod "ns/other" not found`},
		{"/containerLogs/ns/p/c?tailLines=x", 400, `invalid tailLines "x": must be a non-negative integer`},
		{"/healthz", 200, "ok"},
		{"/stats/summary", 200, `{"node":{"nodeName":"n1","startTime":null,"cpu":{"time":"2023-11-14T22:13:20Z","usageCoreNanoSeconds":1500000000},"memory":{"time":"2023-11-14T22:13:20Z","workingSetBytes":4096}},"pods":[{"podRef":{"name":"p","namespace":"ns","uid":""},"startTime":null,"containers":[{"name":"c","startTime":"2023-11-14T22:13:20Z","cpu":{"time":"2023-11-14T22:13:20Z","usageCoreNanoSeconds":1500000000},"memory":{"time":"2023-11-14T22:13:20Z","workingSetBytes":4096}}]}]}` + "\n"},
	} {
		code, body, err := get(client, tc.path)
		if err != nil || code != tc.code || body != tc.body {
			t.Errorf("%s: %d %q %v, want %d %q", tc.path, code, body, err, tc.code, tc.body)
		}
	}
	if code, body, err := get(client, "/metrics/resource"); err != nil || code != http.StatusOK ||
		!strings.Contains(body, `container_cpu_usage_seconds_total{container="c",namespace="ns",pod="p"} 1.5 1700000000000`+"\n") {
		t.Errorf("/metrics/resource: %d %q %v", code, body, err)
	}
	if code, body, err := get(client, "/debug/pprof/heap?debug=1"); err != nil || code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Errorf("heap profile: %d %.80q %v, want 200", code, body, err)
	}
}
