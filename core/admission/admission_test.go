package admission_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// calls records, in order, which plugin ran in which phase. Validating plugins run on
// goroutines of their own, hence the lock.
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	c.log = append(c.log, s)
	c.mu.Unlock()
}

// sequential is the log without the dynamic validators' calls, which run beside the
// rest: what ran one after the other, in order.
func (c *calls) sequential(dynamic ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(c.log), func(s string) bool {
		return slices.ContainsFunc(dynamic, func(d string) bool { return s == "validate "+d })
	})
}

// has tells whether call is in the log.
func (c *calls) has(call string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.log, call)
}

// mutator is a fake mutating plugin: it logs each call and runs fn, if any.
type mutator struct {
	name string
	c    *calls
	fn   func(a *admission.Attributes) error
}

func (m *mutator) Name() string { return m.name }

func (m *mutator) Admit(_ context.Context, a *admission.Attributes) error {
	m.c.add("mutate " + m.name)
	if m.fn == nil {
		return nil
	}
	return m.fn(a)
}

// reinvocable is a mutator that implements ReinvocableMutator.
type reinvocable struct {
	mutator
	again bool
}

func (r *reinvocable) Reinvoke() bool { return r.again }

// validator is a fake validating plugin.
type validator struct {
	name string
	c    *calls
	err  error
}

func (v *validator) Name() string { return v.name }

func (v *validator) Validate(_ context.Context, _ *admission.Attributes) error {
	v.c.add("validate " + v.name)
	return v.err
}

// source is a fake dynamic source, counting acquisitions not yet released.
type source struct {
	ms   []admission.Mutator
	vs   []admission.Validator
	held int
}

func (s *source) Acquire(*admission.Attributes) ([]admission.Mutator, []admission.Validator, func()) {
	s.held++
	return s.ms, s.vs, func() { s.held-- }
}

// setLabel returns a mutation that sets one label.
func setLabel(k, v string) func(a *admission.Attributes) error {
	return func(a *admission.Attributes) error {
		p := a.Object.(*corev1.Pod)
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
		return nil
	}
}

// replaceWithLabel returns a mutation that replaces the object (as the WASM adapter
// does with a patched copy) by one carrying an extra label.
func replaceWithLabel(k, v string) func(a *admission.Attributes) error {
	return func(a *admission.Attributes) error {
		p := a.Object.(*corev1.Pod).DeepCopy()
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
		a.Object = p
		return nil
	}
}

func podAttributes() *admission.Attributes {
	return &admission.Attributes{Operation: admission.Create, Namespace: "ns", Name: "p",
		Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}}
}

// run drives a chain as the registry's store does: mutating admission, then the start of
// validating admission, object validation (recorded as "validation"), and the rest of
// validating admission; it stops at the first error, so the store writes nothing.
func run(ctx context.Context, c *admission.Chain, log *calls, a *admission.Attributes) error {
	if err := c.Admit(ctx, a); err != nil {
		return err
	}
	v := c.StartValidate(ctx, a)
	log.add("validation")
	return v.Finish()
}

func TestChainOrder(t *testing.T) {
	var log calls
	src := &source{
		ms: []admission.Mutator{&mutator{name: "wasm-m1", c: &log}, &mutator{name: "wasm-m2", c: &log}},
		vs: []admission.Validator{&validator{name: "wasm-v1", c: &log}},
	}
	c := &admission.Chain{
		Mutating:   []admission.Mutator{&mutator{name: "builtin-m1", c: &log}, &mutator{name: "builtin-m2", c: &log}},
		Validating: []admission.Validator{&validator{name: "builtin-v1", c: &log}},
		Sources:    []admission.Source{src},
	}
	if err := run(context.Background(), c, &log, podAttributes()); err != nil {
		t.Fatal(err)
	}
	want := []string{"mutate builtin-m1", "mutate builtin-m2", "mutate wasm-m1", "mutate wasm-m2",
		"validation", "validate builtin-v1"}
	if got := log.sequential("wasm-v1"); !slices.Equal(got, want) {
		t.Fatalf("calls\n got %q\nwant %q", got, want)
	}
	if !log.has("validate wasm-v1") {
		t.Fatal("the dynamic validator did not run")
	}
	if src.held != 0 {
		t.Fatalf("%d acquisitions of the source were not released", src.held)
	}
}

