package wasm

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// TestIdleStack checks the idle list's order: instances come back last in, first out,
// and an instance put back while callers wait goes to the one that has waited longest;
// a caller that gives up after an instance was handed to it passes it on.
func TestIdleStack(t *testing.T) {
	a, b, c := &instance{name: "a"}, &instance{name: "b"}, &instance{name: "c"}
	name := func(in *instance) string {
		if in == nil {
			return "none"
		}
		return in.name
	}
	tests := []struct {
		name string
		run  func(st *idleStack) []*instance // what the callers got, in order
		want []string
		left int // instances on the stack at the end
	}{
		{
			name: "last put, first out",
			run: func(st *idleStack) []*instance {
				st.put(a)
				st.put(b)
				st.put(c)
				first := st.pop()
				st.put(first) // a lone caller gets the same instance call after call
				return []*instance{first, st.pop(), st.pop(), st.pop(), st.pop()}
			},
			want: []string{"c", "c", "b", "a", "none"},
		},
		{
			name: "wait finds an instance put before it queued",
			run: func(st *idleStack) []*instance {
				st.put(a)
				w, in := st.wait()
				if w != nil {
					t.Error("queued although an instance was idle")
				}
				return []*instance{in}
			},
			want: []string{"a"},
		},
		{
			name: "waiters are served first come, first served, before the stack",
			run: func(st *idleStack) []*instance {
				w1, _ := st.wait()
				w2, _ := st.wait()
				st.put(a)
				st.put(b)
				st.put(c)
				return []*instance{<-w1, <-w2, st.pop()}
			},
			want: []string{"a", "b", "c"},
		},
		{
			name: "a waiter that gives up before a put leaves the queue",
			run: func(st *idleStack) []*instance {
				w1, _ := st.wait()
				w2, _ := st.wait()
				st.cancel(w1)
				st.put(a)
				return []*instance{<-w2}
			},
			want: []string{"a"},
		},
		{
			name: "a waiter that gives up after a put passes the instance on",
			run: func(st *idleStack) []*instance {
				w1, _ := st.wait()
				w2, _ := st.wait()
				st.put(a) // handed to w1
				st.cancel(w1)
				st.put(b)
				return []*instance{<-w2, st.pop()}
			},
			want: []string{"a", "b"},
		},
		{
			name: "an instance passed on with nobody waiting goes back on the stack",
			run: func(st *idleStack) []*instance {
				w, _ := st.wait()
				st.put(a)
				st.cancel(w)
				return nil
			},
			left: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st idleStack
			var got []string
			for _, in := range tt.run(&st) {
				got = append(got, name(in))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
			if n := st.len(); n != tt.left {
				t.Errorf("%d instances left on the stack, want %d", n, tt.left)
			}
		})
	}
}

// TestPoolReusesTheLastInstance checks that a plugin called one call at a time runs on
// the instance its last call used, in a pool of several.
func TestPoolReusesTheLastInstance(t *testing.T) {
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.WAT(t, "good"), PluginConfig{Limits: Limits{Instances: 4}})
	s := p.cur.Load()
	ctx := context.Background()
	var last *instance
	for i := range 10 {
		in, err := s.get(ctx, time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if last != nil && in != last {
			t.Fatalf("call %d ran on another instance than the call before it", i)
		}
		last = in
		s.put(ctx, in, false)
		if _, err := p.Validate(ctx, admission); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.idleInstances(); n != 4 {
		t.Errorf("%d idle instances, want 4", n)
	}
}

// TestPoolUnderContention runs more concurrent callers than the pool may hold
// instances, each holding its instance a while, some with deadlines too short to wait
// for one: callers queue, the pool grows to its maximum, waiters give up, and no
// instance is lost or handed to two callers — at the end every live instance is idle.
func TestPoolUnderContention(t *testing.T) {
	const maxInstances = 3
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.WAT(t, "good"), PluginConfig{Limits: Limits{Instances: 1, MaxInstances: maxInstances}})
	s := p.cur.Load()
	var mu sync.Mutex
	held := map[*instance]bool{}
	ok, timedOut := 0, 0
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			ctx := context.Background()
			for range 50 {
				wait := 10 * time.Second
				if g%3 == 0 {
					wait = 200 * time.Microsecond
				}
				in, err := s.get(ctx, time.Now().Add(wait))
				if err != nil {
					if !errors.Is(err, ErrTimeout) {
						t.Errorf("get: %v", err)
					}
					mu.Lock()
					timedOut++
					mu.Unlock()
					continue
				}
				mu.Lock()
				if held[in] {
					t.Error("an instance was handed to two callers at once")
				}
				held[in] = true
				ok++
				mu.Unlock()
				time.Sleep(100 * time.Microsecond) // hold it: the others must wait or grow
				mu.Lock()
				delete(held, in)
				mu.Unlock()
				s.put(ctx, in, false)
				if _, err := p.Validate(ctx, admission); err != nil && !errors.Is(err, ErrTimeout) {
					t.Errorf("validate: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if ok < 8*50 {
		t.Errorf("%d calls got an instance, want at least the %d with long deadlines", ok, 8*50)
	}
	live := len(s.slots)
	if live < 1 || live > maxInstances {
		t.Fatalf("%d live instances, want 1 to %d", live, maxInstances)
	}
	waitIdle(t, p, live)
	if n := s.idleInstances(); n != live {
		t.Errorf("%d idle instances, want all %d live ones", n, live)
	}
	t.Logf("%d gets served, %d timed out, %d instances", ok, timedOut, live)
}
