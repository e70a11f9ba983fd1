package job

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// removals remembers, per Job, the pods whose tracking finalizer this controller removed
// and whose cached copy does not show it yet (kube-controller-manager's finalizer
// expectations). A sync that reads such a pod from a cache behind the removal treats it
// as released: counted, and not patched a second time, which would fail its JSON patch
// test and cost a read and a retry.
type removals struct {
	mu    sync.Mutex
	byJob map[string]sets.Set[types.UID]
}

func newRemovals() *removals { return &removals{byJob: map[string]sets.Set[types.UID]{}} }

// expect records that the finalizer of pod uid is about to be removed.
func (r *removals) expect(job string, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.byJob[job]
	if s == nil {
		s = sets.New[types.UID]()
		r.byJob[job] = s
	}
	s.Insert(uid)
}

// observed forgets pod uid: its removal failed, or the cache now shows it.
func (r *removals) observed(job string, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.byJob[job]; s != nil {
		s.Delete(uid)
		if s.Len() == 0 {
			delete(r.byJob, job)
		}
	}
}

// forget drops everything expected for job.
func (r *removals) forget(job string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byJob, job)
}

// apply returns pods as they are once the expected removals land: an expected pod
// still showing the finalizer is replaced by a shallow copy without it (the cached
// object is never modified). Expectations the cache already shows, or whose pod is
// gone, are dropped.
func (r *removals) apply(job string, pods []*corev1.Pod) []*corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.byJob[job]
	if s.Len() == 0 {
		return pods
	}
	out := make([]*corev1.Pod, len(pods))
	seen := sets.New[types.UID]()
	for i, p := range pods {
		out[i] = p
		if !s.Has(p.UID) {
			continue
		}
		if !hasFinalizer(p) {
			continue // the cache shows the removal: dropped below
		}
		seen.Insert(p.UID)
		cp := *p
		cp.Finalizers = slices.DeleteFunc(slices.Clone(p.Finalizers), func(f string) bool { return f == TrackingFinalizer })
		out[i] = &cp
	}
	// Only what is still pending stays expected.
	if seen.Len() == 0 {
		delete(r.byJob, job)
	} else {
		r.byJob[job] = seen
	}
	return out
}
