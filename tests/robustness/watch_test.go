package robustness

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// watchEvent is one event a watch stream delivered.
type watchEvent struct {
	Type  watch.EventType
	Name  string
	RV    int64
	Value string
}

// segment is one unbroken view of the namespace: a consistent list at listRV, then every
// event after it, across reconnections that resume from the last resourceVersion seen, up
// to coveredTo (the last event's or bookmark's resourceVersion). A 410 Gone (history
// compacted) ends the segment and the watcher lists again, as a reflector does.
type segment struct {
	listRV    int64
	initial   map[string]item
	events    []watchEvent
	coveredTo int64
}

// watcher keeps a list+watch of the namespace running until ctx ends.
type watcher struct {
	id         int
	cs         kubernetes.Interface
	ns         string
	h          *history
	mu         sync.Mutex
	segments   []*segment
	reconnects int
}

func (w *watcher) covered() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.segments) == 0 {
		return 0
	}
	return w.segments[len(w.segments)-1].coveredTo
}

func (w *watcher) run(ctx context.Context) {
	var cur *segment
	for ctx.Err() == nil {
		if cur == nil {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l, err := w.cs.CoreV1().ConfigMaps(w.ns).List(lctx, metav1.ListOptions{})
			cancel()
			if err != nil {
				pause(ctx, 100*time.Millisecond)
				continue
			}
			cur = &segment{listRV: parseRV(l.ResourceVersion), initial: map[string]item{}, coveredTo: parseRV(l.ResourceVersion)}
			for _, cm := range l.Items {
				cur.initial[cm.Name] = item{RV: parseRV(cm.ResourceVersion), Value: cm.Data["v"]}
			}
			w.mu.Lock()
			w.segments = append(w.segments, cur)
			w.mu.Unlock()
		}
		from := fmt.Sprint(w.covered())
		wi, err := w.cs.CoreV1().ConfigMaps(w.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: from,
			AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](8)})
		if err != nil {
			if gone(err) {
				cur = nil
			} else {
				pause(ctx, 100*time.Millisecond)
			}
			continue
		}
		if w.consume(ctx, wi, cur) {
			cur = nil
		}
		w.mu.Lock()
		w.reconnects++
		w.mu.Unlock()
	}
}

// consume reads one watch stream into cur; true means history was compacted (relist).
func (w *watcher) consume(ctx context.Context, wi watch.Interface, cur *segment) bool {
	defer wi.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return false
		case ev, ok = <-wi.ResultChan():
		}
		if !ok {
			return false
		}
		switch ev.Type {
		case watch.Error:
			status := apierrors.FromObject(ev.Object)
			return gone(status)
		case watch.Bookmark:
			cm, _ := ev.Object.(*corev1.ConfigMap)
			if cm == nil {
				continue
			}
			rv := parseRV(cm.ResourceVersion)
			w.mu.Lock()
			if rv < cur.coveredTo {
				w.h.violation("watcher %d: bookmark at %d after resourceVersion %d", w.id, rv, cur.coveredTo)
			} else {
				cur.coveredTo = rv
			}
			w.mu.Unlock()
		case watch.Added, watch.Modified, watch.Deleted:
			cm, _ := ev.Object.(*corev1.ConfigMap)
			if cm == nil {
				w.h.violation("watcher %d: %s event carrying %T", w.id, ev.Type, ev.Object)
				continue
			}
			e := watchEvent{Type: ev.Type, Name: cm.Name, RV: parseRV(cm.ResourceVersion), Value: cm.Data["v"]}
			w.mu.Lock()
			if e.RV <= cur.coveredTo {
				w.h.violation("watcher %d: %s %s at resourceVersion %d, not after %d (out of order or duplicate)", w.id, e.Type, e.Name, e.RV, cur.coveredTo)
			} else {
				cur.events = append(cur.events, e)
				cur.coveredTo = e.RV
			}
			w.mu.Unlock()
		}
	}
}

// gone says whether err is a 410: the resourceVersion asked for was compacted.
func gone(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apierrors.ReasonForError(err) == metav1.StatusReasonExpired ||
		func() bool { s, ok := err.(apierrors.APIStatus); return ok && s.Status().Code == http.StatusGone }()
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
