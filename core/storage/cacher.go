package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/third_party/forked/golang/btree"
)

// CacherConfig tunes a Cacher; zero fields take the defaults.
type CacherConfig struct {
	// EventBufferSize is how many recent events are kept for watches that resume from a
	// resourceVersion; older ones get 410 Expired and relist. Default 10,000.
	EventBufferSize int
	// EventBufferBytes bounds the same history by the stored (etcd) size of the objects
	// its events hold, new and previous states: a few huge objects written and deleted
	// must not keep hundreds of MiB of decoded history alive. The newest event is always
	// kept. Default 32 MiB.
	EventBufferBytes int64
	// WatcherBufferSize is each watcher's queue; a watcher whose queue stays full is
	// closed. Default 256.
	WatcherBufferSize int
	// DispatchTimeout is how long one dispatch may wait, in total, for full watcher queues
	// before closing those watchers. Default 100 ms.
	DispatchTimeout time.Duration
	// BookmarkInterval is how often watchers that allow bookmarks get one. Default 1 min.
	BookmarkInterval time.Duration
	// FreshnessTimeout bounds the wait for the cache to reach a requested revision.
	// Default 3 s.
	FreshnessTimeout time.Duration
	// Logger receives the cacher's messages; nil = discarded.
	Logger *slog.Logger
	// Compacted, if set, bounds which kept snapshots may serve continue tokens: none at or
	// below the compacted revision.
	Compacted *CompactedRevision
}