func TestNilChain(t *testing.T) {
	var c *admission.Chain
	if err := c.Admit(context.Background(), podAttributes()); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(context.Background(), podAttributes()); err != nil {
		t.Fatal(err)
	}
}

func TestChainDenial(t *testing.T) {
	denyForbidden := admission.Denied("deny", 0, "", "label \"team\" is required")
	denyInvalid := admission.Denied("deny", http.StatusUnprocessableEntity, "", "replicas too high")
	tests := []struct {
		name string
		// where places the refusing plugin: builtin-mutate, wasm-mutate, builtin-validate
		// or wasm-validate.
		where      string
		err        error
		wantCode   int32
		wantReason metav1.StatusReason
		wantCalls  []string
	}{
		{name: "built-in mutator", where: "builtin-mutate", err: denyForbidden, wantCode: 403, wantReason: metav1.StatusReasonForbidden,
			wantCalls: []string{"mutate deny"}},
		{name: "dynamic mutator", where: "wasm-mutate", err: denyInvalid, wantCode: 422, wantReason: metav1.StatusReasonInvalid,
			wantCalls: []string{"mutate builtin-m", "mutate deny"}},
		// The dynamic validators were started beside object validation: they may have
		// run, but what they said is dropped (see TestParallelValidators).
		{name: "built-in validator", where: "builtin-validate", err: denyInvalid, wantCode: 422, wantReason: metav1.StatusReasonInvalid,
			wantCalls: []string{"mutate builtin-m", "mutate wasm-m", "validation", "validate deny"}},
		{name: "dynamic validator", where: "wasm-validate", err: denyForbidden, wantCode: 403, wantReason: metav1.StatusReasonForbidden,
			wantCalls: []string{"mutate builtin-m", "mutate wasm-m", "validation", "validate builtin-v"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log calls
			deny := func(a *admission.Attributes) error { return tt.err }
			c := &admission.Chain{}
			src := &source{}
			c.Sources = []admission.Source{src}
			switch tt.where {
			case "builtin-mutate":
				c.Mutating = append(c.Mutating, &mutator{name: "deny", c: &log, fn: deny})
			}
			c.Mutating = append(c.Mutating, &mutator{name: "builtin-m", c: &log})
			if tt.where == "wasm-mutate" {
				src.ms = append(src.ms, &mutator{name: "deny", c: &log, fn: deny})
			}
			src.ms = append(src.ms, &mutator{name: "wasm-m", c: &log})
			if tt.where == "builtin-validate" {
				c.Validating = append(c.Validating, &validator{name: "deny", c: &log, err: tt.err})
			}
			c.Validating = append(c.Validating, &validator{name: "builtin-v", c: &log})
			if tt.where == "wasm-validate" {
				src.vs = append(src.vs, &validator{name: "deny", c: &log, err: tt.err})
			}
			src.vs = append(src.vs, &validator{name: "wasm-v", c: &log})

			err := run(context.Background(), c, &log, podAttributes())
			var se *apierrors.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("got %v (%T), want a StatusError", err, err)
			}
			st := se.Status()
			if st.Code != tt.wantCode || st.Reason != tt.wantReason || st.Status != metav1.StatusFailure {
				t.Fatalf("status = %d %s %s, want %d %s Failure", st.Code, st.Reason, st.Status, tt.wantCode, tt.wantReason)
			}
			if err != tt.err {
				t.Fatalf("the chain changed the plugin's error: %v", err)
			}
			dynamic := []string{"wasm-v"}
			if tt.where == "wasm-validate" {
				dynamic = append(dynamic, "deny")
			}
			if got := log.sequential(dynamic...); !slices.Equal(got, tt.wantCalls) {
				t.Fatalf("calls after a refusal\n got %q\nwant %q", got, tt.wantCalls)
			}
			if src.held != 0 {
				t.Fatalf("%d acquisitions of the source were not released", src.held)
			}
		})
	}
}

