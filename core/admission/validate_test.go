package admission_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/trace"
)

// funcValidator is a validating plugin that runs fn.
type funcValidator struct {
	name string
	fn   func(ctx context.Context, a *admission.Attributes) error
}

func (v *funcValidator) Name() string { return v.name }

func (v *funcValidator) Validate(ctx context.Context, a *admission.Attributes) error {
	return v.fn(ctx, a)
}

// waitFor fails the test if ch is not closed within a deadline that no healthy run
// comes near; it never sleeps.
func waitFor(ctx context.Context, ch <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return errors.New("gave up waiting")
	}
}

// warnThen is a validator that warns msg, waits for after (if any), then returns err.
func warnThen(name, msg string, after <-chan struct{}, err error) *funcValidator {
	return &funcValidator{name: name, fn: func(ctx context.Context, _ *admission.Attributes) error {
		admission.AddWarning(ctx, msg)
		if after != nil {
			if werr := waitFor(ctx, after); werr != nil {
				return werr
			}
		}
		return err
	}}
}

// selectiveValidator is a funcValidator that concerns only the requests concerns accepts.
type selectiveValidator struct {
	funcValidator
	concerns func(a *admission.Attributes) bool
}

func (v *selectiveValidator) Concerns(_ context.Context, a *admission.Attributes) bool {
	return v.concerns(a)
}

// A validator that a request does not concern is left out of its validating phase: it
// is not called, and a validator left alone by it runs on the caller's goroutine, as a
// lone one does (before Finish nothing has run).
func TestSelectiveValidators(t *testing.T) {
	for _, concerned := range []bool{false, true} {
		t.Run(map[bool]string{false: "not concerned", true: "concerned"}[concerned], func(t *testing.T) {
			var selectiveRan, otherRan atomic.Bool
			sel := &selectiveValidator{
				funcValidator: funcValidator{name: "webhooks", fn: func(context.Context, *admission.Attributes) error { selectiveRan.Store(true); return nil }},
				concerns:      func(*admission.Attributes) bool { return concerned },
			}
			other := &funcValidator{name: "plugin", fn: func(context.Context, *admission.Attributes) error { otherRan.Store(true); return nil }}
			src := &source{vs: []admission.Validator{sel, other}}
			c := &admission.Chain{Sources: []admission.Source{src}}
			v := c.StartValidate(context.Background(), podAttributes())
			if !concerned && otherRan.Load() {
				t.Fatal("the lone validator ran before Finish, on a goroutine of its own")
			}
			if err := v.Finish(); err != nil {
				t.Fatal(err)
			}
			if selectiveRan.Load() != concerned || !otherRan.Load() {
				t.Fatalf("selective ran %v (concerned %v), other ran %v", selectiveRan.Load(), concerned, otherRan.Load())
			}
			if src.held != 0 {
				t.Fatalf("%d acquisitions not released", src.held)
			}
		})
	}
}

