package replicaset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// expectationsTTL bounds how long a controller waits for watch events it expects; after it, a
// sync goes ahead anyway so a lost event cannot wedge a ReplicaSet forever.
const expectationsTTL = 5 * time.Minute

// Expectations records, per controller key, how many pod creations and which pod deletions the
// controller has asked for and not yet seen through its informer. While any are outstanding
// the controller does not act again on a cache that may not reflect its own writes.
type Expectations struct {
	mu    sync.Mutex
	now   func() time.Time
	items map[string]*expectation
}

type expectation struct {
	add       int
	deletions sets.Set[string] // pod keys expected to go away
	timestamp time.Time
}

// NewExpectations returns an empty expectation store; now defaults to time.Now.
func NewExpectations(now func() time.Time) *Expectations {
	if now == nil {
		now = time.Now
	}
	return &Expectations{now: now, items: map[string]*expectation{}}
}

// Satisfied reports whether key may sync: nothing is outstanding, the record has expired, or
// there is no record at all (a new controller).
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.items[key]
	if !ok {
		return true
	}
	if x.add <= 0 && x.deletions.Len() == 0 {
		return true
	}
	return e.now().Sub(x.timestamp) > expectationsTTL
}

// ExpectCreations replaces key's record with adds expected creations.
func (e *Expectations) ExpectCreations(key string, adds int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.items[key] = &expectation{add: adds, deletions: sets.New[string](), timestamp: e.now()}
}

// ExpectDeletions replaces key's record with the pod keys expected to be deleted.
func (e *Expectations) ExpectDeletions(key string, podKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.items[key] = &expectation{deletions: sets.New(podKeys...), timestamp: e.now()}
}

// Expect replaces key's record with adds expected creations and the pod keys expected to
// be deleted, for controllers that do both in one sync.
func (e *Expectations) Expect(key string, adds int, podKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.items[key] = &expectation{add: adds, deletions: sets.New(podKeys...), timestamp: e.now()}
}

// CreationObserved lowers key's expected creations by one (an informer saw a pod, or a create
// was skipped or failed).
func (e *Expectations) CreationObserved(key string) {
	e.LowerCreations(key, 1)
}

// LowerCreations lowers key's expected creations by n.
func (e *Expectations) LowerCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.items[key]; ok {
		x.add -= n
	}
}

// DeletionObserved records that podKey is gone (or going); each pod counts once however many
// events report it.
func (e *Expectations) DeletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.items[key]; ok {
		x.deletions.Delete(podKey)
	}
}

// Delete forgets key (its controller is gone).
func (e *Expectations) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.items, key)
}

// pending returns the outstanding creations and deletions for key (for tests and logs).
func (e *Expectations) pending(key string) (int, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.items[key]
	if !ok {
		return 0, 0
	}
	return x.add, x.deletions.Len()
}