func TestDenied(t *testing.T) {
	tests := []struct {
		name       string
		code       int32
		reason     metav1.StatusReason
		message    string
		wantCode   int32
		wantReason metav1.StatusReason
		wantMsg    string
	}{
		{name: "defaults to 403 Forbidden", message: "no", wantCode: 403, wantReason: metav1.StatusReasonForbidden,
			wantMsg: `admission plugin "p" denied the request: no`},
		{name: "422 is Invalid", code: 422, message: "bad", wantCode: 422, wantReason: metav1.StatusReasonInvalid,
			wantMsg: `admission plugin "p" denied the request: bad`},
		{name: "plugin's reason kept", code: 429, reason: "Busy", wantCode: 429, wantReason: "Busy",
			wantMsg: `admission plugin "p" denied the request`},
		{name: "unknown code has no reason", code: 418, message: "teapot", wantCode: 418,
			wantMsg: `admission plugin "p" denied the request: teapot`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := admission.Denied("p", tt.code, tt.reason, tt.message)
			st := apierrors.APIStatus(nil)
			if !errors.As(err, &st) {
				t.Fatalf("%T is not an APIStatus", err)
			}
			s := st.Status()
			if s.Code != tt.wantCode || s.Reason != tt.wantReason || s.Message != tt.wantMsg {
				t.Fatalf("got %d %q %q, want %d %q %q", s.Code, s.Reason, s.Message, tt.wantCode, tt.wantReason, tt.wantMsg)
			}
		})
	}
}

func TestReinvocation(t *testing.T) {
	// Each case lists the dynamic mutators, in order, by a spec: name, then "r" if it is
	// reinvocable (IfNeeded), "n" if it implements ReinvocableMutator but answers Never,
	// "-" if it is a plain Mutator; then "c" if it changes the object in place, "R" if it
	// replaces the object, "." if it leaves it alone.
	tests := []struct {
		name  string
		specs []string
		want  []string
	}{
		{name: "earlier reinvocable mutator runs again after a later change",
			specs: []string{"a r .", "b - c"},
			want:  []string{"mutate a", "mutate b", "mutate a"}},
		{name: "a replaced object counts as a change",
			specs: []string{"a r .", "b - R"},
			want:  []string{"mutate a", "mutate b", "mutate a"}},
		{name: "nothing changed, nothing reinvoked",
			specs: []string{"a r .", "b r ."},
			want:  []string{"mutate a", "mutate b"}},
		{name: "own change does not reinvoke",
			specs: []string{"a r c", "b r ."},
			want:  []string{"mutate a", "mutate b"}},
		{name: "the last changer is not reinvoked, those before it are, once each in order",
			specs: []string{"a r .", "b r c", "c r c", "d r ."},
			want:  []string{"mutate a", "mutate b", "mutate c", "mutate d", "mutate a", "mutate b"}},
		{name: "Never is not reinvoked",
			specs: []string{"a n .", "b - c"},
			want:  []string{"mutate a", "mutate b"}},
		{name: "plain mutators are not reinvoked",
			specs: []string{"a - .", "b - c"},
			want:  []string{"mutate a", "mutate b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log calls
			src := &source{}
			for _, spec := range tt.specs {
				var name, kind, change string
				if _, err := fmt.Sscan(spec, &name, &kind, &change); err != nil {
					t.Fatal(err)
				}
				m := mutator{name: name, c: &log}
				switch change {
				case "c":
					m.fn = onlyFirst(setLabel(name, "x"))
				case "R":
					m.fn = onlyFirst(replaceWithLabel(name, "x"))
				}
				switch kind {
				case "r", "n":
					src.ms = append(src.ms, &reinvocable{mutator: m, again: kind == "r"})
				default:
					src.ms = append(src.ms, &m)
				}
			}
			// A built-in mutator runs once, first, whatever the dynamic ones do.
			c := &admission.Chain{Mutating: []admission.Mutator{&mutator{name: "builtin", c: &log}}, Sources: []admission.Source{src}}
			if err := c.Admit(context.Background(), podAttributes()); err != nil {
				t.Fatal(err)
			}
			want := append([]string{"mutate builtin"}, tt.want...)
			if !slices.Equal(log.log, want) {
				t.Fatalf("calls\n got %q\nwant %q", log.log, want)
			}
		})
	}
}

