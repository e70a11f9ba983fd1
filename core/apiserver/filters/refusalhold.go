package filters

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	flowcontrol "k8s.io/api/flowcontrol/v1"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	"k8s.io/utils/clock"
)

// Defaults of RefusalHoldConfig.
const (
	// DefaultRefusalHold is the longest a refusal of a flow refused for a sustained
	// time is held; within it, a refusal is held for the Retry-After it carries.
	DefaultRefusalHold = 8 * time.Second
	// DefaultRefusalSustain is how long a flow must have been refused without a pause
	// before its refusals are held: a burst shorter than this is refused at once.
	DefaultRefusalSustain = time.Second
	// DefaultRefusalGap is the pause in a flow's refusals that ends its streak,
	// counted from when its last refusal was answered (after its hold).
	DefaultRefusalGap = 2 * time.Second
	// DefaultMaxHeldPerFlow bounds the refusals held at once for one flow; beyond it
	// the flow's refusals are answered at once.
	DefaultMaxHeldPerFlow = 1024
	// DefaultMaxHeld bounds the refusals held at once by the server (each is a parked
	// goroutine with its request and stream, some kilobytes).
	DefaultMaxHeld = 4096
)

// RefusalHoldConfig says when and how long refusals are held; zero fields take the
// defaults above.
type RefusalHoldConfig struct {
	// Hold is the longest a refusal is held, counted from when the request arrived at
	// priority and fairness (a request refused after waiting in a queue that long is
	// not held further). Within it a refusal is held for the Retry-After it will carry:
	// kube-apiserver's value for the priority level, computed as its filter computes
	// it from the level's recent refusals (one second, doubling up to 32 while the
	// level refuses at least three requests a second per second of it).
	Hold time.Duration
	// Sustain is how long a flow must have been refused, with no pause longer than
	// Gap, before its refusals are held.
	Sustain time.Duration
	// Gap is the pause in a flow's refusals, from the answer to one to the next one,
	// that ends its streak.
	Gap time.Duration
	// MaxPerFlow and MaxTotal bound the refusals held at once, for one flow and for the
	// server; beyond them refusals are answered at once.
	MaxPerFlow, MaxTotal int
	// Clock is the time source (nil = the real clock); tests give a fake one.
	Clock clock.Clock
}

// RefusalHolder is API Priority and Fairness (the Interface it wraps) with one
// protection kube-apiserver does not have: the refusals of a flow that has been refused
// continuously for a while are held, the request parked on a timer, before the filter
// answers them with 429. A client that floods with a bounded number of requests in
// flight, ignoring Retry-After, then sends one request per held refusal per hold time
// instead of one per refusal the server can write: refusing it costs the server almost
// nothing. Other flows, served requests, exempt requests and short bursts are never
// delayed. What the client sees is the same 429 (Retry-After, X-Kubernetes-PF-*
// headers, Status body), later.
type RefusalHolder struct {
	utilflowcontrol.Interface

	hold, sustain, gap  time.Duration
	maxPerFlow, maxHeld int
	clock               clock.Clock
	stop                <-chan struct{}
	// retryAfter follows the Retry-After the filter sends per level, fed the same
	// refusals.
	retryAfter utilflowcontrol.DroppedRequestsTracker

	mu        sync.Mutex
	flows     map[flowKey]*refusedFlow
	held      int
	lastSweep time.Time
	// heldTotal counts the refusals held so far by priority level.
	heldTotal map[string]float64
}

// flowKey is an APF flow: its FlowSchema and the distinguisher (user or namespace).
type flowKey struct{ schema, distinguisher string }

// refusedFlow is a flow's current streak of refusals: since when, and when its last
// refusal was (or will be, when held) answered.
type refusedFlow struct {
	since, last time.Time
	held        int
}

// HoldRefusals wraps fc so that the sustained refusals of a flow are held as
// RefusalHolder describes. Held refusals end at once when their request's context
// ends (the client went away) or stop is closed (the server stops).
func HoldRefusals(fc utilflowcontrol.Interface, cfg RefusalHoldConfig, stop <-chan struct{}) *RefusalHolder {
	h := &RefusalHolder{Interface: fc, stop: stop, retryAfter: utilflowcontrol.NewDroppedRequestsTracker(), flows: map[flowKey]*refusedFlow{}, heldTotal: map[string]float64{},
		hold: cfg.Hold, sustain: cfg.Sustain, gap: cfg.Gap, maxPerFlow: cfg.MaxPerFlow, maxHeld: cfg.MaxTotal, clock: cfg.Clock}
	if h.hold <= 0 {
		h.hold = DefaultRefusalHold
	}
	if h.sustain <= 0 {
		h.sustain = DefaultRefusalSustain
	}
	if h.gap <= 0 {
		h.gap = DefaultRefusalGap
	}
	if h.maxPerFlow <= 0 {
		h.maxPerFlow = DefaultMaxHeldPerFlow
	}
	if h.maxHeld <= 0 {
		h.maxHeld = DefaultMaxHeld
	}
	if h.clock == nil {
		h.clock = clock.RealClock{}
	}
	return h
}

