package storage

import (
	"crypto/tls"
	"fmt"
	"math"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ClientConfig says how to reach etcd (embedded or --etcd-servers).
type ClientConfig struct {
	// Endpoints are etcd client URLs.
	Endpoints []string
	// TLS is used for https endpoints; nil = plaintext.
	TLS *tls.Config
	// DialTimeout bounds the first connection; 0 = 5 s.
	DialTimeout time.Duration
}

// NewClient connects to etcd with sizes large enough for big lists and objects.
func NewClient(cfg ClientConfig) (*clientv3.Client, error) {
	dt := cfg.DialTimeout
	if dt == 0 {
		dt = 5 * time.Second
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		TLS:                  cfg.TLS,
		DialTimeout:          dt,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		MaxCallSendMsgSize:   16 << 20,
		MaxCallRecvMsgSize:   math.MaxInt32,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("storage: etcd client %v: %w", cfg.Endpoints, err)
	}
	return c, nil
}
