// Package resourcequota is the ResourceQuota controller: it keeps every quota's
// status.hard equal to spec.hard and recomputes status.used from what the namespace
// really holds whenever objects go away or finish (Kubernetes' replenishment), when a
// quota is created or changed, and periodically — which also repairs a charge the
// admission plugin made for a create that then failed.
package resourcequota

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	"github.com/wasmplane/wasmplane/core/quota"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DefaultResync is how often every quota is recomputed even without events (Kubernetes'
// --resource-quota-sync-period).
const DefaultResync = 5 * time.Minute

// Options configure the controller.
type Options struct {
	// Resync is the full recompute period (0 = DefaultResync).
	Resync time.Duration
	// Logger receives logs (nil = discarded).
	Logger *slog.Logger
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// Controller recomputes quota usage per namespace.
type Controller struct {
	client      kubernetes.Interface
	md          metadata.Interface
	mapper      *restmapper.DeferredDiscoveryRESTMapper
	quotaLister corelisters.ResourceQuotaLister
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	opts        Options
	log         *slog.Logger

	// Informers for the other counted resources start when a quota first names them.
	mdFactory metadatainformer.SharedInformerFactory
	mu        sync.Mutex
	watched   map[schema.GroupVersionResource]bool
	runCtx    context.Context
}

// New returns a controller fed by factory's ResourceQuota, Pod and PersistentVolumeClaim
// informers; md lists
// and watches any other counted resource by metadata only.
func New(client kubernetes.Interface, md metadata.Interface, factory informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Resync == 0 {
		opts.Resync = DefaultResync
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	quotas, pods, pvcs := factory.Core().V1().ResourceQuotas(), factory.Core().V1().Pods(), factory.Core().V1().PersistentVolumeClaims()
	c := &Controller{
		client: client, md: md,
		mapper:      restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery())),
		quotaLister: quotas.Lister(),
		synced:      []cache.InformerSynced{quotas.Informer().HasSynced, pods.Informer().HasSynced, pvcs.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "resourcequota"}),
		opts: opts, log: opts.Logger.With("controller", "resourcequota"),
		mdFactory: metadatainformer.NewSharedInformerFactory(md, 0),
		watched:   map[schema.GroupVersionResource]bool{},
	}
	if _, err := quotas.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if q, ok := obj.(*corev1.ResourceQuota); ok {
				c.queue.Add(q.Namespace)
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			o, ok1 := oldObj.(*corev1.ResourceQuota)
			q, ok2 := obj.(*corev1.ResourceQuota)
			// Status writes are the admission plugin's charges: only spec changes (or a
			// status that does not mirror the spec) need a recompute.
			if ok1 && ok2 && (!quota.Equal(o.Spec.Hard, q.Spec.Hard) || !quota.Equal(q.Spec.Hard, q.Status.Hard)) {
				c.queue.Add(q.Namespace)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("adding resourcequota handler: %w", err)
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, obj any) {
			o, ok1 := oldObj.(*corev1.Pod)
			p, ok2 := obj.(*corev1.Pod)
			// A pod that finished stops using quota.
			if ok1 && ok2 && quota.PodCounts(o, c.opts.Now()) && !quota.PodCounts(p, c.opts.Now()) {
				c.replenish(p.Namespace)
			}
		},
		DeleteFunc: c.replenishObject,
	}); err != nil {
		return nil, fmt.Errorf("adding pod handler: %w", err)
	}
	if _, err := pvcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, obj any) {
			o, ok1 := oldObj.(*corev1.PersistentVolumeClaim)
			p, ok2 := obj.(*corev1.PersistentVolumeClaim)
			// A resize, or a volume attributes class named or dropped (which a scope may
			// select), changes what the claim costs, as Kubernetes' RequiresQuotaReplenish
			// has it.
			if ok1 && ok2 && (!quota.Equal(quota.PVCUsage(o), quota.PVCUsage(p)) || !quota.SameVolumeAttributesClasses(o, p)) {
				c.replenish(p.Namespace)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("adding persistentvolumeclaim handler: %w", err)
	}
	return c, nil
}

// replenish queues a namespace's quotas for a recompute if it has any.
func (c *Controller) replenish(ns string) {
	if qs, err := c.quotaLister.ResourceQuotas(ns).List(labels.Everything()); err == nil && len(qs) > 0 {
		c.queue.Add(ns)
	}
}

