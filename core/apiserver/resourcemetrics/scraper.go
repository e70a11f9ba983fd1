package resourcemetrics

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultResolution is how often kubelets are scraped: metrics-server's --metric-resolution.
const DefaultResolution = 15 * time.Second

// maxParallel bounds the scrapes in flight, so that a large cluster's round does not open
// a connection to every kubelet at once.
const maxParallel = 16

// Config configures a Scraper.
type Config struct {
	// Nodes lists the cluster's nodes.
	Nodes func(ctx context.Context) ([]*corev1.Node, error)
	// URL is the address of a node's /metrics/resource.
	URL func(node *corev1.Node) (string, error)
	// Client reaches kubelets (with the API server's kubelet-client TLS).
	Client *http.Client
	// Resolution is the interval between rounds (default DefaultResolution).
	Resolution time.Duration
	// Logger receives scrape failures.
	Logger *slog.Logger
}

// Scraper scrapes kubelets into a Store once per resolution.
type Scraper struct {
	cfg   Config
	store *Store
}

// NewScraper returns a Scraper writing into store.
func NewScraper(cfg Config, store *Store) *Scraper {
	if cfg.Resolution <= 0 {
		cfg.Resolution = DefaultResolution
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scraper{cfg: cfg, store: store}
}

// Run scrapes every resolution until ctx ends.
func (s *Scraper) Run(ctx context.Context) {
	wait.UntilWithContext(ctx, s.Round, s.cfg.Resolution)
}

// Round scrapes every Ready node once, in parallel, and stores what was read; a node
// whose scrape fails is left out of this round.
func (s *Scraper) Round(ctx context.Context) {
	nodes, err := s.cfg.Nodes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("resource metrics: listing nodes", "err", err)
		}
		return
	}
	// Each scrape must end before the next round starts, as metrics-server bounds it.
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Resolution)
	defer cancel()
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		batches = map[string]*Batch{}
		slots   = make(chan struct{}, maxParallel)
	)
	for _, n := range nodes {
		if !ready(n) {
			continue
		}
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-slots }()
			b, err := s.scrape(ctx, n)
			if err != nil {
				if parent.Err() == nil { // not shutting down
					s.cfg.Logger.Warn("resource metrics: scraping kubelet", "node", n.Name, "err", err)
				}
				return
			}
			mu.Lock()
			batches[n.Name] = b
			mu.Unlock()
		})
	}
	wg.Wait()
	s.store.Update(batches)
}

// scrape reads one kubelet's /metrics/resource.
func (s *Scraper) scrape(ctx context.Context, n *corev1.Node) (*Batch, error) {
	u, err := s.cfg.URL(n)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("request for %s: %w", u, err)
	}
	started := time.Now()
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, msg)
	}
	b, err := ParseBatch(io.LimitReader(resp.Body, 64<<20), started)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", u, err)
	}
	return b, nil
}

// ready reports whether n's Ready condition is True: metrics-server skips other nodes.
func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