func TestParallelValidators(t *testing.T) {
	t.Run("dynamic validators run at the same time", func(t *testing.T) {
		// Each waits for the other to have started: run one after the other, they
		// would give up.
		a, b := make(chan struct{}), make(chan struct{})
		meet := func(name string, mine chan struct{}, other <-chan struct{}) *funcValidator {
			return &funcValidator{name: name, fn: func(ctx context.Context, _ *admission.Attributes) error {
				close(mine)
				return waitFor(ctx, other)
			}}
		}
		c := &admission.Chain{Sources: []admission.Source{&source{vs: []admission.Validator{meet("a", a, b), meet("b", b, a)}}}}
		if err := c.Validate(context.Background(), podAttributes()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("all but the first start beside the object's own validation", func(t *testing.T) {
		// The first runs in Finish, on the caller's goroutine; the others are under way
		// before it.
		var firstRan atomic.Bool
		started := make(chan struct{})
		src := &source{vs: []admission.Validator{
			&funcValidator{name: "first", fn: func(context.Context, *admission.Attributes) error { firstRan.Store(true); return nil }},
			&funcValidator{name: "second", fn: func(context.Context, *admission.Attributes) error { close(started); return nil }},
		}}
		c := &admission.Chain{Sources: []admission.Source{src}}
		v := c.StartValidate(context.Background(), podAttributes())
		// The registry's validation would run here; the second plugin is already under way.
		if err := waitFor(context.Background(), started); err != nil {
			t.Fatal("the second dynamic validator did not start before Finish")
		}
		if firstRan.Load() {
			t.Fatal("the first dynamic validator ran before Finish")
		}
		if err := v.Finish(); err != nil {
			t.Fatal(err)
		}
		if !firstRan.Load() {
			t.Fatal("Finish did not run the first dynamic validator")
		}
		if src.held != 0 {
			t.Fatalf("%d acquisitions not released", src.held)
		}
	})
	t.Run("the first refusal in the chain's order wins", func(t *testing.T) {
		// The second plugin refuses at once; the first refuses only after it.
		second := make(chan struct{})
		errFirst, errSecond := errors.New("first"), errors.New("second")
		c := &admission.Chain{Sources: []admission.Source{&source{vs: []admission.Validator{
			warnThen("v1", "w1", second, errFirst),
			&funcValidator{name: "v2", fn: func(context.Context, *admission.Attributes) error { close(second); return errSecond }},
		}}}}
		if err := c.Validate(context.Background(), podAttributes()); err != errFirst {
			t.Fatalf("got %v, want the first plugin's refusal", err)
		}
	})
	t.Run("warnings in the chain's order, up to the refusal", func(t *testing.T) {
		// v3 warns first in time, v1 last; the client sees v1's, v2's, and not v3's,
		// which comes after the refusal.
		v1go, v2go := make(chan struct{}), make(chan struct{})
		v3 := &funcValidator{name: "v3", fn: func(ctx context.Context, _ *admission.Attributes) error {
			admission.AddWarning(ctx, "w3")
			close(v2go)
			return nil
		}}
		v2 := warnThen("v2", "w2", v2go, errors.New("refused"))
		v2fn := v2.fn
		v2.fn = func(ctx context.Context, a *admission.Attributes) error {
			defer close(v1go)
			return v2fn(ctx, a)
		}
		ctx, got := admission.WithWarnings(context.Background())
		c := &admission.Chain{Sources: []admission.Source{&source{vs: []admission.Validator{warnThen("v1", "w1", v1go, nil), v2, v3}}}}
		if err := c.Validate(ctx, podAttributes()); err == nil || err.Error() != "refused" {
			t.Fatalf("got %v", err)
		}
		if w := got(); !slices.Equal(w, []string{"w1", "w2"}) {
			t.Fatalf("warnings %q, want [w1 w2]", w)
		}
	})
	t.Run("a built-in refusal drops what the dynamic ones said", func(t *testing.T) {
		ctx, got := admission.WithWarnings(context.Background())
		tr := &trace.Trace{}
		ctx = trace.With(ctx, tr)
		refused := errors.New("built-in refused")
		c := &admission.Chain{
			Validating: []admission.Validator{&funcValidator{name: "builtin", fn: func(context.Context, *admission.Attributes) error { return refused }}},
			Sources:    []admission.Source{&source{vs: []admission.Validator{warnThen("wasm", "from wasm", nil, nil)}}},
		}
		if err := c.Validate(ctx, podAttributes()); err != refused {
			t.Fatalf("got %v", err)
		}
		if w := got(); len(w) != 0 {
			t.Fatalf("warnings %q, want none", w)
		}
		for _, s := range tr.Steps() {
			if s.Step == "wasm" {
				t.Fatalf("trace has the dropped plugin's step %+v", s)
			}
		}
	})
	t.Run("trace steps in the chain's order", func(t *testing.T) {
		tr := &trace.Trace{}
		ctx := trace.With(context.Background(), tr)
		first := make(chan struct{})
		c := &admission.Chain{
			Validating: []admission.Validator{warnThen("builtin", "", nil, nil)},
			Sources: []admission.Source{&source{vs: []admission.Validator{
				warnThen("slow", "", first, nil),
				&funcValidator{name: "fast", fn: func(context.Context, *admission.Attributes) error { close(first); return nil }},
			}}},
			Final: []admission.Validator{warnThen("final", "", nil, nil)},
		}
		if err := c.Validate(ctx, podAttributes()); err != nil {
			t.Fatal(err)
		}
		var steps []string
		for _, s := range tr.Steps() {
			steps = append(steps, s.Step+" "+s.Result)
		}
		want := []string{"builtin validate: allowed", "slow validate: allowed", "fast validate: allowed", "final validate: allowed"}
		if !slices.Equal(steps, want) {
			t.Fatalf("steps %q, want %q", steps, want)
		}
	})
	t.Run("final validators run last, and not after a refusal", func(t *testing.T) {
		var finalRan atomic.Bool
		final := &funcValidator{name: "quota", fn: func(context.Context, *admission.Attributes) error { finalRan.Store(true); return nil }}
		var dynamicDone atomic.Bool
		ok := &funcValidator{name: "ok", fn: func(context.Context, *admission.Attributes) error { dynamicDone.Store(true); return nil }}
		c := &admission.Chain{Sources: []admission.Source{&source{vs: []admission.Validator{ok}}},
			Final: []admission.Validator{&funcValidator{name: "quota", fn: func(context.Context, *admission.Attributes) error {
				if !dynamicDone.Load() {
					return errors.New("final validator ran before the dynamic one finished")
				}
				return nil
			}}}}
		if err := c.Validate(context.Background(), podAttributes()); err != nil {
			t.Fatal(err)
		}
		c = &admission.Chain{Sources: []admission.Source{&source{vs: []admission.Validator{warnThen("deny", "", nil, errors.New("no"))}}},
			Final: []admission.Validator{final}}
		if err := c.Validate(context.Background(), podAttributes()); err == nil {
			t.Fatal("want the refusal")
		}
		if finalRan.Load() {
			t.Fatal("the final validator ran after a refusal")
		}
	})
	t.Run("abandon cancels and waits", func(t *testing.T) {
		var returned, firstRan atomic.Bool
		src := &source{vs: []admission.Validator{
			&funcValidator{name: "first", fn: func(context.Context, *admission.Attributes) error { firstRan.Store(true); return nil }},
			&funcValidator{name: "stuck", fn: func(ctx context.Context, _ *admission.Attributes) error {
				defer returned.Store(true)
				<-ctx.Done()
				return ctx.Err()
			}},
		}}
		c := &admission.Chain{Sources: []admission.Source{src}}
		c.StartValidate(context.Background(), podAttributes()).Abandon()
		if !returned.Load() {
			t.Fatal("Abandon returned before the plugin did")
		}
		if firstRan.Load() {
			t.Fatal("an abandoned phase ran the first dynamic validator")
		}
		if src.held != 0 {
			t.Fatalf("%d acquisitions not released", src.held)
		}
	})
	t.Run("a lone dynamic validator reports in the chain's order", func(t *testing.T) {
		// It runs without a phase of its own (no memo, no cancellable context): what it
		// says still comes after the built-in validators and before the final ones.
		tr := &trace.Trace{}
		ctx, got := admission.WithWarnings(trace.With(context.Background(), tr))
		var shared, finalRan atomic.Bool
		lone := &funcValidator{name: "lone", fn: func(ctx context.Context, a *admission.Attributes) error {
			admission.AddWarning(ctx, "from lone")
			_, _ = a.Shared("k", func() (any, error) { shared.Store(!a.Memoizing()); return nil, nil })
			return nil
		}}
		src := &source{vs: []admission.Validator{lone}}
		c := &admission.Chain{
			Validating: []admission.Validator{warnThen("builtin", "from builtin", nil, nil)},
			Sources:    []admission.Source{src},
			Final:      []admission.Validator{&funcValidator{name: "final", fn: func(context.Context, *admission.Attributes) error { finalRan.Store(true); return nil }}},
		}
		if err := c.Validate(ctx, podAttributes()); err != nil {
			t.Fatal(err)
		}
		if w := got(); !slices.Equal(w, []string{"from builtin", "from lone"}) {
			t.Fatalf("warnings %q", w)
		}
		var steps []string
		for _, s := range tr.Steps() {
			steps = append(steps, s.Step+" "+s.Result)
		}
		if want := []string{"builtin validate: allowed", "lone validate: allowed", "final validate: allowed"}; !slices.Equal(steps, want) {
			t.Fatalf("steps %q, want %q", steps, want)
		}
		if !shared.Load() || !finalRan.Load() || src.held != 0 {
			t.Fatalf("computed without a memo %v, final ran %v, %d acquisitions held", shared.Load(), finalRan.Load(), src.held)
		}
		// Refused, its warning and step are kept and the final validators do not run.
		finalRan.Store(false)
		src.vs = []admission.Validator{warnThen("deny", "from deny", nil, errors.New("no"))}
		tr = &trace.Trace{}
		ctx, got = admission.WithWarnings(trace.With(context.Background(), tr))
		if err := c.Validate(ctx, podAttributes()); err == nil || err.Error() != "no" {
			t.Fatalf("got %v, want the refusal", err)
		}
		if w := got(); !slices.Equal(w, []string{"from builtin", "from deny"}) || finalRan.Load() {
			t.Fatalf("warnings %q, final ran %v", w, finalRan.Load())
		}
		if steps := tr.Steps(); len(steps) != 2 || steps[1].Step != "deny" || steps[1].Result != "validate: denied" {
			t.Fatalf("steps %+v", steps)
		}
		// Abandoned, it never runs.
		var ran atomic.Bool
		src.vs = []admission.Validator{&funcValidator{name: "x", fn: func(context.Context, *admission.Attributes) error { ran.Store(true); return nil }}}
		c.StartValidate(context.Background(), podAttributes()).Abandon()
		if ran.Load() || src.held != 0 {
			t.Fatalf("abandoned: ran %v, %d acquisitions held", ran.Load(), src.held)
		}
	})
	t.Run("no chain", func(t *testing.T) {
		var v *admission.Validation
		if err := v.Finish(); err != nil {
			t.Fatal(err)
		}
		v.Abandon()
	})
}

func TestSharedOncePerPhase(t *testing.T) {
	var computed atomic.Int32
	type key struct{}
	shared := func(a *admission.Attributes) error {
		v, err := a.Shared(key{}, func() (any, error) { computed.Add(1); return "encoded", nil })
		if err != nil || v != "encoded" {
			return errors.New("bad shared value")
		}
		return nil
	}
	var vs []admission.Validator
	for range 8 {
		vs = append(vs, &funcValidator{name: "v", fn: func(_ context.Context, a *admission.Attributes) error { return shared(a) }})
	}
	c := &admission.Chain{Sources: []admission.Source{&source{vs: vs}}}
	a := podAttributes()
	if err := c.Validate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if n := computed.Load(); n != 1 {
		t.Fatalf("computed %d times by 8 plugins at once, want 1", n)
	}
	// Outside a phase nothing tells when the object changes: computed every time.
	_ = shared(a)
	_ = shared(a)
	if n := computed.Load(); n != 3 {
		t.Fatalf("computed %d times in all, want 3", n)
	}
}
