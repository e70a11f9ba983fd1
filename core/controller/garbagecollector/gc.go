// Package garbagecollector deletes objects whose owners are gone and carries out foreground
// and orphan deletion, for every resource the server serves. It watches metadata only (the
// metadata client and discovery), so it needs no knowledge of any type.
package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// node is what the collector remembers of one object: where it lives and whom it names as
// owners.
type node struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	owners    []metav1.OwnerReference
}

// Collector is the garbage collector.
type Collector struct {
	md        metadata.Interface
	discovery discovery.DiscoveryInterface
	log       *slog.Logger
	queue     workqueue.TypedRateLimitingInterface[types.UID]

	mu         sync.RWMutex
	nodes      map[types.UID]*node
	dependents map[types.UID]sets.Set[types.UID]
	stores     map[schema.GroupVersionResource]cache.Store
	namespaced map[schema.GroupVersionResource]bool
	mapper     meta.RESTMapper
}

// New returns a collector; Run discovers the resources to watch.
func New(md metadata.Interface, disc discovery.DiscoveryInterface, log *slog.Logger) *Collector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Collector{
		md: md, discovery: disc, log: log.With("controller", "garbagecollector"),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "garbagecollector"}),
		nodes: map[types.UID]*node{}, dependents: map[types.UID]sets.Set[types.UID]{},
		stores: map[schema.GroupVersionResource]cache.Store{}, namespaced: map[schema.GroupVersionResource]bool{},
	}
}

// ResyncPeriod is how often the collector rediscovers the served resources, so that
// custom resources added or removed while it runs are watched or dropped.
const ResyncPeriod = 2 * time.Second

// OrphanSweepPeriod is how often the collector looks again at every dependent whose owner
// is not in its graph. Events alone leave one case uncovered: an owner created and deleted
// around the start of its resource's informer, or a delete event lost with a watch that
// broke, is never seen, and nothing else would wake its dependents. Such dependents are
// few (owners are normally in the graph), each look is one GET of the owner.
const OrphanSweepPeriod = 10 * time.Second

// watched is one resource's informer, stopped when the resource is no longer served.
type watched struct {
	stop   chan struct{}
	synced cache.InformerSynced
}

// Run watches every deletable resource and processes the graph with workers until ctx ends.
func (c *Collector) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	informers := map[schema.GroupVersionResource]*watched{}
	var informersWG sync.WaitGroup
	defer func() {
		for _, w := range informers {
			close(w.stop)
		}
		informersWG.Wait()
	}()
	if err := c.resync(informers, &informersWG); err != nil {
		return err
	}
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, w := range informers {
		synced = append(synced, w.synced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	c.log.Info("started", "resources", len(synced), "workers", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for c.processNext(ctx) {
				}
			}, time.Second)
		})
	}
	wg.Go(func() {
		wait.UntilWithContext(ctx, func(context.Context) {
			if err := c.resync(informers, &informersWG); err != nil {
				c.log.Warn("rediscovering resources", "err", err)
			}
		}, ResyncPeriod)
	})
	wg.Go(func() {
		wait.UntilWithContext(ctx, func(context.Context) { c.queueOrphaned() }, OrphanSweepPeriod)
	})
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

// resync rebuilds the REST mapper from discovery, starts an informer for every deletable
// resource not yet watched and stops those of resources no longer served. informers is
// owned by Run's goroutines, which call resync one at a time.
func (c *Collector) resync(informers map[schema.GroupVersionResource]*watched, wg *sync.WaitGroup) error {
	groups, err := restmapper.GetAPIGroupResources(c.discovery)
	if err != nil && len(groups) == 0 {
		return fmt.Errorf("discovering API groups: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	lists, err := c.discovery.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return fmt.Errorf("discovering resources: %w", err)
	}
	// A group whose discovery failed keeps its informers: it may only be slow to answer.
	partial := err != nil
	served := map[schema.GroupVersionResource]bool{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			verbs := sets.New(r.Verbs...)
			if !verbs.HasAll("list", "watch", "get", "delete", "patch") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			served[gvr] = true
			if informers[gvr] != nil {
				continue
			}
			inf := metadatainformer.NewFilteredMetadataInformer(c.md, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { c.observe(gvr, obj) },
				UpdateFunc: func(_, obj any) { c.observe(gvr, obj) },
				DeleteFunc: func(obj any) { c.forget(obj) },
			}); err != nil {
				return fmt.Errorf("watching %s: %w", gvr, err)
			}
			w := &watched{stop: make(chan struct{}), synced: inf.HasSynced}
			informers[gvr] = w
			c.mu.Lock()
			c.stores[gvr] = inf.GetStore()
			c.namespaced[gvr] = r.Namespaced
			c.mu.Unlock()
			wg.Go(func() { inf.Run(w.stop) })
			// An owner deleted before this informer's first list is never seen, so no
			// event would wake its dependents: once the list is in, look again at every
			// dependent whose owner is not in the graph.
			wg.Go(func() {
				if cache.WaitForCacheSync(w.stop, w.synced) {
					c.queueOrphaned()
				}
			})
		}
	}
	for gvr, w := range informers {
		if served[gvr] || partial {
			continue
		}
		close(w.stop)
		delete(informers, gvr)
		c.mu.Lock()
		delete(c.stores, gvr)
		delete(c.namespaced, gvr)
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.mapper = mapper
	c.mu.Unlock()
	return nil
}

