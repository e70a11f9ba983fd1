package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/wasmplane/wasmplane/core/kubelet/stats"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// StatsSource reads the node's resource statistics.
type StatsSource interface {
	// Summary is the node's and its pods' CPU and memory.
	Summary(ctx context.Context) (*statsapi.Summary, error)
}

// registerStats adds /stats/summary and /metrics/resource. Like the kubelet's, both are
// for the API server's client only (the kubelet asks for nodes/stats and nodes/metrics;
// here the kubelet-client certificate's group stands for both, as for logs).
func registerStats(mux *http.ServeMux, src StatsSource, log *slog.Logger, acc Access) {
	guard := func(what string, h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			if err := acc.check(req, "read "+what); err != nil {
				writeErr(w, err)
				return
			}
			h(w, req)
		}
	}
	mux.HandleFunc("GET /stats/summary", guard("stats", func(w http.ResponseWriter, req *http.Request) {
		s, err := src.Summary(req.Context())
		if err != nil {
			log.Warn("reading stats summary", "err", err)
			writeErr(w, fmt.Errorf("failed to get node info: %w", err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(s); err != nil {
			log.Debug("writing stats summary", "err", err)
		}
	}))
	mux.HandleFunc("GET /metrics/resource", guard("metrics", func(w http.ResponseWriter, req *http.Request) {
		s, err := src.Summary(req.Context())
		if err != nil {
			// The kubelet's collector answers 200 with its scrape error gauges set.
			log.Warn("reading resource metrics", "err", err)
			s = nil
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if err := stats.WriteResourceMetrics(w, s); err != nil {
			log.Debug("writing resource metrics", "err", err)
		}
	}))
}
