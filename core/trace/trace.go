// Package trace records one object's journey through the seed's flow — who authenticated
// the request and how, each admission plugin's decision, initializers, the scheduler's
// summary, the binding — so `wasmplane trace pod NAME` can show it in one place. Traces
// are summaries kept in a bounded in-memory ring per API server, never in etcd.
package trace

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Step is one thing that happened to an object.
type Step struct {
	// Time the step started and how long it took.
	Time     time.Time     `json:"time"`
	Duration time.Duration `json:"durationNanos,omitempty"`
	// Component did it: authentication, admission, storage, initializer, scheduler,
	// binding, kubelet…
	Component string `json:"component"`
	// Step names it (e.g. the plugin), Result says how it ended (allowed, denied,
	// patched, ok…), Detail is free text.
	Step   string `json:"step"`
	Result string `json:"result,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Count is how many times the step happened when repeats were folded into it (Fold):
	// a pod the scheduler retries keeps one row, not one per attempt. 0 means once.
	Count int `json:"count,omitempty"`
	// Last is when the last folded repeat started (zero when Count ≤ 1).
	Last time.Time `json:"last,omitzero"`
}

// Trace collects the steps of one request; it is safe for concurrent use.
type Trace struct {
	mu    sync.Mutex
	steps []Step
}

// Add appends a step that started at start and ends now.
func (t *Trace) Add(start time.Time, component, step, result, detail string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.steps = append(t.steps, Step{Time: start, Duration: time.Since(start), Component: component, Step: step, Result: result, Detail: detail})
	t.mu.Unlock()
}

// Append adds steps recorded elsewhere (a plugin that ran on its own goroutine).
func (t *Trace) Append(steps ...Step) {
	if t == nil || len(steps) == 0 {
		return
	}
	t.mu.Lock()
	t.steps = append(t.steps, steps...)
	t.mu.Unlock()
}

// Steps returns a copy of the steps so far.
func (t *Trace) Steps() []Step {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Step(nil), t.steps...)
}

type key struct{}

// With returns ctx carrying t.
func With(ctx context.Context, t *Trace) context.Context { return context.WithValue(ctx, key{}, t) }

// From returns the trace of ctx, or nil (Add on nil does nothing, so callers need no check).
func From(ctx context.Context) *Trace {
	t, _ := ctx.Value(key{}).(*Trace)
	return t
}

// Record is the trace of one object as stored in the ring.
type Record struct {
	// UID of the object; a recreated object with the same name starts a new record.
	UID   string `json:"uid"`
	Steps []Step `json:"steps"`
}

// Store keeps the records of the most recent objects, bounded in count.
type Store struct {
	mu    sync.Mutex
	max   int
	recs  map[string]*Record
	order []string // insertion order of keys, oldest first
}

// DefaultSize is how many objects' traces a Store keeps by default.
const DefaultSize = 4096

// maxSteps bounds one record (a pod updated forever must not grow without end).
const maxSteps = 64

// NewStore returns a store keeping the last max objects (0 = DefaultSize).
func NewStore(max int) *Store {
	if max <= 0 {
		max = DefaultSize
	}
	return &Store{max: max, recs: map[string]*Record{}}
}

// Begin starts the record of key (e.g. "pods/ns/name") for uid with steps, replacing an
// older object's record of the same key. Steps already reported for uid are kept after
// steps: a watcher (the scheduler) can see the object, act and report before the create
// that wrote it has recorded its own steps.
func (s *Store) Begin(key, uid string, steps []Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.recs[key]; ok && r.UID == uid {
		r.Steps = clip(append(append([]Step(nil), steps...), r.Steps...))
		return
	}
	s.put(key, &Record{UID: uid, Steps: clip(steps)})
}

// put sets key's record, dropping the oldest records past the bound. Callers hold mu.
func (s *Store) put(key string, r *Record) {
	if _, ok := s.recs[key]; !ok {
		s.order = append(s.order, key)
	}
	s.recs[key] = r
	for len(s.order) > s.max {
		delete(s.recs, s.order[0])
		s.order = s.order[1:]
	}
}

// early starts key's record for uid with a step reported before the object's own Begin
// (see Begin); it reports false when key holds another object's record. Callers hold mu.
func (s *Store) early(key, uid string) (*Record, bool) {
	r, ok := s.recs[key]
	switch {
	case !ok:
		r = &Record{UID: uid}
		s.put(key, r)
	case r.UID != uid:
		return nil, false
	}
	return r, true
}

// Append adds steps to key's record if it belongs to uid; a key without a record starts
// one for uid (steps reported before the object's own Begin, see Begin).
func (s *Store) Append(key, uid string, steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.early(key, uid)
	if !ok {
		return
	}
	r.Steps = clip(append(r.Steps, steps...))
}

// Fold adds step to key's record if it belongs to uid (starting one, as Append does), or, when the record's last step is
// the same step with the same outcome (component, step, result and detail), counts it
// there instead: a pod that fails to schedule the same way a thousand times costs one
// row, and its earlier steps are not clipped away.
func (s *Store) Fold(key, uid string, step Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.early(key, uid)
	if !ok {
		return
	}
	if n := len(r.Steps); n > 0 {
		last := &r.Steps[n-1]
		if last.Component == step.Component && last.Step == step.Step && last.Result == step.Result && last.Detail == step.Detail {
			last.Count = max(last.Count, 1) + max(step.Count, 1)
			last.Last, last.Duration = step.Time, step.Duration
			return
		}
	}
	r.Steps = clip(append(r.Steps, step))
}

// Get returns a copy of key's record.
func (s *Store) Get(key string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[key]
	if !ok {
		return Record{}, false
	}
	return Record{UID: r.UID, Steps: append([]Step(nil), r.Steps...)}, true
}

// Len is the number of records kept.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

func clip(steps []Step) []Step {
	if len(steps) > maxSteps {
		return steps[len(steps)-maxSteps:]
	}
	return steps
}

// Merge puts the recorded steps and steps read from an object's status in time order.
// Status times are metav1.Times, whole seconds: a kubelet step that happened at 12:00:00.9
// reads 12:00:00 and would sort before an authentication recorded at 12:00:00.4 although
// it followed it. So a coarse step earlier than floor (the end of the last step it must
// follow, e.g. the binding) is moved to floor; coarse steps keep their relative order.
func Merge(recorded, coarse []Step, floor time.Time) []Step {
	out := make([]Step, 0, len(recorded)+len(coarse))
	out = append(out, recorded...)
	for _, s := range coarse {
		if s.Time.Before(floor) {
			s.Time = floor
		}
		out = append(out, s)
	}
	slices.SortStableFunc(out, func(a, b Step) int { return a.Time.Compare(b.Time) })
	return out
}

// End is when the step ended: its start plus its duration.
func (s Step) End() time.Time { return s.Time.Add(s.Duration) }