// queueOrphaned queues every dependent one of whose owners is not in the graph.
func (c *Collector) queueOrphaned() {
	c.mu.RLock()
	var deps []types.UID
	for owner, ds := range c.dependents {
		if c.nodes[owner] == nil {
			deps = append(deps, ds.UnsortedList()...)
		}
	}
	c.mu.RUnlock()
	for _, d := range deps {
		c.queue.Add(d)
	}
}

func asMeta(obj any) (*metav1.PartialObjectMetadata, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	return m, ok
}

// observe records obj in the graph and queues it when it has owners or is being deleted
// with a finalizer this collector handles.
func (c *Collector) observe(gvr schema.GroupVersionResource, obj any) {
	m, ok := asMeta(obj)
	if !ok {
		return
	}
	c.mu.Lock()
	if old := c.nodes[m.UID]; old != nil {
		for _, o := range old.owners {
			if s := c.dependents[o.UID]; s != nil {
				s.Delete(m.UID)
			}
		}
	}
	c.nodes[m.UID] = &node{gvr: gvr, namespace: m.Namespace, name: m.Name, owners: m.OwnerReferences}
	for _, o := range m.OwnerReferences {
		if c.dependents[o.UID] == nil {
			c.dependents[o.UID] = sets.New[types.UID]()
		}
		c.dependents[o.UID].Insert(m.UID)
	}
	c.mu.Unlock()
	if len(m.OwnerReferences) > 0 || (m.DeletionTimestamp != nil &&
		(slices.Contains(m.Finalizers, metav1.FinalizerOrphanDependents) || slices.Contains(m.Finalizers, metav1.FinalizerDeleteDependents))) {
		c.queue.Add(m.UID)
	}
}

// forget drops a deleted object and wakes its dependents (their owner is gone) and its
// owners (one may be waiting for it in a foreground deletion).
func (c *Collector) forget(obj any) {
	m, ok := asMeta(obj)
	if !ok {
		return
	}
	c.mu.Lock()
	if n := c.nodes[m.UID]; n != nil {
		for _, o := range n.owners {
			if s := c.dependents[o.UID]; s != nil {
				s.Delete(m.UID)
			}
		}
	}
	delete(c.nodes, m.UID)
	deps := c.dependents[m.UID].UnsortedList()
	if len(deps) == 0 {
		delete(c.dependents, m.UID)
	}
	c.mu.Unlock()
	for _, d := range deps {
		c.queue.Add(d)
	}
	for _, o := range m.OwnerReferences {
		c.queue.Add(o.UID)
	}
}

func (c *Collector) processNext(ctx context.Context) bool {
	uid, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(uid)
	if err := c.sync(ctx, uid); err != nil {
		if ctx.Err() == nil {
			c.log.Warn("processing object, requeueing", "uid", uid, "err", err)
		}
		c.queue.AddRateLimited(uid)
		return true
	}
	c.queue.Forget(uid)
	return true
}

// cached returns the object with uid from the informer caches.
func (c *Collector) cached(uid types.UID) (*node, *metav1.PartialObjectMetadata) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.nodes[uid]
	if n == nil {
		return nil, nil
	}
	key := n.name
	if n.namespace != "" {
		key = n.namespace + "/" + n.name
	}
	store := c.stores[n.gvr]
	if store == nil {
		return nil, nil
	}
	obj, ok, _ := store.GetByKey(key)
	if !ok {
		return nil, nil
	}
	m, ok := asMeta(obj)
	if !ok || m.UID != uid {
		return nil, nil
	}
	return n, m
}

