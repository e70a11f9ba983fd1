package storage

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// cacheWatcher is one client watch served by a Cacher. The dispatcher writes to input;
// the watcher's goroutine filters, converts and hands events to the client.
type cacheWatcher struct {
	c        *Cacher
	mode     watchMode
	startRev uint64 // events up to here are covered by initial state or replay

	input    chan *cacheEvent
	result   chan watch.Event
	stopped  chan struct{} // closed by Stop
	killed   chan struct{} // closed by the cacher
	done     chan struct{} // closed when the goroutine has ended
	stopOnce sync.Once
	killOnce sync.Once
}

// ResultChan implements watch.Interface.
func (w *cacheWatcher) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface; it returns once the watcher's goroutine is gone.
func (w *cacheWatcher) Stop() {
	w.stopOnce.Do(func() { close(w.stopped) })
	w.c.removeWatcher(w)
	<-w.done
}

func (w *cacheWatcher) kill() { w.killOnce.Do(func() { close(w.killed) }) }

// wants is the dispatcher's cheap pre-filter: the key range and the start revision.
func (w *cacheWatcher) wants(ev *cacheEvent) bool {
	return ev.rev > w.startRev && w.mode.covers(ev.key)
}

func (w *cacheWatcher) run(ctx context.Context, initial []*cacheItem, replay []*cacheEvent) {
	defer w.c.wg.Done()
	defer close(w.done)
	defer close(w.result)
	defer w.c.removeWatcher(w)
	send := func(ev watch.Event) bool {
		select {
		case w.result <- ev:
			return true
		case <-w.stopped:
		case <-w.killed:
		case <-ctx.Done():
		case <-w.c.ctx.Done():
		}
		return false
	}
	for _, it := range initial {
		if w.mode.matcher.matchItem(it) && !send(watch.Event{Type: watch.Added, Object: it.obj}) {
			return
		}
	}
	if w.mode.initialEndBM {
		bm, err := newBookmark(w.c.cfg.NewFunc, w.startRev, true)
		if err != nil || !send(watch.Event{Type: watch.Bookmark, Object: bm}) {
			return
		}
	}
	for _, ev := range replay {
		if out, ok := w.convert(ev); ok && !send(out) {
			return
		}
	}
	for {
		select {
		case ev := <-w.input:
			if out, ok := w.convert(ev); ok && !send(out) {
				return
			}
		case <-w.stopped:
			return
		case <-w.killed:
			return
		case <-ctx.Done():
			return
		case <-w.c.ctx.Done():
			return
		}
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
