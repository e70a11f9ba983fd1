// Package endpointslice is the EndpointSlice controller: for every Service with a
// selector it keeps EndpointSlices listing the matching pods (addresses, ready, serving
// and terminating conditions, node, zone, ports resolved by name), at most 100 endpoints
// a slice, labelled kubernetes.io/service-name and managed by
// endpointslice-controller.k8s.io. The slices are computed by k8s.io/endpointslice's
// reconciler, the code kube-controller-manager runs.
package endpointslice

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"github.com/wasmplane/wasmplane/core/controller/internal/podservices"
	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	reconciler "k8s.io/endpointslice"
	endpointsliceutil "k8s.io/endpointslice/util"
)

// Kubernetes' values.
const (
	// ControllerName is the managed-by label value of the slices this controller owns.
	ControllerName = "endpointslice-controller.k8s.io"
	// MaxEndpointsPerSlice is kube-controller-manager's --max-endpoints-per-slice default.
	MaxEndpointsPerSlice = 100
)

// Controller keeps the EndpointSlices of Services with selectors.
type Controller struct {
	serviceLister corelisters.ServiceLister
	podLister     corelisters.PodLister
	sliceLister   discoverylisters.EndpointSliceLister
	reconciler    *reconciler.Reconciler
	tracker       *endpointsliceutil.EndpointSliceTracker
	triggerTimes  *endpointsliceutil.TriggerTimeTracker
	synced        []cache.InformerSynced
	queue         workqueue.TypedRateLimitingInterface[string]
	log           *slog.Logger
}

// New returns a controller fed by factory's Service, Pod, Node and EndpointSlice informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	svcs, pods := factory.Core().V1().Services(), factory.Core().V1().Pods()
	nodes, slices := factory.Core().V1().Nodes(), factory.Discovery().V1().EndpointSlices()
	tracker := endpointsliceutil.NewEndpointSliceTracker()
	c := &Controller{
		serviceLister: svcs.Lister(), podLister: pods.Lister(), sliceLister: slices.Lister(),
		reconciler:   reconciler.NewReconciler(client, nodes.Lister(), MaxEndpointsPerSlice, tracker, nil, recorder, ControllerName),
		tracker:      tracker,
		triggerTimes: endpointsliceutil.NewTriggerTimeTracker(),
		synced: []cache.InformerSynced{svcs.Informer().HasSynced, pods.Informer().HasSynced,
			nodes.Informer().HasSynced, slices.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpoint_slice"}),
		log: log.With("controller", "endpointslice"),
	}
	if err := podservices.Watch(svcs, pods, c.queue.Add); err != nil {
		return nil, err
	}
	if _, err := slices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok && c.reconciler.ManagedByController(s) && c.tracker.ShouldSync(s) {
				c.enqueueSlice(s)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*discoveryv1.EndpointSlice)
			n, ok2 := newObj.(*discoveryv1.EndpointSlice)
			if !ok1 || !ok2 {
				return
			}
			if o.Labels[discoveryv1.LabelServiceName] != n.Labels[discoveryv1.LabelServiceName] {
				c.enqueueSlice(o)
				c.enqueueSlice(n)
				return
			}
			if c.reconciler.ManagedByChanged(o, n) || (c.reconciler.ManagedByController(n) && c.tracker.ShouldSync(n)) {
				c.enqueueSlice(n)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			s, ok := obj.(*discoveryv1.EndpointSlice)
			// A deletion the controller did not make itself is repaired.
			if ok && c.reconciler.ManagedByController(s) && c.tracker.Has(s) && !c.tracker.HandleDeletion(s) {
				c.enqueueSlice(s)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("adding endpointslice handler: %w", err)
	}
	return c, nil
}

// enqueueSlice queues the Service a slice belongs to, a second later so that a burst of
// slice events makes one sync (kube-controller-manager's endpointSliceChangeMinSyncDelay).
func (c *Controller) enqueueSlice(s *discoveryv1.EndpointSlice) {
	key, err := reconciler.ServiceControllerKey(s)
	if err != nil {
		return
	}
	c.queue.AddAfter(key, time.Second)
}

// Run syncs Services with workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, c.synced, c.sync, c.log, "service")
}

func (c *Controller) sync(_ context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.serviceLister.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// The slices go with the Service: they are its dependents.
		c.triggerTimes.DeleteService(namespace, name)
		c.reconciler.DeleteService(namespace, name)
		c.tracker.DeleteService(namespace, name)
		return nil
	}
	if err != nil {
		return err
	}
	// ExternalName Services get no endpoints; Services without a selector get theirs
	// from whoever runs them (the API servers for `kubernetes`).
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return nil
	}
	pods, err := c.podLister.Pods(namespace).List(labels.Set(svc.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		return err
	}
	slices, err := c.sliceLister.EndpointSlices(namespace).List(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ControllerName}.AsSelectorPreValidated())
	if err != nil {
		return err
	}
	live := slices[:0:0]
	for _, s := range slices {
		if s.DeletionTimestamp == nil {
			live = append(live, s)
		}
	}
	if c.tracker.StaleSlices(svc, live) {
		return fmt.Errorf("the EndpointSlice informer cache of %s is out of date", key)
	}
	trigger := c.triggerTimes.ComputeEndpointLastChangeTriggerTime(namespace, svc, pods)
	if err := c.reconciler.Reconcile(logr.FromSlogHandler(c.log.Handler()), svc, pods, live, trigger); err != nil {
		return fmt.Errorf("reconciling the EndpointSlices of %s: %w", key, err)
	}
	return nil
}
