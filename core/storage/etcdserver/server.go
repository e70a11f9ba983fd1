// Package etcdserver runs an etcd member inside the process for single-binary setups.
package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// DefaultQuotaBytes is the backend quota: room for 150,000 pods plus history.
const DefaultQuotaBytes = 8 << 30

// Config says where and how the embedded etcd runs.
type Config struct {
	// DataDir holds the member's data; reopening the same dir keeps everything.
	DataDir string
	// ClientURL is the client listen URL; empty = a free 127.0.0.1 port.
	ClientURL string
	// PeerURL is the peer listen URL; empty = a free 127.0.0.1 port.
	PeerURL string
	// Name is the member name; empty = "wasmplane".
	Name string
	// InitialCluster lists every member of a new cluster as name=peerURL,… (etcd's
	// --initial-cluster); empty = a single-member cluster of this member alone. It is read
	// only when the data dir is new.
	InitialCluster string
	// InitialClusterState is "new" (default) or "existing" (joining a running cluster).
	InitialClusterState string
	// InitialClusterToken keeps members of different clusters from joining each other
	// (default etcd's "etcd-cluster").
	InitialClusterToken string
	// QuotaBytes is the backend quota; 0 = DefaultQuotaBytes.
	QuotaBytes int64
	// MaxRequestBytes bounds one write; 0 = DefaultMaxRequestBytes.
	MaxRequestBytes uint
	// ReadyTimeout bounds the wait for the member to serve; 0 = 30 s.
	ReadyTimeout time.Duration
	// Logger receives wasmplane's own messages; nil = discarded. etcd's internal
	// logging is kept at error level.
	Logger *slog.Logger
}

// DefaultMaxRequestBytes is etcd's own default limit on one request (1.5 MiB), the limit
// kube-apiserver's objects live under: keeping it means an object that fits here fits in
// any etcd a cluster moves to.
const DefaultMaxRequestBytes = 1536 * 1024

// Server is a running embedded etcd member.
type Server struct {
	etcd      *embed.Etcd
	endpoints []string
	log       *slog.Logger
	closing   *atomic.Bool
	closeOnce sync.Once
}

// Start launches an etcd member and returns once it serves clients; ctx bounds the start
// only. Free ports picked for empty URLs can be taken by someone else before etcd binds
// them: that case is retried with new ports.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	for attempt := 1; ; attempt++ {
		s, err := start(ctx, cfg)
		if err == nil || attempt == 3 || (cfg.ClientURL != "" && cfg.PeerURL != "") ||
			!strings.Contains(err.Error(), "address already in use") {
			return s, err
		}
	}
}

func start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("etcdserver: DataDir is required")
	}
	if err := checkNotInUse(cfg.DataDir); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ec := embed.NewConfig()
	ec.Dir = cfg.DataDir
	ec.Name = cfg.Name
	if ec.Name == "" {
		ec.Name = "wasmplane"
	}
	clientURL, err := urlOrFree(cfg.ClientURL)
	if err != nil {
		return nil, err
	}
	peerURL, err := urlOrFree(cfg.PeerURL)
	if err != nil {
		return nil, err
	}
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = []url.URL{*peerURL}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	if cfg.InitialCluster != "" {
		ec.InitialCluster = cfg.InitialCluster
	}
	switch cfg.InitialClusterState {
	case "", embed.ClusterStateFlagNew:
		ec.ClusterState = embed.ClusterStateFlagNew
	case embed.ClusterStateFlagExisting:
		ec.ClusterState = embed.ClusterStateFlagExisting
	default:
		return nil, fmt.Errorf("etcdserver: initial cluster state %q: want new or existing", cfg.InitialClusterState)
	}
	if cfg.InitialClusterToken != "" {
		ec.InitialClusterToken = cfg.InitialClusterToken
	}
	ec.QuotaBackendBytes = cfg.QuotaBytes
	if ec.QuotaBackendBytes == 0 {
		ec.QuotaBackendBytes = DefaultQuotaBytes
	}
	// The storage Compactor compacts, like kube-apiserver does.
	ec.AutoCompactionRetention = "0"
	// A single member elects itself: short ticks make a restart ready in well under 1 s.
	// Several members keep etcd's defaults (100 ms ticks, 1 s elections), so that a busy
	// machine does not make followers start needless elections.
	if !multiMember(ec.InitialCluster) {
		ec.TickMs = 10
		ec.ElectionMs = 100
	}
	ec.MaxRequestBytes = cfg.MaxRequestBytes
	if ec.MaxRequestBytes == 0 {
		ec.MaxRequestBytes = DefaultMaxRequestBytes
	}
	closing := &atomic.Bool{}
	zl := zap.New(quietCore{Core: zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.Lock(os.Stderr), zapcore.ErrorLevel), closing: closing})
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zl)
	ec.LogLevel = "error"

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: start: %w", err)
	}
	timeout := cfg.ReadyTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdserver: %w", err)
	case <-t.C:
		e.Close()
		return nil, fmt.Errorf("etcdserver: not ready after %s", timeout)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("etcdserver: %w", ctx.Err())
	}
	s := &Server{etcd: e, endpoints: []string{clientURL.String()}, log: log, closing: closing}
	log.Info("embedded etcd ready", "dataDir", cfg.DataDir, "endpoints", s.endpoints)
	return s, nil
}

// Endpoints are the client URLs of the member.
func (s *Server) Endpoints() []string { return append([]string(nil), s.endpoints...) }

// Err reports a fatal error of the running member.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the member gracefully; acknowledged writes are on disk. Later calls do
// nothing.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		// Shutting down makes etcd's listeners report errors that are expected: silence them.
		s.closing.Store(true)
		s.etcd.Close()
		s.log.Info("embedded etcd stopped")
	})
}

// multiMember tells whether an initial cluster (name=url,…) names more than one member.
func multiMember(initialCluster string) bool {
	names := map[string]bool{}
	for m := range strings.SplitSeq(initialCluster, ",") {
		name, _, _ := strings.Cut(m, "=")
		names[name] = true
	}
	return len(names) > 1
}

// urlOrFree parses u, or picks a free loopback port when u is empty.
func urlOrFree(u string) (*url.URL, error) {
	if u != "" {
		p, err := url.Parse(u)
		if err != nil {
			return nil, fmt.Errorf("etcdserver: url %q: %w", u, err)
		}
		return p, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("etcdserver: free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return nil, fmt.Errorf("etcdserver: free port: %w", err)
	}
	return &url.URL{Scheme: "http", Host: addr}, nil
}

// quietCore drops etcd's log entries once the server is closing.
type quietCore struct {
	zapcore.Core
	closing *atomic.Bool
}

// Check implements zapcore.Core: nothing is written once closing.
func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.closing.Load() || !c.Enabled(e.Level) {
		return ce
	}
	return ce.AddCore(e, c)
}

// With implements zapcore.Core, keeping the closing switch.
func (c quietCore) With(fields []zapcore.Field) zapcore.Core {
	return quietCore{Core: c.Core.With(fields), closing: c.closing}
}
