package storage

import "k8s.io/apimachinery/pkg/watch"

// errWatcher is a watch that delivers one ERROR event and ends. Once a watch's options
// parsed, Kubernetes reports its failures this way rather than as an HTTP error (the
// client gets 200 then the event): a too old resourceVersion is a 410 Expired event, on
// which client-go's reflectors relist.
type errWatcher struct{ result chan watch.Event }

func newErrWatcher(err error) *errWatcher {
	w := &errWatcher{result: make(chan watch.Event, 1)}
	w.result <- errorEvent(err)
	close(w.result)
	return w
}

// ResultChan implements watch.Interface.
func (w *errWatcher) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface; there is nothing to release.
func (w *errWatcher) Stop() {}
