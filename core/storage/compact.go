package storage

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CompactRevKey is the etcd key API servers coordinate compaction through (Kubernetes'
// name, so that a shared etcd is compacted once per interval whoever runs it).
const CompactRevKey = "compact_rev_key"

// DefaultCompactionInterval is how often history is compacted, as in Kubernetes.
const DefaultCompactionInterval = 5 * time.Minute

// Compactor compacts etcd every interval to the revision seen one interval earlier, so
// that watchers and paged lists always have at least one interval of history.
type Compactor struct {
	client   *clientv3.Client
	interval time.Duration
	log      *slog.Logger

	// version is the compact_rev_key version this server last saw; rev the revision at
	// that time. Only the run loop touches them.
	version int64
	rev     int64

	// Compacted, when set before Start, learns each revision this compactor compacts to.
	Compacted *CompactedRevision

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// CompactedRevision is the newest revision etcd is known to be compacted to. A server's
// Compactor and its caches share one, so that a cache stops serving continue tokens from
// a snapshot older than what etcd still has: the token then gets the 410 it would get
// from etcd, as with kube-apiserver's cacher, instead of living as long as the snapshot.
// The zero value is ready; a nil one knows nothing.
type CompactedRevision struct {
	rev atomic.Int64
}

// Observe records that etcd is compacted to at least rev.
func (c *CompactedRevision) Observe(rev int64) {
	if c == nil {
		return
	}
	for {
		cur := c.rev.Load()
		if rev <= cur || c.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// Load returns the newest compacted revision known (0 = none).
func (c *CompactedRevision) Load() int64 {
	if c == nil {
		return 0
	}
	return c.rev.Load()
}

// NewCompactor returns a stopped compactor; interval 0 = DefaultCompactionInterval.
func NewCompactor(client *clientv3.Client, interval time.Duration, log *slog.Logger) *Compactor {
	if interval <= 0 {
		interval = DefaultCompactionInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Compactor{client: client, interval: interval, log: log}
}

// Start runs the compaction loop until ctx ends or Stop is called.
func (c *Compactor) Start(ctx context.Context) {
	ctx, c.cancel = context.WithCancel(ctx)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(c.interval)
		defer t.Stop()
		for {
			if _, err := c.Step(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("etcd compaction failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the loop and waits for it.
func (c *Compactor) Stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

// Step is one round: it records the current revision and, when this server was the
// first to act in this round, compacts to the revision recorded in the previous round.
// It returns the revision compacted to (0 if none). Step is not safe for concurrent use
// on one Compactor; several Compactors (API servers) may step concurrently.
func (c *Compactor) Step(ctx context.Context) (int64, error) {
	resp, err := c.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(CompactRevKey), "=", c.version)).
		Then(clientv3.OpPut(CompactRevKey, strconv.FormatInt(c.rev, 10))).
		Else(clientv3.OpGet(CompactRevKey)).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("storage: compaction txn: %w", err)
	}
	cur := resp.Header.Revision
	if !resp.Succeeded {
		// Another server went first this round: follow its clock.
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) > 0 {
			c.version = kvs[0].Version
		}
		c.rev = cur
		return 0, nil
	}
	target := c.rev
	c.version++
	c.rev = cur
	if target == 0 {
		return 0, nil
	}
	if _, err := c.client.Compact(ctx, target); err != nil && !isCompacted(err) {
		return 0, fmt.Errorf("storage: compact to %d: %w", target, err)
	}
	c.Compacted.Observe(target)
	c.log.Info("etcd compacted", "revision", target)
	return target, nil
}