// onlyFirst makes a mutation act on its first call only, as a well-behaved
// (idempotent) plugin does when it sees its own change again.
func onlyFirst(fn func(a *admission.Attributes) error) func(a *admission.Attributes) error {
	done := false
	return func(a *admission.Attributes) error {
		if done {
			return nil
		}
		done = true
		return fn(a)
	}
}

func TestReinvocationSeesLaterChanges(t *testing.T) {
	var log calls
	var seen []string
	// "copy" copies label team into an annotation: reinvoked after "team" sets it, it
	// sees the change.
	copyTeam := &reinvocable{again: true, mutator: mutator{name: "copy", c: &log, fn: func(a *admission.Attributes) error {
		p := a.Object.(*corev1.Pod)
		seen = append(seen, p.Labels["team"])
		if team := p.Labels["team"]; team != "" {
			p.Annotations = map[string]string{"owner": team}
		}
		return nil
	}}}
	team := &mutator{name: "team", c: &log, fn: replaceWithLabel("team", "blue")}
	c := &admission.Chain{Sources: []admission.Source{&source{ms: []admission.Mutator{copyTeam, team}}}}
	a := podAttributes()
	if err := c.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if got := a.Object.(*corev1.Pod).Annotations["owner"]; got != "blue" || !slices.Equal(seen, []string{"", "blue"}) {
		t.Fatalf("owner annotation %q, copy saw team %q; want blue after a reinvocation", got, seen)
	}
}

func TestReinvocationError(t *testing.T) {
	var log calls
	boom := errors.New("boom")
	first := true
	a := &reinvocable{again: true, mutator: mutator{name: "a", c: &log, fn: func(*admission.Attributes) error {
		if first {
			first = false
			return nil
		}
		return boom
	}}}
	b := &mutator{name: "b", c: &log, fn: setLabel("b", "x")}
	src := &source{ms: []admission.Mutator{a, b}}
	c := &admission.Chain{Sources: []admission.Source{src}}
	if err := c.Admit(context.Background(), podAttributes()); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the reinvoked plugin's error", err)
	}
	if src.held != 0 {
		t.Fatalf("%d acquisitions of the source were not released", src.held)
	}
}

func TestWarnings(t *testing.T) {
	t.Run("collected from plugins in order", func(t *testing.T) {
		ctx, got := admission.WithWarnings(context.Background())
		warn := func(msg string) func(*admission.Attributes) error {
			return func(*admission.Attributes) error { admission.AddWarning(ctx, msg); return nil }
		}
		var log calls
		c := &admission.Chain{
			Mutating: []admission.Mutator{&mutator{name: "builtin", c: &log, fn: warn("from builtin")}},
			Sources:  []admission.Source{&source{ms: []admission.Mutator{&mutator{name: "wasm", c: &log, fn: warn("from wasm")}}}},
		}
		if err := c.Admit(ctx, podAttributes()); err != nil {
			t.Fatal(err)
		}
		admission.AddWarning(ctx, "") // empty warnings are dropped
		if w := got(); !slices.Equal(w, []string{"from builtin", "from wasm"}) {
			t.Fatalf("warnings %q", w)
		}
	})
	t.Run("a refused request keeps its warnings", func(t *testing.T) {
		ctx, got := admission.WithWarnings(context.Background())
		var log calls
		c := &admission.Chain{Mutating: []admission.Mutator{&mutator{name: "m", c: &log, fn: func(*admission.Attributes) error {
			admission.AddWarning(ctx, "deprecated field")
			return admission.Denied("m", 0, "", "no")
		}}}}
		if err := c.Admit(ctx, podAttributes()); err == nil {
			t.Fatal("want a refusal")
		}
		if w := got(); !slices.Equal(w, []string{"deprecated field"}) {
			t.Fatalf("warnings %q", w)
		}
	})
	t.Run("no collector", func(t *testing.T) {
		admission.AddWarning(context.Background(), "nobody listens") // must not panic
	})
	t.Run("result is a copy", func(t *testing.T) {
		ctx, got := admission.WithWarnings(context.Background())
		admission.AddWarning(ctx, "a")
		w := got()
		w[0] = "changed"
		if again := got(); again[0] != "a" {
			t.Fatalf("collected warnings changed through a returned slice: %q", again)
		}
	})
	t.Run("concurrent plugins", func(t *testing.T) {
		ctx, got := admission.WithWarnings(context.Background())
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				admission.AddWarning(ctx, fmt.Sprint(i))
			}()
		}
		wg.Wait()
		if n := len(got()); n != 50 {
			t.Fatalf("%d warnings, want 50", n)
		}
	})
}

