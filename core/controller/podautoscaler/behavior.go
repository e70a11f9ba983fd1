package podautoscaler

import (
	"math"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// recommendation is one past proposal of a replica count.
type recommendation struct {
	replicas int32
	at       time.Time
}

// scaleEvent is one past change of the target's replicas, positive either way.
type scaleEvent struct {
	change   int32
	at       time.Time
	outdated bool
}

// history is what the controller remembers per HPA between syncs: its recent
// recommendations (for stabilization) and scaling events (for the rate policies). It is
// memory only, as in Kubernetes: a restarted controller starts afresh.
type history struct {
	mu              sync.Mutex
	recommendations map[string][]recommendation
	ups, downs      map[string][]scaleEvent
}

func newHistory() *history {
	return &history{recommendations: map[string][]recommendation{}, ups: map[string][]scaleEvent{}, downs: map[string][]scaleEvent{}}
}

func (h *history) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.recommendations, key)
	delete(h.ups, key)
	delete(h.downs, key)
}

// recordInitial notes the current count as a first recommendation, so that a new HPA
// does not scale down at once.
func (h *history) recordInitial(key string, current int32, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recommendations[key] == nil {
		h.recommendations[key] = []recommendation{{current, now}}
	}
}

// record replaces the slot of a recommendation older than cutoff, or appends.
func (h *history) record(key string, replicas int32, now time.Time, old func(recommendation) bool) {
	recs := h.recommendations[key]
	for i, r := range recs {
		if old(r) {
			recs[i] = recommendation{replicas, now}
			return
		}
	}
	h.recommendations[key] = append(recs, recommendation{replicas, now})
}

// limit is what normalization decided and why, for the AbleToScale and ScalingLimited
// conditions.
type limit struct {
	replicas                  int32
	stabilized                bool
	stabilizeReason           string
	stabilizeMessage          string
	limitReason, limitMessage string
}

const (
	msgStabilizedDown = "recent recommendations were higher than current one, applying the highest recent recommendation"
	msgStabilizedUp   = "recent recommendations were lower than current one, applying the lowest recent recommendation"
	msgWithinRange    = "the desired count is within the acceptable range"
	msgUpLimit        = "the desired replica count is increasing faster than the maximum scale rate"
	msgDownLimit      = "the desired replica count is decreasing faster than the maximum scale rate"
	msgTooMany        = "the desired replica count is more than the maximum replica count"
	msgTooFew         = "the desired replica count is less than the minimum replica count"
)

// normalize bounds a proposal for an HPA without behavior, as Kubernetes' older
// algorithm: the highest recommendation of the downscale window, then at most twice the
// current count (at least 4), within min and max.
func (h *history) normalize(key string, current, proposed, minReplicas, maxReplicas int32, window time.Duration, now time.Time) limit {
	h.mu.Lock()
	stabilized := proposed
	cutoff := now.Add(-window)
	for _, r := range h.recommendations[key] {
		if !r.at.Before(cutoff) && r.replicas > stabilized {
			stabilized = r.replicas
		}
	}
	h.record(key, proposed, now, func(r recommendation) bool { return r.at.Before(cutoff) })
	h.mu.Unlock()
	l := limit{replicas: stabilized, stabilized: stabilized != proposed, stabilizeReason: "ScaleDownStabilized", stabilizeMessage: msgStabilizedDown}
	upLimit := max(2*current, 4)
	allowedMax, reason, msg := maxReplicas, "TooManyReplicas", msgTooMany
	if maxReplicas > upLimit {
		allowedMax, reason, msg = upLimit, "ScaleUpLimit", msgUpLimit
	}
	switch {
	case stabilized < minReplicas:
		l.replicas, l.limitReason, l.limitMessage = minReplicas, "TooFewReplicas", msgTooFew
	case stabilized > allowedMax:
		l.replicas, l.limitReason, l.limitMessage = allowedMax, reason, msg
	default:
		l.limitReason, l.limitMessage = "DesiredWithinRange", msgWithinRange
	}
	return l
}