func (c *Collector) sync(ctx context.Context, uid types.UID) error {
	n, m := c.cached(uid)
	if m == nil {
		return nil
	}
	if m.DeletionTimestamp != nil {
		switch {
		case slices.Contains(m.Finalizers, metav1.FinalizerOrphanDependents):
			return c.orphanDependents(ctx, n, m)
		case slices.Contains(m.Finalizers, metav1.FinalizerDeleteDependents):
			if err := c.deleteDependentsFirst(ctx, n, m); err != nil {
				return err
			}
		}
	}
	if len(m.OwnerReferences) > 0 {
		return c.checkOwners(ctx, n, m)
	}
	return nil
}

func (c *Collector) dependentsOf(uid types.UID) []types.UID {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.dependents[uid].UnsortedList()
}

// orphanDependents removes references to the owner from its dependents, then its finalizer.
func (c *Collector) orphanDependents(ctx context.Context, n *node, m *metav1.PartialObjectMetadata) error {
	for _, d := range c.dependentsOf(m.UID) {
		dn, dm := c.cached(d)
		if dm == nil {
			continue
		}
		if err := c.removeOwnerRefs(ctx, dn, sets.New(m.UID)); err != nil {
			return err
		}
	}
	return c.removeFinalizer(ctx, n, m.UID, metav1.FinalizerOrphanDependents)
}

// deleteDependentsFirst deletes the owner's dependents and, once none that blocks the owner
// remains, removes the foregroundDeletion finalizer.
func (c *Collector) deleteDependentsFirst(ctx context.Context, n *node, m *metav1.PartialObjectMetadata) error {
	blocking := 0
	for _, d := range c.dependentsOf(m.UID) {
		_, dm := c.cached(d)
		if dm == nil {
			continue
		}
		c.queue.Add(d) // its owner is now "waiting": the dependent gets deleted
		for _, r := range dm.OwnerReferences {
			if r.UID == m.UID && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
				blocking++
			}
		}
	}
	if blocking > 0 {
		return nil // dependents' delete events bring us back
	}
	return c.removeFinalizer(ctx, n, m.UID, metav1.FinalizerDeleteDependents)
}

// ownerState is how a dependent's owner stands.
type ownerState int

const (
	ownerSolid   ownerState = iota // exists and is staying
	ownerAbsent                    // gone (or replaced by another object of the same name)
	ownerWaiting                   // being deleted in the foreground: dependents go first
)

func (c *Collector) ownerState(ctx context.Context, dep *node, ref metav1.OwnerReference) (ownerState, error) {
	var om *metav1.PartialObjectMetadata
	if _, cm := c.cached(ref.UID); cm != nil {
		om = cm
	} else {
		// Not in our caches: ask the server, since an informer may simply be behind.
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return ownerSolid, nil //nolint:nilerr // unparseable reference: leave the dependent alone
		}
		c.mu.RLock()
		mapper := c.mapper
		c.mu.RUnlock()
		mapping, err := mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
		if err != nil {
			// Unknown kind: never delete on a guess, but look again once discovery has
			// caught up (a custom resource defined a moment ago).
			return ownerSolid, fmt.Errorf("owner %s %s: %w", ref.APIVersion, ref.Kind, err)
		}
		ns := ""
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns = dep.namespace
		}
		live, err := c.md.Resource(mapping.Resource).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return ownerAbsent, nil
		case err != nil:
			return ownerSolid, fmt.Errorf("looking up owner %s %s: %w", ref.Kind, ref.Name, err)
		case live.UID != ref.UID:
			return ownerAbsent, nil
		}
		om = live
	}
	if om.DeletionTimestamp != nil && slices.Contains(om.Finalizers, metav1.FinalizerDeleteDependents) {
		return ownerWaiting, nil
	}
	return ownerSolid, nil
}