// TestMaybeChangedByDynamic checks what the chain tells the store about dynamic
// plugins' changes, by which a custom object is pruned and coerced again or not.
func TestMaybeChangedByDynamic(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chain func(c *calls) *admission.Chain
		want  bool
	}{
		{name: "no chain ran", chain: nil, want: true},
		{name: "no dynamic plugin", chain: func(c *calls) *admission.Chain {
			return &admission.Chain{Mutating: []admission.Mutator{&mutator{name: "builtin", c: c}}}
		}, want: false},
		{name: "dynamic plugin changing nothing", chain: func(c *calls) *admission.Chain {
			return &admission.Chain{Sources: []admission.Source{&source{ms: []admission.Mutator{&mutator{name: "a", c: c}}}}}
		}, want: false},
		{name: "dynamic plugin changing the object in place", chain: func(c *calls) *admission.Chain {
			return &admission.Chain{Sources: []admission.Source{&source{ms: []admission.Mutator{
				&mutator{name: "a", c: c, fn: setLabel("k", "v")}, &mutator{name: "b", c: c}}}}}
		}, want: true},
		{name: "dynamic plugin replacing the object", chain: func(c *calls) *admission.Chain {
			return &admission.Chain{Sources: []admission.Source{&source{ms: []admission.Mutator{&mutator{name: "a", c: c, fn: replaceWithLabel("k", "v")}}}}}
		}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := podAttributes()
			if tc.chain != nil {
				if err := tc.chain(&calls{}).Admit(context.Background(), a); err != nil {
					t.Fatal(err)
				}
			}
			if got := a.MaybeChangedByDynamic(); got != tc.want {
				t.Errorf("MaybeChangedByDynamic() = %v, want %v", got, tc.want)
			}
		})
	}
}

// selectiveMutator is a mutator that concerns only the requests whose object carries
// label.
type selectiveMutator struct {
	reinvocable
	label string
}

func (m *selectiveMutator) Concerns(_ context.Context, a *admission.Attributes) bool {
	_, ok := a.Object.(*corev1.Pod).Labels[m.label]
	return ok
}

// A selective mutator is asked at its turn, with the object as the mutators before it
// left it: one that the request does not concern is skipped, and not reinvoked either,
// even when a later mutator changes the object.
func TestSelectiveMutators(t *testing.T) {
	tests := []struct {
		name string
		// before runs ahead of the selective mutator, after behind it.
		before, after func(a *admission.Attributes) error
		want          []string
	}{
		{"not concerned", nil, nil, []string{"mutate first", "mutate last"}},
		{"concerned at its turn", setLabel("sidecar", "yes"), nil, []string{"mutate first", "mutate selective", "mutate last"}},
		{"concerned only after a later change", nil, setLabel("sidecar", "yes"), []string{"mutate first", "mutate last"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &calls{}
			sel := &selectiveMutator{reinvocable: reinvocable{mutator: mutator{name: "selective", c: log}, again: true}, label: "sidecar"}
			c := &admission.Chain{Sources: []admission.Source{&source{ms: []admission.Mutator{
				&mutator{name: "first", c: log, fn: tt.before}, sel, &mutator{name: "last", c: log, fn: tt.after},
			}}}}
			if err := c.Admit(context.Background(), podAttributes()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(log.log, tt.want) {
				t.Fatalf("calls %v, want %v", log.log, tt.want)
			}
		})
	}
}