// normalizeWithBehavior bounds a proposal by the HPA's behavior: the lowest
// recommendation of the scale-up window and the highest of the scale-down window, then
// the rate the policies allow given the changes made in their periods, within min and
// max. behavior must be defaulted (hpaconv.DefaultBehavior) and the scale-down window set.
func (h *history) normalizeWithBehavior(key string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, current, proposed, minReplicas, maxReplicas int32, now time.Time) limit {
	h.mu.Lock()
	defer h.mu.Unlock()
	upCutoff := now.Add(-time.Duration(*b.ScaleUp.StabilizationWindowSeconds) * time.Second)
	downCutoff := now.Add(-time.Duration(*b.ScaleDown.StabilizationWindowSeconds) * time.Second)
	up, down := proposed, proposed
	for _, r := range h.recommendations[key] {
		if r.at.After(upCutoff) {
			up = min(up, r.replicas)
		}
		if r.at.After(downCutoff) {
			down = max(down, r.replicas)
		}
	}
	stabilized := min(max(current, up), down)
	h.record(key, proposed, now, func(r recommendation) bool { return r.at.Before(upCutoff) && r.at.Before(downCutoff) })
	l := limit{replicas: stabilized, stabilized: stabilized != proposed, stabilizeReason: "ScaleUpStabilized", stabilizeMessage: msgStabilizedUp}
	if proposed < current {
		l.stabilizeReason, l.stabilizeMessage = "ScaleDownStabilized", msgStabilizedDown
	}
	l.limitReason, l.limitMessage = "DesiredWithinRange", msgWithinRange
	switch {
	case stabilized > current:
		upLimit := max(rateLimit(current, h.ups[key], h.downs[key], b.ScaleUp, now, true), current)
		allowed, reason, msg := maxReplicas, "TooManyReplicas", msgTooMany
		if maxReplicas > upLimit {
			allowed, reason, msg = upLimit, "ScaleUpLimit", msgUpLimit
		}
		if stabilized > allowed {
			l.replicas, l.limitReason, l.limitMessage = allowed, reason, msg
		}
	case stabilized < current:
		downLimit := min(rateLimit(current, h.ups[key], h.downs[key], b.ScaleDown, now, false), current)
		allowed, reason, msg := minReplicas, "TooFewReplicas", msgTooFew
		if minReplicas < downLimit {
			allowed, reason, msg = downLimit, "ScaleDownLimit", msgDownLimit
		}
		if stabilized < allowed {
			l.replicas, l.limitReason, l.limitMessage = allowed, reason, msg
		}
	}
	return l
}

// rateLimit is the furthest count the policies of rules allow from current in one
// direction: each policy counts from the replicas there were at the start of its period,
// and selectPolicy picks the largest (Max) or smallest (Min) change; Disabled allows none.
func rateLimit(current int32, ups, downs []scaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time, scaleUp bool) int32 {
	sel := autoscalingv2.MaxChangePolicySelect
	if rules.SelectPolicy != nil {
		sel = *rules.SelectPolicy
	}
	if sel == autoscalingv2.DisabledPolicySelect {
		return current
	}
	// The largest change is the highest count going up and the lowest going down.
	highest := (sel == autoscalingv2.MaxChangePolicySelect) == scaleUp
	result := int32(math.MaxInt32)
	if highest {
		result = math.MinInt32
	}
	for _, p := range rules.Policies {
		cutoff := now.Add(-time.Duration(p.PeriodSeconds) * time.Second)
		start := current - changeSince(ups, cutoff) + changeSince(downs, cutoff)
		var proposed int32
		switch {
		case p.Type == autoscalingv2.PodsScalingPolicy && scaleUp:
			proposed = start + p.Value
		case p.Type == autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case scaleUp:
			// Rounded up, or a small count might never grow.
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		default:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		if highest {
			result = max(result, proposed)
		} else {
			result = min(result, proposed)
		}
	}
	return result
}

func changeSince(events []scaleEvent, cutoff time.Time) int32 {
	var n int32
	for _, e := range events {
		if e.at.After(cutoff) {
			n += e.change
		}
	}
	return n
}

// recordScale remembers a change of the target for the rate policies of behavior
// (nothing without one), reusing a slot older than the direction's longest policy period.
func (h *history) recordScale(key string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, from, to int32, now time.Time) {
	if b == nil || from == to {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	events, rules, change := h.ups, b.ScaleUp, to-from
	if to < from {
		events, rules, change = h.downs, b.ScaleDown, from-to
	}
	var longest int32
	for _, p := range rules.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	cutoff := now.Add(-time.Duration(longest) * time.Second)
	list := events[key]
	for i := range list {
		if list[i].at.Before(cutoff) {
			list[i].outdated = true
		}
	}
	for i := range list {
		if list[i].outdated {
			list[i] = scaleEvent{change: change, at: now}
			return
		}
	}
	events[key] = append(list, scaleEvent{change: change, at: now})
}
