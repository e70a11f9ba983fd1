package filters

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	flowcontrol "k8s.io/api/flowcontrol/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	clocktesting "k8s.io/utils/clock/testing"
)

// decidingFlowControl is the part of priority and fairness the holder depends on: it
// classifies a request by its user (FlowSchema "by-user", distinguished by user name;
// user "admin" on the exempt level) and executes or refuses it as decide says, after
// waiting queued (the fake clock stepped) as long as queued says.
type decidingFlowControl struct {
	utilflowcontrol.Interface
	clock  *clocktesting.FakeClock
	decide func(userName string) (execute bool, queued time.Duration)
}

func (d *decidingFlowControl) Handle(_ context.Context, digest utilflowcontrol.RequestDigest,
	noteFn func(*flowcontrol.FlowSchema, *flowcontrol.PriorityLevelConfiguration, string),
	_ func() fcrequest.WorkEstimate, _ fq.QueueNoteFn, execFn func()) {
	name := digest.User.GetName()
	pl := &flowcontrol.PriorityLevelConfiguration{Spec: flowcontrol.PriorityLevelConfigurationSpec{Type: flowcontrol.PriorityLevelEnablementLimited}}
	if name == "admin" {
		pl.Spec.Type = flowcontrol.PriorityLevelEnablementExempt
	}
	noteFn(&flowcontrol.FlowSchema{}, pl, name)
	execute, queued := d.decide(name)
	if name == "admin" {
		execute = true
	}
	if queued > 0 {
		d.clock.Step(queued)
	}
	if execute {
		execFn()
	}
}

// request is one request of a scenario: at (after the previous one), from user.
type request struct {
	after time.Duration
	user  string
	// held says whether the request must be held (its Handle still running after the
	// holder has decided).
	held bool
}

func TestRefusalHold(t *testing.T) {
	refuse := func(name string) (bool, time.Duration) { return name == "served", 0 }
	tests := []struct {
		name     string
		cfg      RefusalHoldConfig
		decide   func(string) (bool, time.Duration)
		requests []request
	}{{
		name:   "a burst is refused at once",
		decide: refuse,
		requests: []request{{user: "tenant"}, {after: 100 * time.Millisecond, user: "tenant"},
			{after: 100 * time.Millisecond, user: "tenant"}, {after: 100 * time.Millisecond, user: "tenant"}},
	}, {
		name:   "a sustained refused flow is held",
		decide: refuse,
		requests: []request{{user: "tenant"}, {after: 600 * time.Millisecond, user: "tenant"},
			{after: 600 * time.Millisecond, user: "tenant", held: true}, {user: "tenant", held: true}},
	}, {
		name:   "a pause longer than the gap ends the streak",
		decide: refuse,
		requests: []request{{user: "tenant"}, {after: 1500 * time.Millisecond, user: "tenant", held: true},
			{after: 3500 * time.Millisecond, user: "tenant"}, {after: 500 * time.Millisecond, user: "tenant"}},
	}, {
		name:   "other flows, served and exempt requests are not delayed",
		decide: refuse,
		requests: []request{{user: "tenant"}, {after: 1500 * time.Millisecond, user: "tenant", held: true},
			{user: "other"}, {user: "served"}, {user: "admin"}, {user: "tenant", held: true}},
	}, {
		name: "the bound per flow and the server's bound",
		cfg:  RefusalHoldConfig{MaxPerFlow: 2, MaxTotal: 3},
		decide: func(string) (bool, time.Duration) {
			return false, 0
		},
		requests: []request{{user: "a"}, {user: "b"}, {after: 1500 * time.Millisecond, user: "a", held: true},
			{user: "a", held: true}, {user: "a"}, {user: "b", held: true}, {user: "b"}},
	}, {
		name: "a refusal after a queue wait as long as the hold is not held further",
		decide: func(string) (bool, time.Duration) {
			return false, 1500 * time.Millisecond
		},
		requests: []request{{user: "tenant"}, {user: "tenant"}, {user: "tenant"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(time.Unix(1e9, 0))
			tt.cfg.Clock = clock
			stop := make(chan struct{})
			defer close(stop)
			h := HoldRefusals(&decidingFlowControl{clock: clock, decide: tt.decide}, tt.cfg, stop)
			var pending []chan struct{}
			held := 0
			for i, r := range tt.requests {
				clock.Step(r.after)
				done := handle(h, context.Background(), r.user)
				if r.held {
					held++
					waitHeld(t, h, held)
					select {
					case <-done:
						t.Fatalf("request %d (%s) was answered, want it held", i, r.user)
					default:
					}
					pending = append(pending, done)
					continue
				}
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("request %d (%s) was held, want it answered at once", i, r.user)
				}
			}
			// The holds end with the hold time.
			clock.Step(DefaultRefusalHold)
			for i, done := range pending {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("held request %d still held after the hold", i)
				}
			}
			if total, _ := h.Held("", ""); total != 0 {
				t.Fatalf("%d still held at the end", total)
			}
			if got := heldMetric(t, h); got != float64(held) {
				t.Fatalf("wasmplane_apf_held_refusals_total says %v held, want %d", got, held)
			}
		})
	}
}