// checkOwners deletes a dependent whose owners are all gone or deleting in the foreground,
// and drops references to gone owners while some owner stays.
func (c *Collector) checkOwners(ctx context.Context, n *node, m *metav1.PartialObjectMetadata) error {
	var solid, waiting int
	drop := sets.New[types.UID]()
	for _, ref := range m.OwnerReferences {
		st, err := c.ownerState(ctx, n, ref)
		if err != nil {
			return err
		}
		switch st {
		case ownerSolid:
			solid++
		case ownerAbsent:
			drop.Insert(ref.UID)
		case ownerWaiting:
			waiting++
			drop.Insert(ref.UID)
		}
	}
	switch {
	case solid > 0 && drop.Len() > 0:
		return c.removeOwnerRefs(ctx, n, drop)
	case solid > 0:
		return nil
	}
	if m.DeletionTimestamp != nil {
		return nil // already going
	}
	policy := metav1.DeletePropagationBackground
	if waiting > 0 {
		policy = metav1.DeletePropagationForeground
		// A dependent of ours already waits for its own dependents: we may close a
		// circle of foreground deletions (a waits for b waits for c waits for a), which
		// would never finish. Kubernetes' collector breaks it the same way: this object
		// stops blocking its owners, so they can go, and the circle unwinds from there.
		if c.dependentWaiting(m.UID) {
			if err := c.unblockOwners(ctx, n); err != nil {
				return err
			}
		}
	}
	uid := m.UID
	err := c.md.Resource(n.gvr).Namespace(n.namespace).Delete(ctx, n.name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %s %s/%s: %w", n.gvr.Resource, n.namespace, n.name, err)
	}
	c.log.Debug("deleted dependent", "resource", n.gvr.Resource, "namespace", n.namespace, "name", n.name, "policy", policy)
	return nil
}

// dependentWaiting reports whether some dependent of uid is itself being deleted in the
// foreground, waiting for its own dependents.
func (c *Collector) dependentWaiting(uid types.UID) bool {
	for _, d := range c.dependentsOf(uid) {
		if _, dm := c.cached(d); dm != nil && dm.DeletionTimestamp != nil &&
			slices.Contains(dm.Finalizers, metav1.FinalizerDeleteDependents) {
			return true
		}
	}
	return false
}

// unblockOwners clears blockOwnerDeletion on every owner reference of the object, with an
// optimistic concurrency check as removeOwnerRefs has.
func (c *Collector) unblockOwners(ctx context.Context, n *node) error {
	live, err := c.md.Resource(n.gvr).Namespace(n.namespace).Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", n.gvr.Resource, n.name, err)
	}
	refs := slices.Clone(live.OwnerReferences)
	changed := false
	for i := range refs {
		if refs[i].BlockOwnerDeletion != nil && *refs[i].BlockOwnerDeletion {
			refs[i].BlockOwnerDeletion = new(false)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	c.log.Debug("unblocking owners to break a circle of foreground deletions", "resource", n.gvr.Resource, "namespace", n.namespace, "name", n.name)
	return c.patchMeta(ctx, n, map[string]any{"ownerReferences": refs, "resourceVersion": live.ResourceVersion, "uid": live.UID})
}

// removeOwnerRefs drops the references to owners from the object, with an optimistic
// concurrency check so a concurrent adoption is never overwritten.
func (c *Collector) removeOwnerRefs(ctx context.Context, n *node, owners sets.Set[types.UID]) error {
	res := c.md.Resource(n.gvr).Namespace(n.namespace)
	live, err := res.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", n.gvr.Resource, n.name, err)
	}
	refs := slices.DeleteFunc(slices.Clone(live.OwnerReferences), func(r metav1.OwnerReference) bool { return owners.Has(r.UID) })
	if len(refs) == len(live.OwnerReferences) {
		return nil
	}
	return c.patchMeta(ctx, n, map[string]any{"ownerReferences": refs, "resourceVersion": live.ResourceVersion, "uid": live.UID})
}

func (c *Collector) removeFinalizer(ctx context.Context, n *node, uid types.UID, finalizer string) error {
	res := c.md.Resource(n.gvr).Namespace(n.namespace)
	live, err := res.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", n.gvr.Resource, n.name, err)
	}
	if live.UID != uid || !slices.Contains(live.Finalizers, finalizer) {
		return nil
	}
	fins := slices.DeleteFunc(slices.Clone(live.Finalizers), func(f string) bool { return f == finalizer })
	if err := c.patchMeta(ctx, n, map[string]any{"finalizers": fins, "resourceVersion": live.ResourceVersion, "uid": live.UID}); err != nil {
		return err
	}
	c.log.Debug("removed finalizer", "finalizer", finalizer, "resource", n.gvr.Resource, "namespace", n.namespace, "name", n.name)
	return nil
}

// patchMeta merge-patches metadata fields; a conflict surfaces as an error and a retry.
func (c *Collector) patchMeta(ctx context.Context, n *node, metaFields map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": metaFields})
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	_, err = c.md.Resource(n.gvr).Namespace(n.namespace).Patch(ctx, n.name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching %s %s/%s: %w", n.gvr.Resource, n.namespace, n.name, err)
	}
	return nil
}
