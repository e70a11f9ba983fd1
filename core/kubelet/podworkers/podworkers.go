// Package podworkers gives every pod its own goroutine: updates to one pod are applied one
// at a time, in order, and an update that arrives while a sync runs replaces any update
// still waiting (the latest wins), as the kubelet's pod workers do.
package podworkers

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SyncFunc syncs one pod. removed means the pod is gone from the API and must be torn
// down. It returns when to sync again (0 = the default resync) and whether the worker is
// finished (the pod is gone for good).
type SyncFunc func(ctx context.Context, pod *corev1.Pod, removed bool) (requeueAfter time.Duration, finished bool)

// Workers dispatches pod updates to per-pod goroutines.
type Workers struct {
	ctx    context.Context
	sync   SyncFunc
	resync time.Duration
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[types.UID]*worker
}

type worker struct {
	signal  chan struct{}
	pod     *corev1.Pod
	removed bool
}

// New returns Workers that run until ctx ends; every pod is synced at least every resync.
func New(ctx context.Context, sync SyncFunc, resync time.Duration) *Workers {
	if resync <= 0 {
		resync = 10 * time.Second
	}
	return &Workers{ctx: ctx, sync: sync, resync: resync, workers: map[types.UID]*worker{}}
}

// Update hands the latest version of a pod to its worker, starting one if needed.
func (p *Workers) Update(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[pod.UID]
	if !ok {
		if p.ctx.Err() != nil {
			return
		}
		w = &worker{signal: make(chan struct{}, 1)}
		p.workers[pod.UID] = w
		p.wg.Go(func() { p.run(pod.UID, w) })
	}
	w.pod = pod
	notify(w)
}

// Remove tells a pod's worker that the pod is gone from the API.
func (p *Workers) Remove(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[pod.UID]
	if !ok {
		if p.ctx.Err() != nil {
			return
		}
		w = &worker{signal: make(chan struct{}, 1), pod: pod}
		p.workers[pod.UID] = w
		p.wg.Go(func() { p.run(pod.UID, w) })
	}
	w.removed = true
	notify(w)
}

// Trigger asks for a sync of a pod with its latest version (runtime events, probes).
func (p *Workers) Trigger(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.workers[uid]; ok {
		notify(w)
	}
}

// Known reports whether a pod has a worker.
func (p *Workers) Known(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.workers[uid]
	return ok
}

// Count is the number of pods with a worker.
func (p *Workers) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.workers)
}

// Wait blocks until every worker has returned (after the context ends).
func (p *Workers) Wait() { p.wg.Wait() }

func notify(w *worker) {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (p *Workers) run(uid types.UID, w *worker) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-w.signal:
		case <-t.C:
		}
		p.mu.Lock()
		pod, removed := w.pod, w.removed
		p.mu.Unlock()
		next, finished := p.sync(p.ctx, pod, removed)
		if finished {
			p.mu.Lock()
			// An update may have arrived during the final sync; only a removed pod ends.
			if w.removed {
				delete(p.workers, uid)
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
		}
		if next <= 0 || next > p.resync {
			next = p.resync
		}
		t.Reset(next)
	}
}
