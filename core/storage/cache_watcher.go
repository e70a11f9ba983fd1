package storage

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/third_party/forked/golang/btree"
)

// cacheWatcher is one client watch served by a Cacher. While it sends its initial state
// and replayed events, a goroutine of its own feeds result and the dispatcher queues new
// events in pending; once caught up it is live: the dispatcher converts events and puts
// them straight into result, with no goroutine per watcher (one hop less per event, which
// is what keeps 1,000 watchers cheap).
type cacheWatcher struct {
	c        *Cacher
	mode     watchMode
	startRev uint64 // events up to here are covered by initial state or replay
	maxQueue int

	result    chan watch.Event
	stopped   chan struct{} // closed by terminate
	done      chan struct{} // closed when the catch-up goroutine has ended
	termOnce  sync.Once
	stopAfter func() bool

	mu      sync.Mutex
	live    bool
	closed  bool
	pending []*cacheEvent
}

// ResultChan implements watch.Interface.
func (w *cacheWatcher) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface; it returns once the watcher's goroutine is gone.
func (w *cacheWatcher) Stop() {
	w.terminate()
	<-w.done
}

// terminate ends the watch: result is closed by whoever owns it at that moment (the
// catch-up goroutine while not live, terminate itself once live).
func (w *cacheWatcher) terminate() {
	w.termOnce.Do(func() {
		close(w.stopped)
		w.mu.Lock()
		w.closed = true
		if w.live {
			close(w.result)
		}
		w.pending = nil
		w.mu.Unlock()
		if w.stopAfter != nil {
			w.stopAfter()
		}
		w.c.removeWatcher(w)
	})
}

// wants is the dispatcher's cheap pre-filter: the key range and the start revision.
func (w *cacheWatcher) wants(ev *cacheEvent) bool {
	return ev.rev > w.startRev && w.mode.covers(ev.key)
}

// offer hands ev to the watcher without blocking. It returns the event still to deliver
// when result is full, and false when the watcher must be dropped.
func (w *cacheWatcher) offer(ev *cacheEvent) (watch.Event, bool, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return watch.Event{}, false, true
	}
	if !w.live {
		if len(w.pending) >= w.maxQueue {
			return watch.Event{}, false, false
		}
		w.pending = append(w.pending, ev)
		return watch.Event{}, false, true
	}
	out, ok := w.convert(ev)
	if !ok {
		return watch.Event{}, false, true
	}
	select {
	case w.result <- out:
		return watch.Event{}, false, true
	default:
		return out, true, true
	}
}

// deliver waits for room in result until the shared deadline; false = drop the watcher.
func (w *cacheWatcher) deliver(out watch.Event, deadline <-chan struct{}) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return true
	}
	select {
	case w.result <- out:
		return true
	case <-w.stopped:
		return true
	case <-deadline:
		return false
	}
}

// catchUp sends the initial state and replayed events, then whatever was queued meanwhile,
// and makes the watcher live.
func (w *cacheWatcher) catchUp(ctx context.Context, initial *btree.BTree[*cacheItem], replay []*cacheEvent) {
	defer w.c.wg.Done()
	defer close(w.done)
	send := func(ev watch.Event) bool {
		select {
		case w.result <- ev:
			return true
		case <-w.stopped:
		case <-ctx.Done():
		case <-w.c.ctx.Done():
		}
		return false
	}
	ok := func() bool {
		if initial != nil {
			sent := true
			ascend(initial, &w.mode, "", func(it *cacheItem) bool {
				if w.mode.matcher.matchItem(it) {
					sent = send(watch.Event{Type: watch.Added, Object: it.obj})
				}
				return sent
			})
			if !sent {
				return false
			}
		}
		if w.mode.initialEndBM {
			bm, err := newBookmark(w.c.cfg.NewFunc, w.startRev, true)
			if err != nil || !send(watch.Event{Type: watch.Bookmark, Object: bm}) {
				return false
			}
		}
		batch := replay
		for {
			for _, ev := range batch {
				if out, ok := w.convert(ev); ok && !send(out) {
					return false
				}
			}
			w.mu.Lock()
			if w.closed {
				w.mu.Unlock()
				return false
			}
			batch, w.pending = w.pending, nil
			if len(batch) == 0 {
				w.live = true
				w.mu.Unlock()
				return true
			}
			w.mu.Unlock()
		}
	}()
	if !ok {
		w.terminate()
		// terminate may have run before the watcher was registered: make sure it is gone.
		w.c.removeWatcher(w)
		// Not live: result is ours to close.
		close(w.result)
	}
}

// convert maps a shared event to what this watcher sees, with selector transitions.
func (w *cacheWatcher) convert(ev *cacheEvent) (watch.Event, bool) {
	if ev.typ == watch.Bookmark {
		if !w.mode.bookmarks || ev.rev < w.startRev {
			return watch.Event{}, false
		}
		bm, err := newBookmark(w.c.cfg.NewFunc, ev.rev, false)
		if err != nil {
			return watch.Event{}, false
		}
		return watch.Event{Type: watch.Bookmark, Object: bm}, true
	}
	if !w.mode.covers(ev.key) {
		return watch.Event{}, false
	}
	m := w.mode.matcher
	cur := m.matchItem(ev.obj)
	switch ev.typ {
	case watch.Added, watch.Deleted:
		if cur {
			return watch.Event{Type: ev.typ, Object: ev.obj.obj}, true
		}
		return watch.Event{}, false
	}
	prev := ev.prev != nil && m.matchItem(ev.prev)
	switch {
	case cur && prev:
		return watch.Event{Type: watch.Modified, Object: ev.obj.obj}, true
	case cur:
		return watch.Event{Type: watch.Added, Object: ev.obj.obj}, true
	case prev:
		// The object left the selection: its last matching state at this revision.
		last := ev.prev.obj.shared().DeepCopyObject()
		if err := setRV(last, int64(ev.rev)); err != nil {
			return watch.Event{}, false
		}
		return watch.Event{Type: watch.Deleted, Object: NewCachingObject(last)}, true
	}
	return watch.Event{}, false
}

var _ runtime.Object = (*CachingObject)(nil)