func (c *CacherConfig) setDefaults() {
	if c.EventBufferSize <= 0 {
		c.EventBufferSize = 10000
	}
	if c.EventBufferBytes <= 0 {
		c.EventBufferBytes = 32 << 20
	}
	if c.WatcherBufferSize <= 0 {
		c.WatcherBufferSize = 256
	}
	if c.DispatchTimeout <= 0 {
		c.DispatchTimeout = 100 * time.Millisecond
	}
	if c.BookmarkInterval <= 0 {
		c.BookmarkInterval = DefaultBookmarkInterval
	}
	if c.FreshnessTimeout <= 0 {
		c.FreshnessTimeout = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// cacheItem is one current object with its selector attributes computed once.
type cacheItem struct {
	key    string
	size   int // stored (etcd) bytes of the object, to bound the event history
	obj    *CachingObject
	labels labels.Set
	fields compactFields
}

// cacheEvent is one change, shared by every watcher it is dispatched to.
type cacheEvent struct {
	typ  watch.EventType
	key  string
	rev  uint64
	obj  *cacheItem // the new state; for Deleted the last state stamped with rev
	prev *cacheItem // the state before, nil on Added
	size int64      // stored bytes of obj and prev, counted against EventBufferBytes
}

// Cacher is an Interface that keeps one etcd watch per resource and serves watches, and
// lists and gets that allow it, from memory. Writes go to the underlying Etcd store.
//
// The state is a copy-on-write B-tree of decoded objects (a snapshot for a list or a
// watch's initial events is an O(1) clone) plus a ring of recent events for watches that
// resume from a resourceVersion. Unstructured objects (custom resources) are the
// exception: they are kept as their stored bytes and decoded when read (storedObject). Each object is wrapped once in a CachingObject, so that
// every watcher of an event (and every initial event of the same object version) shares
// one serialization per encoder; the price is that those bytes stay in memory as long as
// the version is cached. A broken etcd watch is resumed from the cache's revision without
// disturbing anyone; only a compacted one forces a relist, which closes all watchers.
type Cacher struct {
	store *Etcd
	cfg   ResourceConfig
	opts  CacherConfig
	log   *slog.Logger
	attrs AttrFunc

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	progressReq chan struct{}
	// breakWatch lets tests make the etcd watch fail with the error sent.
	breakWatch chan error
	// fallbacks counts consistent lists etcd had to serve because the cache lagged.
	fallbacks atomic.Int64

	mu        sync.RWMutex
	ready     bool
	readyCh   chan struct{}            // closed while ready
	rev       uint64                   // every event up to rev is applied
	revCh     chan struct{}            // closed (and replaced) when rev advances
	tree      *btree.BTree[*cacheItem] // current items by key; clones are snapshots
	treeBytes int64                    // sum of the current items' stored sizes
	ring      []*cacheEvent
	ringHead  int // index of the oldest event
	ringLen   int
	ringBytes int64  // sum of the ring's event sizes
	oldestRev uint64 // every event after oldestRev is in the ring
	watchers  map[*cacheWatcher]struct{}
	wlist     []*cacheWatcher // copy-on-write view of watchers for the dispatcher
	gen       uint64          // bumped on every change of tree

	// snap is a copy-on-write clone of tree as of generation snapGen, shared by the lists
	// and watches that start before the next change; kept are the last snapshots, so that
	// the pages after the first of a paged list are cut from the same state.
	snap    *keptSnapshot
	snapGen uint64
	kept    []*keptSnapshot

	// created are custom objects this cache's Create is writing or wrote whose watch
	// event has not been applied yet, by key: the event's object is that copy rather than
	// a decoding of its bytes (see expectCreated).
	createdMu sync.Mutex
	created   map[string]*createdObject
	// taken counts the events whose object was one kept by expectCreated.
	taken atomic.Uint64
}

// createdObject is an object as its create writes it, as data.
type createdObject struct {
	data []byte
	obj  *unstructured.Unstructured
}

// keptSnapshot is the state at one revision. Paged lists flatten the listed range once
// per snapshot, so that each page is a binary search and remainingItemCount a subtraction.
type keptSnapshot struct {
	rev    uint64
	tree   *btree.BTree[*cacheItem]
	ranges *flatRanges // shared by the snapshots of one tree
}

// flatRanges are the flattened ranges of one tree, by prefix.
type flatRanges struct {
	mu sync.Mutex
	m  map[string][]*cacheItem
}

func newKeptSnapshot(rev uint64, tree *btree.BTree[*cacheItem]) *keptSnapshot {
	return &keptSnapshot{rev: rev, tree: tree, ranges: &flatRanges{m: map[string][]*cacheItem{}}}
}

// sortedRange returns the items under prefix in key order, built on first use.
func (k *keptSnapshot) sortedRange(mode *watchMode) []*cacheItem {
	k.ranges.mu.Lock()
	defer k.ranges.mu.Unlock()
	if r, ok := k.ranges.m[mode.keyPrefix]; ok {
		return r
	}
	var r []*cacheItem
	ascend(k.tree, mode, "", func(it *cacheItem) bool {
		r = append(r, it)
		return true
	})
	k.ranges.m[mode.keyPrefix] = r
	return r
}

// keptSnapshots is how many recent snapshots serve continue tokens from memory. A
// snapshot costs only the tree nodes changed since it was taken.
const keptSnapshots = 16

// treeDegree is the B-tree's degree (up to 2*degree-1 items per node).
const treeDegree = 32

func newItemTree() *btree.BTree[*cacheItem] {
	return btree.New(treeDegree, func(a, b *cacheItem) bool { return a.key < b.key })
}

// getItem returns the item at key in t, or nil.
func getItem(t *btree.BTree[*cacheItem], key string) *cacheItem {
	it, _ := t.Get(&cacheItem{key: key})
	return it
}

var _ Interface = (*Cacher)(nil)

// NewCacher starts a cache of store's resource; Stop ends it and all its watches.
func NewCacher(store *Etcd, opts CacherConfig) *Cacher {
	opts.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := store.Config()
	attrs := cfg.GetAttrs
	if attrs == nil {
		attrs = DefaultAttrs
	}
	c := &Cacher{
		store: store, cfg: cfg, opts: opts, log: opts.Logger, attrs: attrs,
		ctx: ctx, cancel: cancel,
		progressReq: make(chan struct{}, 1),
		breakWatch:  make(chan error),
		readyCh:     make(chan struct{}),
		revCh:       make(chan struct{}),
		tree:        newItemTree(),
		ring:        make([]*cacheEvent, opts.EventBufferSize),
		watchers:    map[*cacheWatcher]struct{}{},
	}
	c.wg.Add(1)
	go c.run()
	return c
}

// Stop ends the etcd watch and every watcher, and waits for their goroutines.
func (c *Cacher) Stop() {
	c.cancel()
	c.wg.Wait()
}

// Ready waits until the cache has its first complete state.
func (c *Cacher) Ready(ctx context.Context) error {
	c.mu.RLock()
	ch := c.readyCh
	c.mu.RUnlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("storage: cache of %s not ready: %w", c.cfg.GroupResource, ctx.Err())
	case <-c.ctx.Done():
		return fmt.Errorf("storage: cache of %s stopped", c.cfg.GroupResource)
	}
}

func (c *Cacher) prefix() string {
	p := c.cfg.Prefix
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

func (c *Cacher) run() {
	defer c.wg.Done()
	defer c.terminateAll()
	backoff := 100 * time.Millisecond
	haveState := false
	for c.ctx.Err() == nil {
		var err error
		if !haveState {
			_, err = c.relist()
			haveState = err == nil
		}
		if haveState {
			// Resume after the last applied revision: a broken etcd watch (leader change,
			// network) costs nobody anything; only a compacted one forces a relist.
			err = c.watch(c.currentRev())
			if errors.Is(err, errWatchCompacted) {
				haveState = false
				c.setUnready()
			} else {
				backoff = 100 * time.Millisecond
			}
		}
		if c.ctx.Err() != nil {
			return
		}
		c.log.Warn("watch cache: etcd watch restarting", "resource", c.cfg.GroupResource.String(),
			"relist", !haveState, "err", err)
		select {
		case <-time.After(backoff):
		case <-c.ctx.Done():
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// errWatchCompacted means the cache missed events: it must relist.
var errWatchCompacted = errors.New("storage: cache watch compacted")

// relist reads the whole prefix at one revision and makes it the cache's state.
func (c *Cacher) relist() (uint64, error) {
	prefix := c.prefix()
	end := clientv3.GetPrefixRangeEnd(prefix)
	items := newItemTree()
	var rev, size int64
	start := prefix
	for {
		resp, err := c.store.client.Get(c.ctx, start, clientv3.WithRange(end), clientv3.WithLimit(maxListBatch),
			clientv3.WithRev(rev))
		if err != nil {
			return 0, fmt.Errorf("storage: cache relist %s: %w", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			it, err := c.newItem(string(kv.Key), kv.Value, kv.ModRevision)
			if err != nil {
				c.log.Error("watch cache: undecodable object skipped", "key", string(kv.Key), "err", err)
				continue
			}
			if old, ok := items.ReplaceOrInsert(it); ok {
				size -= int64(old.size)
			}
			size += int64(it.size)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	c.mu.Lock()
	c.tree, c.treeBytes = items, size
	c.gen++
	c.rev = uint64(rev)
	c.oldestRev = uint64(rev)
	c.ringHead, c.ringLen, c.ringBytes = 0, 0, 0
	clear(c.ring)
	c.ready = true
	close(c.readyCh)
	c.advanceLocked()
	c.mu.Unlock()
	return uint64(rev), nil
}

func (c *Cacher) newItem(key string, data []byte, rev int64) (*cacheItem, error) {
	var obj runtime.Object
	if created := c.takeCreated(key, data); created != nil {
		// The copy's metadata is its own (expectCreated made it so).
		if md, ok := created.Object["metadata"].(map[string]any); ok {
			md["resourceVersion"] = strconv.FormatInt(rev, 10)
		} else if err := setRV(created, rev); err != nil {
			return nil, err
		}
		c.taken.Add(1)
		obj = created
	} else {
		obj = c.cfg.NewFunc()
		if err := c.store.decode(key, data, rev, obj); err != nil {
			return nil, err
		}
	}
	l, f, err := c.attrs(obj)
	if err != nil {
		return nil, fmt.Errorf("storage: attrs of %s: %w", key, err)
	}
	co := NewCachingObject(obj)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		// Unstructured objects are kept as their stored bytes (see storedObject).
		co = &CachingObject{stored: newStoredObject(c.store, key, data, rev, u)}
	}
	return &cacheItem{key: key, size: len(data), obj: co, labels: l, fields: newCompactFields(f)}, nil
}

// Stats counts the cached objects and their average stored size, what API Priority and
// Fairness' list work estimator charges a LIST by (kube-apiserver reads the same from
// etcd once a minute). ok is false while the cache is not ready.
func (c *Cacher) Stats() (count, averageSize int64, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready {
		return 0, 0, false
	}
	count = int64(c.tree.Len())
	if count > 0 {
		averageSize = c.treeBytes / count
	}
	return count, averageSize, true
}

func (c *Cacher) setUnready() {
	c.mu.Lock()
	if c.ready {
		c.ready = false
		c.readyCh = make(chan struct{})
	}
	c.mu.Unlock()
	c.forgetCreated()
	// Watchers could miss events across a relist: they rewatch (and relist on 410).
	c.terminateAll()
}

func (c *Cacher) terminateAll() {
	c.mu.Lock()
	ws := c.wlist
	c.watchers = map[*cacheWatcher]struct{}{}
	c.wlist = nil
	c.mu.Unlock()
	for _, w := range ws {
		w.terminate()
	}
}

// advanceLocked wakes everyone waiting for the revision to move.
func (c *Cacher) advanceLocked() {
	close(c.revCh)
	c.revCh = make(chan struct{})
}

// watch follows etcd from rev and applies events until the watch breaks.
func (c *Cacher) watch(rev uint64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(c.ctx))
	defer cancel()
	wch := c.store.client.Watch(ctx, c.prefix(), clientv3.WithPrefix(), clientv3.WithRev(int64(rev)+1),
		clientv3.WithProgressNotify())
	bookmarks := time.NewTicker(c.opts.BookmarkInterval)
	defer bookmarks.Stop()
	requestProgress := func() {
		if err := c.store.client.RequestProgress(ctx); err != nil && ctx.Err() == nil {
			c.log.Debug("watch cache: progress request failed", "err", err)
		}
	}
	for {
		select {
		case <-c.ctx.Done():
			return c.ctx.Err()
		case <-c.progressReq:
			requestProgress()
		case err := <-c.breakWatch:
			return err
		case <-bookmarks.C:
			// Ask etcd first, so that the next bookmarks carry a recent revision even when
			// this resource is idle.
			requestProgress()
			c.dispatchBookmark()
		case wres, ok := <-wch:
			if !ok {
				return errors.New("storage: cache watch closed")
			}
			if wres.CompactRevision != 0 {
				return fmt.Errorf("%w at %d", errWatchCompacted, wres.CompactRevision)
			}
			if err := wres.Err(); err != nil {
				return fmt.Errorf("storage: cache watch: %w", err)
			}
			if wres.IsProgressNotify() {
				c.mu.Lock()
				if r := uint64(wres.Header.Revision); r > c.rev {
					c.rev = r
					c.advanceLocked()
				}
				c.mu.Unlock()
				continue
			}
			c.apply(wres.Events)
		}
	}
}

// apply decodes events outside the lock, applies them in order, then dispatches them.
func (c *Cacher) apply(events []*clientv3.Event) {
	type decoded struct {
		e    *clientv3.Event
		item *cacheItem
	}
	ds := make([]decoded, 0, len(events))
	for _, e := range events {
		d := decoded{e: e}
		if e.Type == clientv3.EventTypePut {
			it, err := c.newItem(string(e.Kv.Key), e.Kv.Value, e.Kv.ModRevision)
			if err != nil {
				c.log.Error("watch cache: undecodable object skipped", "key", string(e.Kv.Key), "err", err)
				continue
			}
			d.item = it
		}
		ds = append(ds, d)
	}
	out := make([]*cacheEvent, 0, len(ds))
	c.mu.Lock()
	for _, d := range ds {
		key, rev := string(d.e.Kv.Key), uint64(d.e.Kv.ModRevision)
		prev := getItem(c.tree, key)
		ev := &cacheEvent{key: key, rev: rev, prev: prev}
		switch {
		case d.item != nil:
			c.tree.ReplaceOrInsert(d.item)
			c.treeBytes += int64(d.item.size)
			ev.obj, ev.typ = d.item, watch.Modified
			if prev == nil {
				ev.typ = watch.Added
			} else {
				c.treeBytes -= int64(prev.size)
			}
		case prev != nil:
			c.tree.Delete(prev)
			c.treeBytes -= int64(prev.size)
			last := prev.obj.shared().DeepCopyObject()
			if err := setRV(last, int64(rev)); err != nil {
				continue
			}
			ev.typ = watch.Deleted
			ev.obj = &cacheItem{key: key, size: prev.size, obj: NewCachingObject(last), labels: prev.labels, fields: prev.fields}
			// Watchers read only obj of a deletion: the event need not keep prev alive.
			ev.prev = nil
		default:
			continue
		}
		c.pushLocked(ev)
		c.gen++
		if rev > c.rev {
			c.rev = rev
		}
		out = append(out, ev)
	}
	c.advanceLocked()
	ws := c.wlist
	c.mu.Unlock()
	for _, ev := range out {
		c.dispatch(ws, ev)
	}
}

// pushLocked appends ev to the ring, dropping the oldest events while the ring is full
// or holds more than EventBufferBytes (a dropped event's objects are released unless the
// current state still holds them; watches from before it get 410 and relist).
func (c *Cacher) pushLocked(ev *cacheEvent) {
	ev.size = int64(ev.obj.size)
	if ev.prev != nil {
		ev.size += int64(ev.prev.size)
	}
	n := len(c.ring)
	for c.ringLen > 0 && (c.ringLen == n || c.ringBytes+ev.size > c.opts.EventBufferBytes) {
		old := c.ring[c.ringHead]
		c.oldestRev = old.rev
		c.ringBytes -= old.size
		c.ring[c.ringHead] = nil
		c.ringHead = (c.ringHead + 1) % n
		c.ringLen--
	}
	c.ring[(c.ringHead+c.ringLen)%n] = ev
	c.ringLen++
	c.ringBytes += ev.size
}

// eventsAfterLocked returns the ring's events with a revision above rev, oldest first.
func (c *Cacher) eventsAfterLocked(rev uint64) []*cacheEvent {
	n := len(c.ring)
	i := sort.Search(c.ringLen, func(i int) bool { return c.ring[(c.ringHead+i)%n].rev > rev })
	out := make([]*cacheEvent, 0, c.ringLen-i)
	for ; i < c.ringLen; i++ {
		out = append(out, c.ring[(c.ringHead+i)%n])
	}
	return out
}

// dispatch hands ev to every watcher without waiting; watchers whose queue is full get a
// shared, bounded grace period and are dropped if they still cannot take it (client-go
// rewatches), so that one slow client never holds up the others.
func (c *Cacher) dispatch(ws []*cacheWatcher, ev *cacheEvent) {
	type stuck struct {
		w   *cacheWatcher
		out watch.Event
	}
	var blocked []stuck
	for _, w := range ws {
		if !w.wants(ev) {
			continue
		}
		out, full, keep := w.offer(ev)
		switch {
		case !keep:
			c.drop(w)
		case full:
			blocked = append(blocked, stuck{w, out})
		}
	}
	if len(blocked) == 0 {
		return
	}
	deadline := make(chan struct{})
	timer := time.AfterFunc(c.opts.DispatchTimeout, func() { close(deadline) })
	defer timer.Stop()
	for _, b := range blocked {
		if !b.w.deliver(b.out, deadline) {
			c.drop(b.w)
		}
	}
}

func (c *Cacher) drop(w *cacheWatcher) {
	c.log.Info("watch cache: closing a watcher that does not keep up", "resource", c.cfg.GroupResource.String())
	w.terminate()
}

func (c *Cacher) dispatchBookmark() {
	c.mu.RLock()
	ev := &cacheEvent{typ: watch.Bookmark, rev: c.rev}
	ws := c.wlist
	c.mu.RUnlock()
	for _, w := range ws {
		if w.mode.bookmarks {
			// Bookmarks are optional: never wait for (or drop a watcher over) one.
			_, _, _ = w.offer(ev)
		}
	}
}

func (c *Cacher) addWatcherLocked(w *cacheWatcher) {
	c.watchers[w] = struct{}{}
	c.wlist = append(append([]*cacheWatcher(nil), c.wlist...), w)
}

func (c *Cacher) removeWatcher(w *cacheWatcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.watchers[w]; !ok {
		return
	}
	delete(c.watchers, w)
	nl := make([]*cacheWatcher, 0, len(c.wlist))
	for _, x := range c.wlist {
		if x != w {
			nl = append(nl, x)
		}
	}
	c.wlist = nl
}

// snapshot returns an immutable view of the items at the cache's revision.
func (c *Cacher) snapshot() *keptSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

// snapshotLocked needs the write lock: cloning switches tree to a new copy-on-write
// context. A clone is O(1); later writes to tree copy the nodes they touch.
func (c *Cacher) snapshotLocked() *keptSnapshot {
	switch {
	case c.snap == nil || c.snapGen != c.gen:
		c.snap, c.snapGen = newKeptSnapshot(c.rev, c.tree.Clone()), c.gen
		c.keepLocked(c.snap)
	case c.snap.rev != c.rev:
		// Progress without changes: the same state, now known to be current at rev.
		c.snap = &keptSnapshot{rev: c.rev, tree: c.snap.tree, ranges: c.snap.ranges}
		c.keepLocked(c.snap)
	}
	return c.snap
}

func (c *Cacher) keepLocked(k *keptSnapshot) {
	if len(c.kept) == keptSnapshots {
		copy(c.kept, c.kept[1:])
		c.kept[keptSnapshots-1] = nil
		c.kept = c.kept[:keptSnapshots-1]
	}
	c.kept = append(c.kept, k)
}

// retained returns a kept snapshot at exactly rev.
func (c *Cacher) retained(rev uint64) (*keptSnapshot, bool) {
	if int64(rev) <= c.opts.Compacted.Load() {
		return nil, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i := len(c.kept) - 1; i >= 0; i-- {
		if c.kept[i].rev == rev {
			return c.kept[i], true
		}
	}
	return nil, false
}

// ascend calls f, in key order, for the items of t under mode's key or prefix from key
// from on, until f returns false.
func ascend(t *btree.BTree[*cacheItem], mode *watchMode, from string, f func(*cacheItem) bool) {
	if !mode.recursive {
		if it := getItem(t, mode.exactKey); it != nil && it.key >= from {
			f(it)
		}
		return
	}
	start := max(mode.keyPrefix, from)
	t.AscendGreaterOrEqual(&cacheItem{key: start}, func(it *cacheItem) bool {
		return strings.HasPrefix(it.key, mode.keyPrefix) && f(it)
	})
}

// requestProgress asks the run loop for an etcd progress notification.
func (c *Cacher) requestProgress() {
	select {
	case c.progressReq <- struct{}{}:
	default:
	}
}

// waitFresh waits until the cache has applied everything up to rev. It reports false on
// timeout, or an error when ctx ends.
func (c *Cacher) waitFresh(ctx context.Context, rev uint64) (bool, error) {
	timer := time.NewTimer(c.opts.FreshnessTimeout)
	defer timer.Stop()
	asked := false
	for {
		c.mu.RLock()
		ok, ready, ch := c.ready && c.rev >= rev, c.ready, c.revCh
		c.mu.RUnlock()
		if ok {
			return true, nil
		}
		if ready && !asked {
			c.requestProgress()
			asked = true
		}
		select {
		case <-ch:
			asked = false
		case <-timer.C:
			return false, nil
		case <-ctx.Done():
			return false, fmt.Errorf("storage: waiting for cache: %w", ctx.Err())
		case <-c.ctx.Done():
			return false, errors.New("storage: cache stopped")
		}
	}
}

func (c *Cacher) isReady() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready
}

// Create implements Interface by writing to etcd.
func (c *Cacher) Create(ctx context.Context, key string, obj, out runtime.Object) error {
	var expected *createdObject
	err := c.store.create(ctx, key, obj, out, func(data []byte, exact bool) {
		expected = c.expectCreated(ctx, key, obj, data, exact)
	})
	if err != nil && expected != nil {
		c.createdMu.Lock()
		if c.created[key] == expected {
			delete(c.created, key)
		}
		c.createdMu.Unlock()
	}
	return err
}

// expectCreated keeps obj, a custom object about to be written as data, for the watch
// event that will bring data back, so that the cache takes the object rather than decode
// the JSON it was made from. It is kept before the write, since the event may be applied
// before the write's answer reaches here. Only an object whose bytes decode to exactly
// its content (exact) is kept, as it is now: a copy, which the event gives its
// resourceVersion. The copy is shallow where the caller said it changes neither object
// after Create (WithResultKept): a top level and metadata of its own, the rest shared.
func (c *Cacher) expectCreated(ctx context.Context, key string, obj runtime.Object, data []byte, exact bool) *createdObject {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || !exact || !gvkExact(obj) || !c.isReady() {
		return nil
	}
	var cp *unstructured.Unstructured
	if resultKept(ctx) {
		top := maps.Clone(u.Object)
		if m, ok := top["metadata"].(map[string]any); ok {
			top["metadata"] = maps.Clone(m)
		}
		cp = &unstructured.Unstructured{Object: top}
	} else {
		cp = u.DeepCopy()
	}
	co := &createdObject{data: data, obj: cp}
	c.createdMu.Lock()
	defer c.createdMu.Unlock()
	if c.created == nil {
		c.created = map[string]*createdObject{}
	}
	c.created[key] = co
	return co
}

// takeCreated returns the object kept for key if data, the value an event brings, is
// what was written with it; what was kept for key is dropped either way.
func (c *Cacher) takeCreated(key string, data []byte) *unstructured.Unstructured {
	c.createdMu.Lock()
	co, ok := c.created[key]
	if ok {
		delete(c.created, key)
	}
	c.createdMu.Unlock()
	if !ok || !bytes.Equal(co.data, data) {
		return nil
	}
	return co.obj
}

// forgetCreated drops every object kept for events: after a relist, events of writes
// made before it may never come.
func (c *Cacher) forgetCreated() {
	c.createdMu.Lock()
	clear(c.created)
	c.createdMu.Unlock()
}

// GuaranteedUpdate implements Interface by writing to etcd, starting from the cached
// object when there is one: that saves a read per update whenever the cache is current,
// and costs one failed transaction when it is not.
func (c *Cacher) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *Preconditions, tryUpdate UpdateFunc) error {
	return c.store.guaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, c.hint(key))
}

// hint is the cached state of key in the form the etcd store updates from, or nil.
func (c *Cacher) hint(key string) *objState {
	c.mu.RLock()
	it, ready := getItem(c.tree, key), c.ready
	c.mu.RUnlock()
	if !ready || it == nil {
		return nil
	}
	obj := it.obj.shared().DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	rev, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil {
		return nil
	}
	if so := it.obj.stored; so != nil {
		return &objState{obj: obj, data: so.data, rev: rev, exists: true}
	}
	// The stored bytes are not kept: encoding the decoded object gives them back.
	data, err := c.store.encode(obj.DeepCopyObject())
	if err != nil {
		return nil
	}
	return &objState{obj: obj, data: data, rev: rev, exists: true}
}

// Delete implements Interface by writing to etcd.
func (c *Cacher) Delete(ctx context.Context, key string, out runtime.Object, preconditions *Preconditions,
	validate ValidateObjectFunc) error {
	return c.store.Delete(ctx, key, out, preconditions, validate)
}

// CurrentResourceVersion implements Interface: the cache's revision once it is ready.
func (c *Cacher) CurrentResourceVersion(ctx context.Context) (uint64, error) {
	c.mu.RLock()
	ready, rev := c.ready, c.rev
	c.mu.RUnlock()
	if !ready {
		return c.store.CurrentResourceVersion(ctx)
	}
	return rev, nil
}

// Get implements Interface: resourceVersion "" reads etcd (consistent), anything else is
// served from the cache once it has reached that revision.
func (c *Cacher) Get(ctx context.Context, key string, opts GetOptions, out runtime.Object) error {
	if opts.ResourceVersion == "" || !c.isReady() {
		return c.store.Get(ctx, key, opts, out)
	}
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return err
	}
	if ok, err := c.waitFresh(ctx, rv); err != nil {
		return err
	} else if !ok {
		return NewTooLargeResourceVersionError(rv, c.currentRev(), 1)
	}
	c.mu.RLock()
	it := getItem(c.tree, key)
	c.mu.RUnlock()
	if it == nil {
		if opts.IgnoreNotFound {
			return runtime.SetZeroValue(out)
		}
		return errNotFound(c.cfg.GroupResource, key)
	}
	// A deep copy: the caller owns out, the cached object is shared.
	src := reflect.ValueOf(it.obj.shared().DeepCopyObject())
	dst := reflect.ValueOf(out)
	if dst.Kind() != reflect.Pointer || dst.Type() != src.Type() {
		return fmt.Errorf("storage: get %s: cannot decode into %T", key, out)
	}
	dst.Elem().Set(src.Elem())
	return nil
}

func (c *Cacher) currentRev() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// GetList implements Interface from the cache where Kubernetes semantics allow: "0" at
// once, "" after the cache caught up with etcd's current revision (etcd serves it when that
// takes too long), N (not older than) once the cache reached N. Pages are cut from a sorted
// snapshot; a continue token is served from the cache while that snapshot is retained, by
// etcd at the token's revision otherwise. Exact revisions go to etcd. The items are
// shallow copies of shared cached objects: callers must not mutate them. Under
// WithCachedItems the cache hands over the shared objects instead of copying them.
func (c *Cacher) GetList(ctx context.Context, key string, opts ListOptions, listObj runtime.Object) error {
	if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact || !c.isReady() {
		return c.store.GetList(ctx, key, opts, listObj)
	}
	p, err := planList(key, opts)
	if err != nil {
		return err
	}
	if p.withRev != 0 && !p.cont {
		// Legacy paged list from N means exactly N.
		return c.store.GetList(ctx, key, opts, listObj)
	}
	var snap *keptSnapshot
	if p.cont {
		var ok bool
		if snap, ok = c.retained(uint64(p.withRev)); !ok {
			return c.store.GetList(ctx, key, opts, listObj)
		}
	} else {
		need := p.minRV
		if opts.ResourceVersion == "" {
			if need, err = c.store.CurrentResourceVersion(ctx); err != nil {
				return err
			}
		}
		if need > 0 {
			if ok, err := c.waitFresh(ctx, need); err != nil {
				return err
			} else if !ok && opts.ResourceVersion == "" {
				c.fallbacks.Add(1)
				return c.store.GetList(ctx, key, opts, listObj)
			} else if !ok {
				return NewTooLargeResourceVersionError(need, c.currentRev(), 1)
			}
		}
		snap = c.snapshot()
	}
	listRev := snap.rev
	mode, err := newWatchMode(key, opts, c.cfg.GetAttrs)
	if err != nil {
		return err
	}
	var (
		cos       []*CachingObject
		next      string
		remaining *int64
	)
	if p.paging {
		items := snap.sortedRange(&mode)
		i := 0
		if p.cont {
			i = sort.Search(len(items), func(i int) bool { return items[i].key >= p.startKey })
		}
		limit := int(opts.Predicate.Limit)
		cos = make([]*CachingObject, 0, min(limit, len(items)-i))
		for ; i < len(items); i++ {
			if !mode.matcher.matchItem(items[i]) {
				continue
			}
			cos = append(cos, items[i].obj)
			if len(cos) == limit {
				break
			}
		}
		if i < len(items)-1 {
			next = items[i].key + "\x00"
			if mode.matcher.countable {
				n := int64(len(items) - i - 1)
				remaining = &n
			}
		}
	} else {
		ascend(snap.tree, &mode, "", func(it *cacheItem) bool {
			if mode.matcher.matchItem(it) {
				cos = append(cos, it.obj)
			}
			return true
		})
	}
	if ci := cachedItemsFrom(ctx); ci != nil {
		// The caller encodes the shared objects itself: no copy of every item.
		ci.Served, ci.Items = true, cos
		cos = nil
	}
	objs := make([]runtime.Object, len(cos))
	for i, co := range cos {
		objs[i] = co.shared()
	}
	if err := meta.SetList(listObj, objs); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	lm, err := meta.ListAccessor(listObj)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	lm.SetResourceVersion(fmt.Sprint(listRev))
	lm.SetContinue("")
	lm.SetRemainingItemCount(nil)
	if next != "" {
		tok, err := encodeContinue(next, p.keyPrefix, int64(listRev))
		if err != nil {
			return err
		}
		lm.SetContinue(tok)
		lm.SetRemainingItemCount(remaining)
	}
	return nil
}

// matchItem uses the attributes computed when the item was cached, unless the predicate
// brings its own attribute function.
func (m matcher) matchItem(it *cacheItem) bool {
	if m.empty {
		return true
	}
	if m.pred.GetAttrs != nil {
		return m.matches(it.obj.shared())
	}
	return m.matchesAttrs(it.labels, it.fields)
}

// Watch implements Interface from the cache: replay of recent events for a
// resourceVersion, or the current state first for ""/"0"/sendInitialEvents.
func (c *Cacher) Watch(ctx context.Context, key string, opts ListOptions) (watch.Interface, error) {
	mode, err := newWatchMode(key, opts, c.cfg.GetAttrs)
	if err != nil {
		return nil, err
	}
	if err := c.waitReadyFor(ctx); err != nil {
		return nil, err
	}
	// A watch-list from "" must start from a state at least as fresh as etcd's.
	need := mode.fromRV
	if mode.initial {
		need = mode.minInitialRev
		if opts.ResourceVersion == "" {
			cur, err := c.store.CurrentResourceVersion(ctx)
			if err != nil {
				return newErrWatcher(err), nil
			}
			need = cur
		}
	}
	if need > 0 {
		if ok, err := c.waitFresh(ctx, need); err != nil {
			return nil, err
		} else if !ok {
			return nil, NewTooLargeResourceVersionError(need, c.currentRev(), 1)
		}
	}
	w := &cacheWatcher{
		c: c, mode: mode,
		maxQueue: max(c.opts.WatcherBufferSize, c.opts.EventBufferSize),
		result:   make(chan watch.Event, c.opts.WatcherBufferSize),
		stopped:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	var (
		initial *btree.BTree[*cacheItem]
		replay  []*cacheEvent
	)
	c.mu.Lock()
	if !c.ready {
		c.mu.Unlock()
		return nil, apierrors.NewTooManyRequests("storage is (re)initializing", 1)
	}
	if mode.initial {
		initial = c.snapshotLocked().tree
	}
	if !mode.initial {
		if mode.fromRV < c.oldestRev {
			oldest := c.oldestRev
			c.mu.Unlock()
			return newErrWatcher(errTooOldRV(mode.fromRV, oldest)), nil
		}
		replay = c.eventsAfterLocked(mode.fromRV)
	}
	w.startRev = c.rev
	w.stopAfter = context.AfterFunc(ctx, w.terminate)
	c.addWatcherLocked(w)
	c.mu.Unlock()
	c.wg.Add(1)
	go w.catchUp(ctx, initial, replay)
	return w, nil
}

// waitReadyFor waits a little for a (re)initializing cache, then answers 429 as
// Kubernetes does, so that clients retry.
func (c *Cacher) waitReadyFor(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, c.opts.FreshnessTimeout)
	defer cancel()
	if err := c.Ready(wctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("storage: watch: %w", ctx.Err())
		}
		return apierrors.NewTooManyRequests("storage is (re)initializing", 1)
	}
	return nil
}
