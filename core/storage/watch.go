package storage

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// InitialEventsAnnotationKey marks the BOOKMARK that ends the initial events of a watch-list.
const InitialEventsAnnotationKey = metav1.InitialEventsAnnotationKey

// watchMode is what a watch starts with, derived from resourceVersion and sendInitialEvents.
type watchMode struct {
	fromRV        uint64 // events after this revision (when !initial)
	initial       bool   // synthetic ADDED for the current state first
	initialEndBM  bool   // a BOOKMARK annotated initial-events-end after them
	bookmarks     bool
	keyPrefix     string // key with "/" appended when recursive
	recursive     bool
	exactKey      string
	matcher       matcher
	minInitialRev uint64 // initial state must be at least this fresh
}

func newWatchMode(key string, opts ListOptions, attrs AttrFunc) (watchMode, error) {
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return watchMode{}, err
	}
	w := watchMode{fromRV: rv, bookmarks: opts.Predicate.AllowWatchBookmarks, recursive: opts.Recursive,
		matcher: newMatcher(opts.Predicate, attrs), exactKey: key, keyPrefix: key}
	if opts.Recursive && !strings.HasSuffix(key, "/") {
		w.keyPrefix += "/"
	}
	if opts.SendInitialEvents != nil {
		w.initial = *opts.SendInitialEvents
		w.initialEndBM = w.initial && w.bookmarks
		w.minInitialRev = rv
	} else {
		// Kubernetes' legacy semantics: a watch from ""/"0" starts with the current state.
		w.initial = rv == 0
	}
	return w, nil
}

// covers reports whether key is inside the watched range.
func (w *watchMode) covers(key string) bool {
	if w.recursive {
		return strings.HasPrefix(key, w.keyPrefix)
	}
	return key == w.exactKey
}

// errorEvent turns err into the ERROR event client-go expects (its object is a Status).
func errorEvent(err error) watch.Event {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return watch.Event{Type: watch.Error, Object: &st}
	}
	st := apierrors.NewInternalError(err).Status()
	return watch.Event{Type: watch.Error, Object: &st}
}

// newBookmark builds a fresh bookmark object: each watcher owns its own, because encoders
// set the kind on the object they are given.
func newBookmark(newFunc func() runtime.Object, rev uint64, initialEnd bool) (runtime.Object, error) {
	obj := newFunc()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("storage: bookmark: %w", err)
	}
	m.SetResourceVersion(fmt.Sprint(rev))
	if initialEnd {
		m.SetAnnotations(map[string]string{InitialEventsAnnotationKey: "true"})
	}
	return obj, nil
}

// etcdWatch is a watch served straight from an etcd watch stream.
type etcdWatch struct {
	result   chan watch.Event
	cancel   context.CancelFunc
	stopOnce sync.Once
	done     chan struct{}
}

// ResultChan implements watch.Interface.
func (w *etcdWatch) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface; it returns once the watch goroutine is gone.
func (w *etcdWatch) Stop() {
	w.stopOnce.Do(w.cancel)
	<-w.done
}

// Watch implements Interface with one etcd watch per call. The Cacher is the scalable way.
func (s *Etcd) Watch(ctx context.Context, key string, opts ListOptions) (watch.Interface, error) {
	mode, err := newWatchMode(key, opts, s.cfg.GetAttrs)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &etcdWatch{result: make(chan watch.Event, 100), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer close(w.result)
		defer cancel()
		s.runWatch(ctx, mode, w.result)
	}()
	return w, nil
}

