package wasm

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// metrics are the host's Prometheus collectors; nil collectors mean "not registered".
type metrics struct {
	calls     *prometheus.CounterVec
	errors    *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	instances *prometheus.GaugeVec
	memory    *prometheus.GaugeVec
}

type hookMetrics struct {
	hook    string
	calls   prometheus.Counter
	latency prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return &metrics{}, nil
	}
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "wasmplane", Subsystem: "wasm", Name: "calls_total",
			Help: "Hook calls by plugin and hook.",
		}, []string{"plugin", "hook"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "wasmplane", Subsystem: "wasm", Name: "call_errors_total",
			Help: "Failed hook calls by plugin, hook and error kind.",
		}, []string{"plugin", "hook", "kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "wasmplane", Subsystem: "wasm", Name: "call_duration_seconds",
			Help:    "Hook call latency, including waiting for an instance.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12), // 1µs … ~4s
		}, []string{"plugin", "hook"}),
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "wasmplane", Subsystem: "wasm", Name: "instances",
			Help: "Live instances by plugin.",
		}, []string{"plugin"}),
		memory: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "wasmplane", Subsystem: "wasm", Name: "memory_bytes",
			Help: "Linear memory of live instances by plugin.",
		}, []string{"plugin"}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.errors, m.latency, m.instances, m.memory} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("wasm: metrics already registered on this registry: %w", err)
			}
			return nil, fmt.Errorf("wasm: register metrics: %w", err)
		}
	}
	return m, nil
}

// forPlugin resolves the per-hook collectors once, so a call does no label lookups.
func (m *metrics) forPlugin(plugin string) [numHooks]*hookMetrics {
	var hm [numHooks]*hookMetrics
	for i, h := range abi.Hooks {
		x := &hookMetrics{hook: h}
		if m.calls != nil {
			x.calls = m.calls.WithLabelValues(plugin, h)
			x.latency = m.latency.WithLabelValues(plugin, h)
		}
		hm[i] = x
	}
	return hm
}

func (h *hookMetrics) observe(p *Plugin, start time.Time, err error) {
	if h.calls == nil {
		return
	}
	h.calls.Inc()
	h.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		p.r.metrics.errors.WithLabelValues(p.label, h.hook, string(KindOf(err))).Inc()
	}
}

func (m *metrics) instanceAdded(p *Plugin, mem int) {
	if m.instances == nil {
		return
	}
	m.instances.WithLabelValues(p.label).Inc()
	m.memory.WithLabelValues(p.label).Add(float64(mem))
}

func (m *metrics) instanceRemoved(p *Plugin, mem int) {
	if m.instances == nil {
		return
	}
	m.instances.WithLabelValues(p.label).Dec()
	m.memory.WithLabelValues(p.label).Sub(float64(mem))
}

func (m *metrics) memoryChanged(p *Plugin, delta int) {
	if m.memory == nil {
		return
	}
	m.memory.WithLabelValues(p.label).Add(float64(delta))
}