func (c *Controller) replenishObject(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		c.replenish(m.GetNamespace())
	}
}

// Run recomputes quotas with workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.mu.Lock()
	c.runCtx = ctx
	c.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() {
		wait.UntilWithContext(ctx, func(context.Context) { c.resyncAll() }, c.opts.Resync)
	})
	worker.Run(ctx, c.queue, workers, c.synced, c.sync, c.log, "namespace")
	wg.Wait()
	c.mdFactory.Shutdown()
}

func (c *Controller) resyncAll() {
	qs, err := c.quotaLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range qs {
		c.queue.Add(q.Namespace)
	}
}

// watch starts a metadata informer for gvr, once, so that deletions replenish quota.
func (c *Controller) watch(gvr schema.GroupVersionResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watched[gvr] || c.runCtx == nil {
		return
	}
	c.watched[gvr] = true
	inf := c.mdFactory.ForResource(gvr).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.replenishObject}); err != nil {
		c.log.Warn("cannot watch counted resource", "resource", gvr.String(), "err", err)
		return
	}
	c.mdFactory.Start(c.runCtx.Done())
}

// sync recomputes every quota of namespace ns from fresh lists.
func (c *Controller) sync(ctx context.Context, ns string) error {
	list, err := c.client.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing quotas of %s: %w", ns, err)
	}
	if len(list.Items) == 0 {
		return nil
	}
	u := &usageCache{c: c, ns: ns, counts: map[schema.GroupResource]int64{}}
	var firstErr error
	for i := range list.Items {
		q := &list.Items[i]
		used, err := u.usage(ctx, q)
		if err != nil {
			return err
		}
		if quota.Equal(q.Status.Hard, q.Spec.Hard) && quota.Equal(q.Status.Used, used) {
			continue
		}
		q.Status.Hard = quota.Add(q.Spec.Hard, nil)
		q.Status.Used = used
		// The read resourceVersion is the precondition: a charge made meanwhile wins and
		// this namespace is recomputed again.
		if _, err := c.client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && firstErr == nil {
			firstErr = fmt.Errorf("updating status of quota %s/%s: %w", ns, q.Name, err)
		}
	}
	return firstErr
}

// usageCache lists each resource of one namespace at most once per sync.
type usageCache struct {
	c      *Controller
	ns     string
	pods   []corev1.Pod
	podsOK bool
	counts map[schema.GroupResource]int64
	// memory is the namespace's WasmPlugin memory, once read.
	memory *resource.Quantity
	// services is what the namespace's Services cost in quota.ServiceNames, once read.
	services corev1.ResourceList
	// pvcs is what the namespace's PersistentVolumeClaims cost beyond their count
	// (quota.PVCUsage), once read.
	pvcs corev1.ResourceList
	// pvcList are the namespace's claims, once listed (listClaims).
	pvcList   []corev1.PersistentVolumeClaim
	pvcListOK bool
	// claims is what the namespace's ResourceClaims cost beyond their count, once read.
	claims corev1.ResourceList
}

