package wasm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// instanceSet is the pool of instances of one module version of a plugin. A swap
// replaces the whole set; the old set lives until its last in-flight call returns.
type instanceSet struct {
	p   *Plugin
	mod *Module

	idle  idleStack     // instances ready for a call, the most recently used on top
	slots chan struct{} // one token per live instance, bounding the pool
	refs  atomic.Int64  // 1 while current, plus one per call in flight
	// hooks are the module's (mod.e.hooks), kept beside refs, which a call reads first:
	// a call checks its hook without reaching through the module to its compiled form.
	hooks hookSet
	done  chan struct{} // closed when the set has been drained and closed
	mu    sync.Mutex    // guards closing
	flags abi.ConfigureResponse
	// reads are the members of validate requests the module's configure answer says it
	// reads (flags.Reads), nil for the whole request.
	reads *Members
	// flagsOnce keeps the configure flags of the first instance: every instance gets the
	// same configuration, so they answer the same.
	flagsOnce sync.Once
	// brk suspends the module's calls while they keep running out of time or memory.
	brk *breaker
}

func newInstanceSet(ctx context.Context, p *Plugin, mod *Module) (*instanceSet, error) {
	s := &instanceSet{
		p:     p,
		mod:   mod,
		hooks: mod.e.hooks,
		slots: make(chan struct{}, p.limits.MaxInstances),
		done:  make(chan struct{}),
		brk:   newBreaker(p.r.cfg),
	}
	s.refs.Store(1)
	if mod.e.minPages > uint32(p.limits.MemoryBytes/65536) {
		return nil, &Error{Plugin: p.label, Kind: ErrInvalidModule, Err: fmt.Errorf("module needs %d pages of memory at start; the limit is %d bytes", mod.e.minPages, p.limits.MemoryBytes)}
	}
	// Pre-warm: instantiating a standard-Go module takes milliseconds, never do it on a
	// caller's critical path if it can be helped. The first instance also proves the
	// module answers the ABI version and accepts its configuration.
	for i := 0; i < p.limits.Instances; i++ {
		s.slots <- struct{}{}
		in, err := s.newInstance(ctx)
		if err != nil {
			<-s.slots
			s.closeIdle(ctx)
			return nil, err
		}
		s.idle.put(in)
	}
	return s, nil
}

// tryAcquire takes a reference for one call unless the set has already been drained.
func (s *instanceSet) tryAcquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one closes every instance, whatever becomes of
// ctx (the caller's request may be over by then). ctx is detached only then: a call's
// release is on every call's path, and context.WithoutCancel allocates.
func (s *instanceSet) release(ctx context.Context) {
	if s.refs.Add(-1) == 0 {
		ctx = context.WithoutCancel(ctx)
		s.closeIdle(ctx)
		if err := s.mod.Close(ctx); err != nil {
			s.p.r.log.Warn("closing replaced module", "plugin", s.p.label, "err", err)
		}
		close(s.done)
	}
}

// get returns an idle instance, creates one if the pool is below its maximum, or waits
// for one to come back. The idle instance returned is the one used last: a plugin called
// one call at a time keeps running on one instance whose memory is still in the CPU's
// caches, instead of going round the pool and touching each instance's memory in turn.
func (s *instanceSet) get(ctx context.Context, deadline time.Time) (*instance, error) {
	if in := s.idle.pop(); in != nil {
		return in, nil
	}
	// Only a caller that has to wait pays for a timer.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	w, in := s.idle.wait()
	if in != nil {
		return in, nil
	}
	select {
	case in := <-w:
		return in, nil
	case s.slots <- struct{}{}:
		return s.grow(ctx, w)
	case <-ctx.Done():
		s.idle.cancel(w)
		return nil, &Error{Plugin: s.p.label, Kind: ErrTimeout, Err: fmt.Errorf("waiting for a free instance: %w", context.Cause(ctx))}
	}
}

