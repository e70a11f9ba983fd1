package wasm

import (
	"context"
	"log/slog"
	"sync"

	"golang.org/x/time/rate"
)

// Default log budget of one plugin: a steady 20 lines a second with bursts of 100. A
// plugin called thousands of times a second that logs on every call, or fails on every
// call, would otherwise write megabytes a second into the server's log — a tenant filling
// the disk and the log pipeline of everyone.
const (
	defaultLogRate  = 20
	defaultLogBurst = 100
)

// LogBudget bounds how many lines one plugin puts into the server's log, its own messages
// and the server's messages about its failures alike. Lines over the budget are counted,
// and the count is logged with the next line the budget lets through. A nil budget lets
// every line through.
type LogBudget struct {
	lim        *rate.Limiter
	mu         sync.Mutex
	suppressed int
}

// NewLogBudget allows perSecond lines a second on average and burst at once; perSecond
// <= 0 means the default budget.
func NewLogBudget(perSecond float64, burst int) *LogBudget {
	if perSecond <= 0 {
		perSecond, burst = defaultLogRate, defaultLogBurst
	}
	if burst < 1 {
		burst = 1
	}
	return &LogBudget{lim: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// Log writes one record to l if the budget allows it; plugin names the plugin in the
// record that reports suppressed lines.
func (b *LogBudget) Log(ctx context.Context, l *slog.Logger, plugin string, level slog.Level, msg string, args ...any) {
	if l == nil {
		return
	}
	if b == nil {
		l.Log(ctx, level, msg, args...)
		return
	}
	b.mu.Lock()
	if !b.lim.Allow() {
		b.suppressed++
		b.mu.Unlock()
		return
	}
	n := b.suppressed
	b.suppressed = 0
	b.mu.Unlock()
	if n > 0 {
		l.Warn("plugin log lines suppressed: over the plugin's log budget", "plugin", plugin, "suppressed", n)
	}
	l.Log(ctx, level, msg, args...)
}

// Suppressed is the number of lines dropped since the last report.
func (b *LogBudget) Suppressed() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.suppressed
}

// BudgetOf is the log budget of a plugin behind an adapter's caller interface, or nil
// (no bound) when the caller is not a loaded plugin, e.g. a test double.
func BudgetOf(caller any) *LogBudget {
	if b, ok := caller.(interface{ LogBudget() *LogBudget }); ok {
		return b.LogBudget()
	}
	return nil
}