// Handle is the wrapped Interface's Handle; a refused request of a flow in a sustained
// streak of refusals returns only after its hold, so that the filter writes its 429 then.
func (h *RefusalHolder) Handle(ctx context.Context, digest utilflowcontrol.RequestDigest,
	noteFn func(fs *flowcontrol.FlowSchema, pl *flowcontrol.PriorityLevelConfiguration, flowDistinguisher string),
	workEstimator func() fcrequest.WorkEstimate, queueNoteFn fq.QueueNoteFn, execFn func()) {
	r := handled{noteFn: noteFn, execFn: execFn}
	arrived := h.clock.Now()
	h.Interface.Handle(ctx, digest, r.note, workEstimator, queueNoteFn, r.exec)
	if r.executed || !r.classified || ctx.Err() != nil {
		return
	}
	h.refused(ctx, r.flow, r.level, arrived)
}

// handled records what the wrapped Handle did with one request.
type handled struct {
	noteFn     func(fs *flowcontrol.FlowSchema, pl *flowcontrol.PriorityLevelConfiguration, flowDistinguisher string)
	execFn     func()
	flow       flowKey
	level      string
	classified bool
	executed   bool
}

func (r *handled) note(fs *flowcontrol.FlowSchema, pl *flowcontrol.PriorityLevelConfiguration, distinguisher string) {
	r.flow, r.level, r.classified = flowKey{fs.Name, distinguisher}, pl.Name, true
	r.noteFn(fs, pl, distinguisher)
}

func (r *handled) exec() {
	r.executed = true
	r.execFn()
}

// refused counts a refusal of flow and, when the flow is in a sustained streak and the
// bounds allow, holds it until the hold (counted from arrived) is over, ctx ends or
// the server stops.
func (h *RefusalHolder) refused(ctx context.Context, flow flowKey, level string, arrived time.Time) {
	h.retryAfter.RecordDroppedRequest(level)
	hold := min(h.hold, time.Duration(h.retryAfter.GetRetryAfter(level))*time.Second)
	now := h.clock.Now()
	h.mu.Lock()
	h.sweepLocked(now)
	f := h.flows[flow]
	if f == nil {
		f = &refusedFlow{since: now}
		h.flows[flow] = f
	} else if now.Sub(f.last) > h.gap {
		f.since = now
	}
	wait := hold - now.Sub(arrived)
	if now.Sub(f.since) < h.sustain || wait <= 0 || f.held >= h.maxPerFlow || h.held >= h.maxHeld {
		if now.After(f.last) {
			f.last = now
		}
		h.mu.Unlock()
		return
	}
	if answered := now.Add(wait); answered.After(f.last) {
		f.last = answered
	}
	f.held++
	h.held++
	h.heldTotal[level]++
	t := h.clock.NewTimer(wait)
	h.mu.Unlock()

	select {
	case <-t.C():
	case <-ctx.Done():
	case <-h.stop:
	}
	t.Stop()

	h.mu.Lock()
	f.held--
	h.held--
	h.mu.Unlock()
}

// sweepLocked forgets, at most once per gap, the flows whose streak has ended and that
// hold nothing, so that the map stays as small as the set of flows being refused.
func (h *RefusalHolder) sweepLocked(now time.Time) {
	if now.Sub(h.lastSweep) < h.gap {
		return
	}
	h.lastSweep = now
	for k, f := range h.flows {
		if f.held == 0 && now.Sub(f.last) > h.gap {
			delete(h.flows, k)
		}
	}
}

// Held is how many refusals are being held now, in all and for the flow of FlowSchema
// schema and distinguisher.
func (h *RefusalHolder) Held(schema, distinguisher string) (total, flow int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.flows[flowKey{schema, distinguisher}]; f != nil {
		flow = f.held
	}
	return h.held, flow
}

var (
	heldTotalDesc = prometheus.NewDesc("wasmplane_apf_held_refusals_total",
		"Refusals of API Priority and Fairness held before their 429 was written, by priority level.", []string{"priority_level"}, nil)
	heldNowDesc = prometheus.NewDesc("wasmplane_apf_held_refusals",
		"Refusals of API Priority and Fairness being held now.", nil, nil)
)

// Describe is prometheus.Collector's: the holder's two metrics.
func (h *RefusalHolder) Describe(ch chan<- *prometheus.Desc) {
	ch <- heldTotalDesc
	ch <- heldNowDesc
}

// Collect is prometheus.Collector's: the refusals held so far by priority level, and
// those held now.
func (h *RefusalHolder) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for level, n := range h.heldTotal {
		ch <- prometheus.MustNewConstMetric(heldTotalDesc, prometheus.CounterValue, n, level)
	}
	ch <- prometheus.MustNewConstMetric(heldNowDesc, prometheus.GaugeValue, float64(h.held))
}