func (u *usageCache) usage(ctx context.Context, q *corev1.ResourceQuota) (corev1.ResourceList, error) {
	used := corev1.ResourceList{}
	podsGR := schema.GroupResource{Resource: "pods"}
	needPods := false
	var scopedClaims corev1.ResourceList
	for name := range q.Spec.Hard {
		if quota.ChargesPods(name) {
			needPods = true
			continue
		}
		if quota.Scoped(q) && (quota.ChargesPVCs(name) || name == quota.CountName(pvcsGR) || name == corev1.ResourcePersistentVolumeClaims) {
			// A scope may select claims (VolumeAttributesClass): count those it selects,
			// once for all of the quota's claim names.
			if scopedClaims == nil {
				var err error
				if scopedClaims, err = u.scopedPVCUsage(ctx, q); err != nil {
					return nil, err
				}
			}
			if v, ok := scopedClaims[name]; ok {
				used[name] = v
			} else {
				used[name] = resource.MustParse("0")
			}
			continue
		}
		if sum := u.summed(name); sum != nil {
			total := resource.MustParse("0")
			if q.Spec.ScopeSelector == nil && len(q.Spec.Scopes) == 0 {
				usage, err := sum(ctx)
				if err != nil {
					return nil, err
				}
				if v, ok := usage[name]; ok {
					total = v
				}
			}
			used[name] = total
			continue
		}
		if name == quota.PluginMemory {
			total := resource.MustParse("0")
			if q.Spec.ScopeSelector == nil && len(q.Spec.Scopes) == 0 {
				var err error
				if total, err = u.pluginMemory(ctx); err != nil {
					return nil, err
				}
			}
			used[name] = total
			continue
		}
		gr, ok := quota.ResourceOf(name)
		if !ok {
			used[name] = resource.MustParse("0")
			continue
		}
		n := int64(0)
		// Scoped quotas apply to pods only.
		if q.Spec.ScopeSelector == nil && len(q.Spec.Scopes) == 0 {
			var err error
			if n, err = u.count(ctx, gr); err != nil {
				return nil, err
			}
		}
		used[name] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	if needPods {
		pods, err := u.listPods(ctx)
		if err != nil {
			return nil, err
		}
		names := quota.Matching(podsGR, q.Spec.Hard)
		total := corev1.ResourceList{}
		now := u.c.opts.Now()
		for i := range pods {
			if quota.Matches(q, podsGR, &pods[i]) {
				total = quota.Add(total, quota.Mask(quota.Usage(podsGR, &pods[i], now), names))
			}
		}
		for _, n := range names {
			if v, ok := total[n]; ok {
				used[n] = v
			} else {
				used[n] = resource.MustParse("0")
			}
		}
	}
	return used, nil
}

func (u *usageCache) listPods(ctx context.Context) ([]corev1.Pod, error) {
	if u.podsOK {
		return u.pods, nil
	}
	list, err := u.c.client.CoreV1().Pods(u.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods of %s: %w", u.ns, err)
	}
	u.pods, u.podsOK = list.Items, true
	return u.pods, nil
}

// count returns how many objects of gr the namespace holds (0 for a resource the server
// does not serve).
func (u *usageCache) count(ctx context.Context, gr schema.GroupResource) (int64, error) {
	if n, ok := u.counts[gr]; ok {
		return n, nil
	}
	gvr, err := u.c.mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		// Maybe a resource served since discovery was cached; ask again next time.
		u.c.mapper.Reset()
		u.counts[gr] = 0
		return 0, nil
	}
	list, err := u.c.md.Resource(gvr).Namespace(u.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			u.counts[gr] = 0
			return 0, nil
		}
		return 0, fmt.Errorf("listing %s of %s: %w", gr, u.ns, err)
	}
	u.c.watch(gvr)
	n := int64(len(list.Items))
	u.counts[gr] = n
	return n, nil
}

// servicesGVR is the resource of Services.
var servicesGVR = corev1.SchemeGroupVersion.WithResource("services")

// serviceUsage sums what the namespace's Services cost in quota.ServiceNames. Their
// type and ports are in the spec, so they are read whole rather than by metadata.
func (u *usageCache) serviceUsage(ctx context.Context) (corev1.ResourceList, error) {
	// Deleted Services give their node ports and load balancers back at once.
	return sumOnce(ctx, u, &u.services, servicesGVR, func(ctx context.Context) ([]corev1.Service, error) {
		list, err := u.c.client.CoreV1().Services(u.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing services of %s: %w", u.ns, err)
		}
		return list.Items, nil
	}, quota.ServiceUsage)
}

// pvcsGVR is the served version of PersistentVolumeClaims.
var pvcsGVR = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")

// pvcUsage sums what the namespace's PersistentVolumeClaims cost beyond their count.
func (u *usageCache) pvcUsage(ctx context.Context) (corev1.ResourceList, error) {
	// Deleted or resized claims change the usage at once.
	return sumOnce(ctx, u, &u.pvcs, pvcsGVR, u.listClaims, quota.PVCUsage)
}

// listClaims lists the namespace's claims, once per sync.
func (u *usageCache) listClaims(ctx context.Context) ([]corev1.PersistentVolumeClaim, error) {
	if !u.pvcListOK {
		list, err := u.c.client.CoreV1().PersistentVolumeClaims(u.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing persistent volume claims of %s: %w", u.ns, err)
		}
		u.pvcList, u.pvcListOK = list.Items, true
	}
	return u.pvcList, nil
}

