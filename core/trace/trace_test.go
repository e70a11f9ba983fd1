package trace

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestStoreKeepsTheNewestAndBoundsRecords(t *testing.T) {
	s := NewStore(3)
	for i := range 5 {
		s.Begin(fmt.Sprintf("pods/ns/p%d", i), fmt.Sprint(i), []Step{{Component: "storage"}})
	}
	if s.Len() != 3 {
		t.Fatalf("kept %d records, want 3", s.Len())
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := s.Get(fmt.Sprintf("pods/ns/p%d", i)); ok != want {
			t.Errorf("p%d kept = %v, want %v", i, ok, want)
		}
	}
	tests := []struct {
		name  string
		uid   string
		steps int
	}{
		{"same uid appends", "4", 2},
		{"another uid (recreated pod) is ignored", "old", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.Append("pods/ns/p4", tc.uid, Step{Component: "binding"})
			r, _ := s.Get("pods/ns/p4")
			if len(r.Steps) != tc.steps {
				t.Fatalf("%d steps, want %d", len(r.Steps), tc.steps)
			}
		})
	}
	for range 2 * maxSteps {
		s.Append("pods/ns/p4", "4", Step{Component: "kubelet"})
	}
	if r, _ := s.Get("pods/ns/p4"); len(r.Steps) != maxSteps {
		t.Fatalf("a record grew to %d steps, want at most %d", len(r.Steps), maxSteps)
	}
}

func TestTraceInContext(t *testing.T) {
	From(context.Background()).Add(time.Now(), "x", "y", "z", "") // no trace: a no-op, no panic
	tr := &Trace{}
	ctx := With(context.Background(), tr)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() { From(ctx).Add(time.Now(), "admission", fmt.Sprint(i), "allowed", "") })
	}
	wg.Wait()
	if n := len(tr.Steps()); n != 10 {
		t.Fatalf("%d steps, want 10", n)
	}
}

// BenchmarkPodJourney is what tracing costs one pod: a request trace with the steps a
// create records, its record in a full ring, and the binding's append.
func BenchmarkPodJourney(b *testing.B) {
	s := NewStore(DefaultSize)
	i := 0
	for b.Loop() {
		tr := &Trace{}
		now := time.Now()
		for range 10 { // authentication, authorization, admission plugins
			tr.Add(now, "admission", "plugin", "allowed", "")
		}
		key := "pods/ns/p" + fmt.Sprint(i%(2*DefaultSize))
		uid := fmt.Sprint(i)
		s.Begin(key, uid, tr.Steps())
		s.Append(key, uid, Step{Component: "scheduler"}, Step{Component: "binding"})
		i++
	}
}

// BenchmarkFullRing reports the memory a full ring holds: DefaultSize pods, each with
// the dozen steps a created, scheduled and started pod records (details as long as a
// scheduler summary's).
func BenchmarkFullRing(b *testing.B) {
	detail := "profile default-scheduler: 4812/5000 nodes feasible; NodeResourcesFit rejected 188 (Insufficient cpu); top node-17 (score 182)"
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := NewStore(DefaultSize)
		for i := range DefaultSize {
			steps := make([]Step, 0, 12)
			for j := range 12 {
				steps = append(steps, Step{Time: time.Now(), Duration: time.Microsecond, Component: "admission", Step: fmt.Sprint("step-", j), Result: "allowed", Detail: fmt.Sprint(detail, i)})
			}
			s.Begin(fmt.Sprint("pods/ns/p", i), fmt.Sprint(i), steps)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-held")
		runtime.KeepAlive(s)
	}
}

func TestFoldCountsRepeatedAttempts(t *testing.T) {
	s := NewStore(0)
	t0 := time.Unix(1000, 0)
	s.Begin("pods/ns/p", "u", []Step{{Time: t0, Component: "storage", Step: "create"}})
	attempt := func(sec int, detail string) Step {
		return Step{Time: t0.Add(time.Duration(sec) * time.Second), Duration: time.Millisecond, Component: "scheduler", Step: "schedule", Result: "unschedulable", Detail: detail}
	}
	for i := range 200 {
		s.Fold("pods/ns/p", "u", attempt(i+1, "0/3 nodes: NodeAffinity 3"))
	}
	s.Fold("pods/ns/p", "other-uid", attempt(500, "ignored"))
	s.Fold("pods/ns/p", "u", attempt(600, "0/4 nodes: NodeAffinity 4"))
	r, _ := s.Get("pods/ns/p")
	if len(r.Steps) != 3 {
		t.Fatalf("%d steps, want storage, 200 folded attempts, one new outcome: %+v", len(r.Steps), r.Steps)
	}
	got := r.Steps[1]
	if got.Count != 200 || !got.Time.Equal(t0.Add(time.Second)) || !got.Last.Equal(t0.Add(200*time.Second)) {
		t.Fatalf("folded step %+v, want count 200 from +1s to +200s", got)
	}
	if r.Steps[2].Count != 0 || r.Steps[2].Detail != "0/4 nodes: NodeAffinity 4" {
		t.Fatalf("a new outcome was folded into the old one: %+v", r.Steps[2])
	}
}

