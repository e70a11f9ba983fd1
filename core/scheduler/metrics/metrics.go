// Package metrics holds the scheduler's Prometheus metrics, named as kube-scheduler's,
// registered on a registry the caller passes in (never the global default).
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Result labels of scheduler_schedule_attempts_total.
const (
	// Scheduled is a pod bound to a node.
	Scheduled = "scheduled"
	// Unschedulable is a pod that fits no node.
	Unschedulable = "unschedulable"
	// SchedulingError is an internal error (plugin error, bind failure…).
	SchedulingError = "error"
)

// Metrics are the scheduler's metrics. A nil *Metrics records nothing.
type Metrics struct {
	// ScheduleAttempts counts attempts by result and profile.
	ScheduleAttempts *prometheus.CounterVec
	// AttemptDuration is the scheduling-cycle latency by result and profile.
	AttemptDuration *prometheus.HistogramVec
	// PendingPods is the number of pending pods by queue (active, backoff, unschedulable).
	PendingPods *prometheus.GaugeVec
	// PluginDuration is the latency of one plugin call by plugin, extension point and status.
	PluginDuration *prometheus.HistogramVec
	// ExtensionPointDuration is the latency of a whole extension point by profile.
	ExtensionPointDuration *prometheus.HistogramVec
	// PreemptionAttempts counts preemption attempts.
	PreemptionAttempts prometheus.Counter
}

// New creates the metrics and registers them on reg (nil reg: unregistered metrics).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ScheduleAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "scheduler", Name: "schedule_attempts_total",
			Help: "Number of attempts to schedule pods, by the result.",
		}, []string{"result", "profile"}),
		AttemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "scheduling_attempt_duration_seconds",
			Help:    "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result", "profile"}),
		PendingPods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "scheduler", Name: "pending_pods",
			Help: "Number of pending pods, by the queue type.",
		}, []string{"queue"}),
		PluginDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "plugin_execution_duration_seconds",
			Help:    "Duration for running a plugin at a specific extension point.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 1.5, 20),
		}, []string{"plugin", "extension_point", "status"}),
		ExtensionPointDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "framework_extension_point_duration_seconds",
			Help:    "Latency for running all plugins of a specific extension point.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 12),
		}, []string{"extension_point", "status", "profile"}),
		PreemptionAttempts: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "scheduler", Name: "preemption_attempts_total",
			Help: "Total preemption attempts in the cluster till now.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.ScheduleAttempts, m.AttemptDuration, m.PendingPods, m.PluginDuration,
			m.ExtensionPointDuration, m.PreemptionAttempts)
	}
	return m
}

// ObservePlugin records one plugin call.
func (m *Metrics) ObservePlugin(plugin, point, status string, d time.Duration) {
	if m == nil {
		return
	}
	m.PluginDuration.WithLabelValues(plugin, point, status).Observe(d.Seconds())
}

// ObserveExtensionPoint records one extension point run.
func (m *Metrics) ObserveExtensionPoint(point, status, profile string, d time.Duration) {
	if m == nil {
		return
	}
	m.ExtensionPointDuration.WithLabelValues(point, status, profile).Observe(d.Seconds())
}

// ObserveAttempt records one scheduling attempt.
func (m *Metrics) ObserveAttempt(result, profile string, d time.Duration) {
	if m == nil {
		return
	}
	m.ScheduleAttempts.WithLabelValues(result, profile).Inc()
	m.AttemptDuration.WithLabelValues(result, profile).Observe(d.Seconds())
}

// SetPending sets the pending-pod gauges.
func (m *Metrics) SetPending(active, backoff, unschedulable int) {
	if m == nil {
		return
	}
	m.PendingPods.WithLabelValues("active").Set(float64(active))
	m.PendingPods.WithLabelValues("backoff").Set(float64(backoff))
	m.PendingPods.WithLabelValues("unschedulable").Set(float64(unschedulable))
}