// heldMetric is the sum of h's wasmplane_apf_held_refusals_total over the levels,
// gathered as /metrics gathers it.
func heldMetric(t *testing.T, h *RefusalHolder) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == "wasmplane_apf_held_refusals_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestRefusalHoldEnds checks that a held refusal ends at once, without the clock moving,
// when its client goes away or the server stops.
func TestRefusalHoldEnds(t *testing.T) {
	for _, end := range []string{"client gone", "server stopping"} {
		t.Run(end, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(time.Unix(1e9, 0))
			stop := make(chan struct{})
			h := HoldRefusals(&decidingFlowControl{clock: clock, decide: func(string) (bool, time.Duration) { return false, 0 }},
				RefusalHoldConfig{Clock: clock}, stop)
			<-handle(h, context.Background(), "tenant")
			clock.Step(1500 * time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := handle(h, ctx, "tenant")
			waitHeld(t, h, 1)
			if end == "client gone" {
				cancel()
			} else {
				close(stop)
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the held refusal did not end")
			}
			if total, _ := h.Held("", ""); total != 0 {
				t.Fatalf("%d still held", total)
			}
			if end == "client gone" {
				close(stop)
			}
		})
	}
}

// handle runs one request of user through h; the channel closes when Handle returns.
func handle(h *RefusalHolder, ctx context.Context, userName string) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Handle(ctx, utilflowcontrol.RequestDigest{User: &user.DefaultInfo{Name: userName}},
			func(*flowcontrol.FlowSchema, *flowcontrol.PriorityLevelConfiguration, string) {},
			nil, nil, func() {})
	}()
	return done
}

// waitHeld waits until want refusals are held.
func waitHeld(t *testing.T, h *RefusalHolder, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if total, _ := h.Held("", ""); total == want {
			return
		}
		if time.Now().After(deadline) {
			total, _ := h.Held("", "")
			t.Fatalf("%d refusals held, want %d", total, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRefusalHoldFollowsRetryAfter checks that a refusal is held for the Retry-After
// kube-apiserver's filter computes for the level (it doubles once a level has refused
// three requests or more in the last second), within the configured longest hold.
func TestRefusalHoldFollowsRetryAfter(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	stop := make(chan struct{})
	defer close(stop)
	h := HoldRefusals(&decidingFlowControl{clock: clock, decide: func(string) (bool, time.Duration) { return false, 0 }},
		RefusalHoldConfig{Clock: clock, Hold: 8 * time.Second}, stop)
	// The tracker counts refusals per second of the real clock: ten in one second, then
	// one in the next makes the level's Retry-After 2.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
	for range 10 {
		<-handle(h, context.Background(), "tenant")
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
	clock.Step(1500 * time.Millisecond)
	done := handle(h, context.Background(), "tenant")
	waitHeld(t, h, 1)
	clock.Step(1500 * time.Millisecond)
	if !clock.HasWaiters() {
		t.Fatal("the refusal was let go after 1.5 s; want it held for its Retry-After of 2 s")
	}
	clock.Step(time.Second)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the refusal is still held after its Retry-After")
	}
}