// TestStepsReportedBeforeBegin: a watcher can act on an object (the scheduler reports a
// failed attempt) before the create that wrote it has called Begin. Those steps are kept
// after the create's own, whether they were appended or folded; a report for another
// object under the same key is still ignored, and a recreated object starts afresh.
func TestStepsReportedBeforeBegin(t *testing.T) {
	cases := []struct {
		name   string
		report func(s *Store)
		want   []string
	}{
		{"fold", func(s *Store) {
			s.Fold("pods/ns/p", "u1", Step{Component: "scheduler", Result: "unschedulable"})
			s.Fold("pods/ns/p", "u1", Step{Component: "scheduler", Result: "unschedulable"})
		}, []string{"storage", "scheduler"}},
		{"append", func(s *Store) { s.Append("pods/ns/p", "u1", Step{Component: "binding"}) }, []string{"storage", "binding"}},
		{"another object's report", func(s *Store) {
			s.Begin("pods/ns/p", "u0", []Step{{Component: "old"}})
			s.Fold("pods/ns/p", "u1", Step{Component: "scheduler"})
		}, []string{"storage"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(8)
			tc.report(s)
			s.Begin("pods/ns/p", "u1", []Step{{Component: "storage"}})
			r, ok := s.Get("pods/ns/p")
			if !ok || r.UID != "u1" {
				t.Fatalf("record %+v, %v", r, ok)
			}
			var got []string
			for _, st := range r.Steps {
				got = append(got, st.Component)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("steps %v, want %v", got, tc.want)
			}
			if tc.name == "fold" && r.Steps[1].Count != 2 {
				t.Errorf("two identical early reports counted %d, want 2", r.Steps[1].Count)
			}
		})
	}
	// A recreated object (new uid) replaces the record, early steps or not.
	s := NewStore(8)
	s.Begin("pods/ns/p", "u1", []Step{{Component: "storage"}})
	s.Begin("pods/ns/p", "u2", []Step{{Component: "storage2"}})
	if r, _ := s.Get("pods/ns/p"); r.UID != "u2" || len(r.Steps) != 1 || r.Steps[0].Component != "storage2" {
		t.Fatalf("recreated object's record %+v", r)
	}
	if s.Len() != 1 {
		t.Fatalf("%d records for one key", s.Len())
	}
}

// TestMergeOrdersWholeSecondStatusTimes: the kubelet's steps come from the pod's status in
// whole seconds; one that truncates to before the request's authentication must still
// come after the binding it followed.
func TestMergeOrdersWholeSecondStatusTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	recorded := []Step{
		{Time: ms(421), Duration: time.Millisecond, Component: "authentication"},
		{Time: ms(430), Duration: 2 * time.Millisecond, Component: "storage"},
		{Time: ms(450), Duration: 3 * time.Millisecond, Component: "binding"},
	}
	for _, tc := range []struct {
		name   string
		coarse []Step
		floor  time.Time
		want   []string
	}{
		{"truncated before the request", []Step{{Time: t0, Component: "kubelet", Step: "init containers"}, {Time: t0, Component: "kubelet", Step: "pod"}},
			ms(453), []string{"authentication", "storage", "binding", "kubelet/init containers", "kubelet/pod"}},
		{"later seconds keep their place", []Step{{Time: t0.Add(2 * time.Second), Component: "kubelet", Step: "pod"}, {Time: t0, Component: "kubelet", Step: "sandbox"}},
			ms(453), []string{"authentication", "storage", "binding", "kubelet/sandbox", "kubelet/pod"}},
		{"no floor", []Step{{Time: t0, Component: "kubelet", Step: "pod"}}, time.Time{},
			[]string{"kubelet/pod", "authentication", "storage", "binding"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Merge(recorded, tc.coarse, tc.floor)
			var names []string
			for i, s := range got {
				n := s.Component
				if s.Step != "" {
					n += "/" + s.Step
				}
				names = append(names, n)
				if i > 0 && s.Time.Before(got[i-1].Time) {
					t.Errorf("step %d (%s) at %v is before step %d at %v", i, n, s.Time, i-1, got[i-1].Time)
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(tc.want) {
				t.Errorf("order = %v, want %v", names, tc.want)
			}
		})
	}
}
