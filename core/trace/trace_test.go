package trace

import (
	"context"
	"fmt"
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