func (s *Etcd) runWatch(ctx context.Context, mode watchMode, out chan<- watch.Event) {
	send := func(ev watch.Event) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	startRev := int64(mode.fromRV)
	if mode.initial {
		rev, err := s.sendInitial(ctx, mode, send)
		if err != nil {
			send(errorEvent(err))
			return
		}
		if rev < 0 {
			return
		}
		startRev = rev
		if mode.initialEndBM {
			bm, err := newBookmark(s.cfg.NewFunc, uint64(rev), true)
			if err != nil || !send(watch.Event{Type: watch.Bookmark, Object: bm}) {
				return
			}
		}
	}
	// The same context must be used for RequestProgress to reach this watch's stream.
	wctx := clientv3.WithRequireLeader(ctx)
	ops := []clientv3.OpOption{clientv3.WithRev(startRev + 1), clientv3.WithPrevKV(), clientv3.WithProgressNotify()}
	wkey := mode.exactKey
	if mode.recursive {
		wkey = mode.keyPrefix
		ops = append(ops, clientv3.WithPrefix())
	}
	wch := s.client.Watch(wctx, wkey, ops...)
	var tick <-chan time.Time
	if mode.bookmarks {
		t := time.NewTicker(s.bookmarkInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if err := s.client.RequestProgress(wctx); err != nil && ctx.Err() == nil {
				s.log.Debug("watch progress request failed", "key", wkey, "err", err)
			}
		case wres, ok := <-wch:
			if !ok {
				return
			}
			if wres.CompactRevision != 0 {
				send(errorEvent(errTooOldRV(uint64(startRev), uint64(wres.CompactRevision))))
				return
			}
			if err := wres.Err(); err != nil {
				if ctx.Err() == nil {
					send(errorEvent(fmt.Errorf("storage: watch %s: %w", wkey, err)))
				}
				return
			}
			if wres.IsProgressNotify() {
				if mode.bookmarks {
					bm, err := newBookmark(s.cfg.NewFunc, uint64(wres.Header.Revision), false)
					if err != nil || !send(watch.Event{Type: watch.Bookmark, Object: bm}) {
						return
					}
				}
				continue
			}
			for _, e := range wres.Events {
				ev, ok, err := s.transform(mode, e)
				if err != nil {
					send(errorEvent(err))
					return
				}
				if ok && !send(ev) {
					return
				}
			}
		}
	}
}

// sendInitial sends the current state as ADDED events and returns the revision it was
// read at, or -1 when the watch ended meanwhile.
func (s *Etcd) sendInitial(ctx context.Context, mode watchMode, send func(watch.Event) bool) (int64, error) {
	list := s.cfg.NewListFunc()
	opts := ListOptions{Recursive: mode.recursive, Predicate: mode.matcher.pred}
	opts.Predicate.Limit, opts.Predicate.Continue = 0, ""
	if err := s.GetList(ctx, mode.exactKey, opts, list); err != nil {
		return 0, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return 0, fmt.Errorf("storage: %w", err)
	}
	rev, err := parseRV(lm.GetResourceVersion())
	if err != nil {
		return 0, err
	}
	if rev < mode.minInitialRev {
		return 0, NewTooLargeResourceVersionError(mode.minInitialRev, rev, 1)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return 0, fmt.Errorf("storage: %w", err)
	}
	for _, it := range items {
		if !send(watch.Event{Type: watch.Added, Object: it}) {
			return -1, nil
		}
	}
	return int64(rev), nil
}

// transform maps one etcd event to what this watcher sees, including selector transitions.
func (s *Etcd) transform(mode watchMode, e *clientv3.Event) (watch.Event, bool, error) {
	key := string(e.Kv.Key)
	rev := e.Kv.ModRevision
	var prev runtime.Object
	prevMatch := false
	if e.PrevKv != nil && (e.Type == clientv3.EventTypeDelete || !mode.matcher.empty) {
		prev = s.cfg.NewFunc()
		// The previous state is reported at the event's revision (as Kubernetes).
		if err := s.decode(key, e.PrevKv.Value, rev, prev); err != nil {
			return watch.Event{}, false, err
		}
		prevMatch = mode.matcher.matches(prev)
	} else if e.PrevKv != nil {
		prevMatch = true
	}
	if e.Type == clientv3.EventTypeDelete {
		if prev == nil || !prevMatch {
			return watch.Event{}, false, nil
		}
		return watch.Event{Type: watch.Deleted, Object: prev}, true, nil
	}
	cur := s.cfg.NewFunc()
	if err := s.decode(key, e.Kv.Value, rev, cur); err != nil {
		return watch.Event{}, false, err
	}
	curMatch := mode.matcher.matches(cur)
	switch {
	case curMatch && e.PrevKv != nil && prevMatch:
		return watch.Event{Type: watch.Modified, Object: cur}, true, nil
	case curMatch:
		return watch.Event{Type: watch.Added, Object: cur}, true, nil
	case prevMatch && prev != nil:
		return watch.Event{Type: watch.Deleted, Object: prev}, true, nil
	}
	return watch.Event{}, false, nil
}
