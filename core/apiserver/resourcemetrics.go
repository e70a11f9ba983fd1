package apiserver

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/wasmplane/wasmplane/core/apiserver/resourcemetrics"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resourceMetrics is the server's metrics-server: a scraper of kubelets and the store
// metrics.k8s.io is served from.
type resourceMetrics struct {
	store   *resourcemetrics.Store
	scraper *resourcemetrics.Scraper
}

// newResourceMetrics builds the scraper of cfg's resolution, nil when metrics.k8s.io is
// not served. Nodes are read from the server's own watch cache and kubelets reached
// with the kubelet-client TLS, as pods/log reaches them.
func newResourceMetrics(s *Server, cfg Config) *resourceMetrics {
	if cfg.MetricsResolution < 0 {
		return nil
	}
	store := resourcemetrics.NewStore()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	scraper := resourcemetrics.NewScraper(resourcemetrics.Config{
		Nodes: func(ctx context.Context) ([]*corev1.Node, error) {
			list, err := s.Store(corev1.Resource("nodes")).List(ctx, "", &metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return nil, err
			}
			items := list.(*corev1.NodeList).Items
			out := make([]*corev1.Node, len(items))
			for i := range items {
				out[i] = &items[i]
			}
			return out, nil
		},
		URL: func(n *corev1.Node) (string, error) {
			u, err := resources.KubeletURL(n, "/metrics/resource")
			if err != nil {
				return "", err
			}
			return u.String(), nil
		},
		Client:     &http.Client{Transport: resources.KubeletTransport(cfg.KubeletClientTLS)},
		Resolution: cfg.MetricsResolution,
		Logger:     log.With("component", "resource-metrics"),
	}, store)
	return &resourceMetrics{store: store, scraper: scraper}
}

// RunResourceMetrics scrapes kubelets for metrics.k8s.io until ctx ends; it returns at
// once when metrics.k8s.io is not served.
func (s *Server) RunResourceMetrics(ctx context.Context) {
	if s.resourceMetrics != nil {
		s.resourceMetrics.scraper.Run(ctx)
	}
}
