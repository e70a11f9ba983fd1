package podautoscaler

import (
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/api/hpaconv"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"
)

// past is a recommendation or a scale event some seconds before t0.
type past struct {
	ago      time.Duration
	replicas int32
}

func TestNormalize(t *testing.T) {
	rules := func(window int32, sel autoscalingv2.ScalingPolicySelect, policies ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(window), SelectPolicy: ptr.To(sel), Policies: policies}
	}
	pods := func(n, period int32) autoscalingv2.HPAScalingPolicy {
		return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: n, PeriodSeconds: period}
	}
	percent := func(n, period int32) autoscalingv2.HPAScalingPolicy {
		return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: n, PeriodSeconds: period}
	}
	defaulted := func(b *autoscalingv2.HorizontalPodAutoscalerBehavior) *autoscalingv2.HorizontalPodAutoscalerBehavior {
		hpaconv.DefaultBehavior(b)
		if b.ScaleDown.StabilizationWindowSeconds == nil {
			b.ScaleDown.StabilizationWindowSeconds = ptr.To[int32](300)
		}
		return b
	}
	cases := []struct {
		name                     string
		behavior                 *autoscalingv2.HorizontalPodAutoscalerBehavior
		recommendations          []past
		ups, downs               []past
		current, proposed        int32
		minReplicas, maxReplicas int32
		want                     int32
		wantStabilized           string
		wantLimit                string
	}{
		{name: "no behavior: within range", current: 3, proposed: 5, minReplicas: 1, maxReplicas: 10, want: 5, wantLimit: "DesiredWithinRange"},
		{name: "no behavior: at most twice the replicas", current: 3, proposed: 9, minReplicas: 1, maxReplicas: 10, want: 6, wantLimit: "ScaleUpLimit"},
		{name: "no behavior: at most max", current: 3, proposed: 9, minReplicas: 1, maxReplicas: 5, want: 5, wantLimit: "TooManyReplicas"},
		{name: "no behavior: at least min", current: 3, proposed: 1, minReplicas: 2, maxReplicas: 5, want: 2, wantLimit: "TooFewReplicas"},
		{name: "no behavior: the highest recommendation of 5 minutes", current: 5, proposed: 2, minReplicas: 1, maxReplicas: 10,
			recommendations: []past{{4 * time.Minute, 5}, {6 * time.Minute, 8}}, want: 5, wantStabilized: "ScaleDownStabilized", wantLimit: "DesiredWithinRange"},
		{name: "default behavior: scale-down window", behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{}),
			current: 5, proposed: 2, minReplicas: 1, maxReplicas: 10, recommendations: []past{{time.Minute, 4}}, want: 4, wantStabilized: "ScaleDownStabilized", wantLimit: "DesiredWithinRange"},
		{name: "default behavior: 4 pods or 100% per 15 s up", behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{}),
			current: 1, proposed: 20, minReplicas: 1, maxReplicas: 30, want: 5, wantLimit: "ScaleUpLimit"},
		{name: "default behavior: 100% of 10 is more than 4 pods", behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{}),
			current: 10, proposed: 50, minReplicas: 1, maxReplicas: 30, want: 20, wantLimit: "ScaleUpLimit"},
		{name: "scale-up stabilization keeps the lowest recent recommendation",
			behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: rules(60, autoscalingv2.MaxChangePolicySelect, pods(10, 15))}),
			current:  3, proposed: 8, minReplicas: 1, maxReplicas: 10, recommendations: []past{{30 * time.Second, 4}, {90 * time.Second, 3}},
			want: 4, wantStabilized: "ScaleUpStabilized", wantLimit: "DesiredWithinRange"},
		{name: "scale down by at most 50% a minute",
			behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: rules(0, autoscalingv2.MaxChangePolicySelect, percent(50, 60))}),
			current:  10, proposed: 1, minReplicas: 1, maxReplicas: 10, want: 5, wantLimit: "ScaleDownLimit"},
		{name: "a scale-down earlier in the period counts",
			behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: rules(0, autoscalingv2.MaxChangePolicySelect, pods(2, 60))}),
			current:  8, proposed: 1, minReplicas: 1, maxReplicas: 10, downs: []past{{30 * time.Second, 2}}, want: 8, wantLimit: "ScaleDownLimit"},
		{name: "a scale-up earlier in the period counts",
			behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: rules(0, autoscalingv2.MaxChangePolicySelect, pods(3, 60))}),
			current:  5, proposed: 9, minReplicas: 1, maxReplicas: 10, ups: []past{{30 * time.Second, 2}, {2 * time.Minute, 5}}, want: 6, wantLimit: "ScaleUpLimit"},
		{name: "selectPolicy Min takes the smaller change",
			behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: rules(0, autoscalingv2.MinChangePolicySelect, pods(4, 15), percent(100, 15))}),
			current:  2, proposed: 9, minReplicas: 1, maxReplicas: 10, want: 4, wantLimit: "ScaleUpLimit"},
		{name: "selectPolicy Disabled does not scale",
			behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: rules(0, autoscalingv2.DisabledPolicySelect, pods(4, 15))}),
			current:  6, proposed: 2, minReplicas: 1, maxReplicas: 10, want: 6, wantLimit: "ScaleDownLimit"},
		{name: "behavior: max below the rate limit",
			behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{}),
			current:  4, proposed: 12, minReplicas: 1, maxReplicas: 6, want: 6, wantLimit: "TooManyReplicas"},
		{name: "behavior: min above the rate limit",
			behavior: defaulted(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: rules(0, autoscalingv2.MaxChangePolicySelect, percent(100, 15))}),
			current:  4, proposed: 1, minReplicas: 2, maxReplicas: 6, want: 2, wantLimit: "TooFewReplicas"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory()
			const key = "default/web"
			for _, r := range tc.recommendations {
				h.recommendations[key] = append(h.recommendations[key], recommendation{r.replicas, t0.Add(-r.ago)})
			}
			for _, e := range tc.ups {
				h.ups[key] = append(h.ups[key], scaleEvent{change: e.replicas, at: t0.Add(-e.ago)})
			}
			for _, e := range tc.downs {
				h.downs[key] = append(h.downs[key], scaleEvent{change: e.replicas, at: t0.Add(-e.ago)})
			}
			var l limit
			if tc.behavior == nil {
				l = h.normalize(key, tc.current, tc.proposed, tc.minReplicas, tc.maxReplicas, DefaultDownscaleStabilization, t0)
			} else {
				l = h.normalizeWithBehavior(key, tc.behavior, tc.current, tc.proposed, tc.minReplicas, tc.maxReplicas, t0)
			}
			stabilized := ""
			if l.stabilized {
				stabilized = l.stabilizeReason
			}
			if l.replicas != tc.want || stabilized != tc.wantStabilized || l.limitReason != tc.wantLimit {
				t.Errorf("got %d (stabilized %q, limit %q), want %d (%q, %q)", l.replicas, stabilized, l.limitReason, tc.want, tc.wantStabilized, tc.wantLimit)
			}
		})
	}
}

// Scale events older than the longest policy period are replaced, not accumulated.
func TestRecordScaleReusesOutdatedSlots(t *testing.T) {
	h := newHistory()
	b := &autoscalingv2.HorizontalPodAutoscalerBehavior{}
	hpaconv.DefaultBehavior(b)
	for i := range 10 {
		h.recordScale("k", b, 1, 2, t0.Add(time.Duration(i)*time.Minute))
	}
	if n := len(h.ups["k"]); n != 1 {
		t.Errorf("%d scale-up events kept, want 1", n)
	}
	h.recordScale("k", b, 4, 2, t0)
	if len(h.downs["k"]) != 1 || h.downs["k"][0].change != 2 {
		t.Errorf("scale-down events: %+v", h.downs["k"])
	}
}