// grow adds one instance to the pool (the caller holds its slot and waits on w) and
// returns the first instance handed to w. Instantiation runs under InitTimeout, not under
// the caller's deadline: starting a standard-Go guest takes milliseconds, far more on a
// loaded machine, and a call's deadline (1 s by default, less what the request already
// spent) would kill it half-made — after a swap, call after call, the pool would never
// grow. A caller that gives up leaves the new instance to the next one; an instance
// returned by another call meanwhile is taken first.
func (s *instanceSet) grow(ctx context.Context, w chan *instance) (*instance, error) {
	// The caller's reference keeps the set open now; this one keeps it open until the new
	// instance is in the pool, so a drain that happens meanwhile closes it there.
	s.refs.Add(1)
	errc := make(chan error, 1)
	go func() {
		defer s.release(context.WithoutCancel(ctx))
		in, err := s.newInstance(context.WithoutCancel(ctx))
		if err != nil {
			<-s.slots
			errc <- err
			return
		}
		s.idle.put(in)
	}()
	select {
	case in := <-w:
		return in, nil
	case err := <-errc:
		s.idle.cancel(w)
		return nil, err
	case <-ctx.Done():
		s.idle.cancel(w)
		return nil, &Error{Plugin: s.p.label, Kind: ErrTimeout, Err: fmt.Errorf("waiting for a new instance: %w", context.Cause(ctx))}
	}
}

// put returns an instance after a call; discard closes it instead (after any failure
// that may have left it in an unknown state).
func (s *instanceSet) put(ctx context.Context, in *instance, discard bool) {
	if discard {
		in.close(ctx)
		<-s.slots
		s.refill(ctx)
		return
	}
	s.idle.put(in)
}

// refill starts a replacement in the background when a discard left the set below the
// instances it is sized for: the pool stays created ahead of need, so the call after a
// trap does not wait for an instantiation (milliseconds for a standard-Go guest). The
// replacement holds a reference, like grow's, so a drain meanwhile closes it in the pool.
func (s *instanceSet) refill(ctx context.Context) {
	if len(s.slots) >= s.p.limits.Instances || !s.tryAcquire() {
		return
	}
	select {
	case s.slots <- struct{}{}:
	default: // the pool is at its maximum after all
		s.release(ctx)
		return
	}
	go func() {
		ctx := context.WithoutCancel(ctx)
		defer s.release(ctx)
		in, err := s.newInstance(ctx)
		if err != nil {
			<-s.slots
			s.p.r.log.Warn("replacing a discarded instance", "plugin", s.p.label, "err", err)
			return
		}
		s.idle.put(in)
	}()
}

// idleInstances is how many instances wait for a call (tests).
func (s *instanceSet) idleInstances() int { return s.idle.len() }

func (s *instanceSet) closeIdle(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.idle.takeAll() {
		in.close(ctx)
		<-s.slots
	}
}

// idleStack holds a pool's idle instances, last in first out, and the callers waiting for
// one, first come first served. An instance put back goes to the longest waiting caller,
// if any, and on top of the stack otherwise.
type idleStack struct {
	mu      sync.Mutex
	free    []*instance
	waiters []chan *instance // each buffered for one instance
}

// pop returns the instance on top of the stack, or nil if there is none.
func (st *idleStack) pop() *instance {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.popLocked()
}

func (st *idleStack) popLocked() *instance {
	n := len(st.free)
	if n == 0 {
		return nil
	}
	in := st.free[n-1]
	st.free[n-1] = nil
	st.free = st.free[:n-1]
	return in
}

// put hands in to the longest waiting caller, or pushes it on the stack.
func (st *idleStack) put(in *instance) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.waiters) > 0 {
		w := st.waiters[0]
		st.waiters[0] = nil
		st.waiters = st.waiters[1:]
		w <- in // buffered: never blocks
		return
	}
	st.free = append(st.free, in)
}

// wait returns an instance if one was put since the caller last looked; otherwise it
// queues the caller and returns the channel its instance will be handed on. A caller that
// stops waiting must call cancel.
func (st *idleStack) wait() (chan *instance, *instance) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if in := st.popLocked(); in != nil {
		return nil, in
	}
	w := make(chan *instance, 1)
	st.waiters = append(st.waiters, w)
	return w, nil
}

// cancel takes a caller that gives up off the queue; an instance already handed to it
// goes to the next waiter or back on the stack.
func (st *idleStack) cancel(w chan *instance) {
	st.mu.Lock()
	if i := slices.Index(st.waiters, w); i >= 0 {
		st.waiters = slices.Delete(st.waiters, i, i+1)
		st.mu.Unlock()
		return
	}
	st.mu.Unlock()
	// Off the queue, so put has handed it an instance (under the lock, into its buffer).
	st.put(<-w)
}

// len is how many instances are on the stack.
func (st *idleStack) len() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.free)
}

// takeAll empties the stack and returns what was on it.
func (st *idleStack) takeAll() []*instance {
	st.mu.Lock()
	defer st.mu.Unlock()
	free := st.free
	st.free = nil
	return free
}