// pvcsGR is PersistentVolumeClaims' group resource.
var pvcsGR = schema.GroupResource{Resource: "persistentvolumeclaims"}

// scopedPVCUsage is the count and cost of the claims scoped quota q selects.
func (u *usageCache) scopedPVCUsage(ctx context.Context, q *corev1.ResourceQuota) (corev1.ResourceList, error) {
	claims, err := u.listClaims(ctx)
	if err != nil {
		return nil, err
	}
	u.c.watch(pvcsGVR)
	one := *resource.NewQuantity(1, resource.DecimalSI)
	total := corev1.ResourceList{}
	for i := range claims {
		if quota.Matches(q, pvcsGR, &claims[i]) {
			total = quota.Add(total, quota.PVCUsage(&claims[i]))
			total = quota.Add(total, corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: one, quota.CountName(pvcsGR): one})
		}
	}
	return total, nil
}

// claimsGVR is the served version of DRA ResourceClaims.
var claimsGVR = resourcev1.SchemeGroupVersion.WithResource("resourceclaims")

// claimUsage sums what the namespace's ResourceClaims cost beyond their count.
func (u *usageCache) claimUsage(ctx context.Context) (corev1.ResourceList, error) {
	return sumOnce(ctx, u, &u.claims, claimsGVR, func(ctx context.Context) ([]resourcev1.ResourceClaim, error) {
		list, err := u.c.client.ResourceV1().ResourceClaims(u.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing resource claims of %s: %w", u.ns, err)
		}
		return list.Items, nil
	}, quota.ClaimUsage)
}

// summed returns how the usage of a quota name summed over one kind of object is read,
// or nil for the other names.
func (u *usageCache) summed(name corev1.ResourceName) func(context.Context) (corev1.ResourceList, error) {
	switch {
	case quota.ChargesPVCs(name):
		return u.pvcUsage
	case quota.ChargesClaims(name):
		return u.claimUsage
	case quota.ServiceNames.Has(name):
		return u.serviceUsage
	}
	return nil
}

// sumOnce sums cost over the objects list reads into *cached, once per sync, and
// watches gvr so that a change to one of them requeues the quotas.
func sumOnce[T any](ctx context.Context, u *usageCache, cached *corev1.ResourceList, gvr schema.GroupVersionResource,
	list func(context.Context) ([]T, error), cost func(*T) corev1.ResourceList) (corev1.ResourceList, error) {
	if *cached != nil {
		return *cached, nil
	}
	items, err := list(ctx)
	if err != nil {
		return nil, err
	}
	total := corev1.ResourceList{}
	for i := range items {
		total = quota.Add(total, cost(&items[i]))
	}
	u.c.watch(gvr)
	*cached = total
	return total, nil
}

// wasmPluginsGVR is the served version of quota.WasmPlugins.
var wasmPluginsGVR = wasmv1.SchemeGroupVersion.WithResource("wasmplugins")

// pluginMemory sums what the namespace's WasmPlugins cost in quota.PluginMemory (zero
// when the server serves no plugins). Their limits are in the spec, so they are read
// whole rather than by metadata.
func (u *usageCache) pluginMemory(ctx context.Context) (resource.Quantity, error) {
	if u.memory != nil {
		return *u.memory, nil
	}
	total := *resource.NewQuantity(0, resource.BinarySI)
	raw, err := u.c.client.CoreV1().RESTClient().Get().
		AbsPath("/apis", wasmPluginsGVR.Group, wasmPluginsGVR.Version, "namespaces", u.ns, wasmPluginsGVR.Resource).DoRaw(ctx)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return total, fmt.Errorf("listing wasmplugins of %s: %w", u.ns, err)
	default:
		var list wasmv1.WasmPluginList
		if err := json.Unmarshal(raw, &list); err != nil {
			return total, fmt.Errorf("decoding wasmplugins of %s: %w", u.ns, err)
		}
		for i := range list.Items {
			total.Add(quota.PluginMemoryOf(&list.Items[i]))
		}
		// Deleted plugins give their memory back at once, not at the next resync.
		u.c.watch(wasmPluginsGVR)
	}
	u.memory = &total
	return total, nil
}
