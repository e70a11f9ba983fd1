// Package namespace is the namespace controller: when a namespace is being deleted it
// deletes everything the namespace holds, then removes the "kubernetes" finalizer so the
// API server can remove the namespace itself.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Controller empties and finalizes terminating namespaces.
type Controller struct {
	client    kubernetes.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	lister    corelisters.NamespaceLister
	synced    cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	log       *slog.Logger
}

// New returns a controller fed by factory's namespace informer.
func New(client kubernetes.Interface, md metadata.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inf := factory.Core().V1().Namespaces()
	c := &Controller{
		client: client, metadata: md, discovery: client.Discovery(), lister: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"}),
		log: log.With("controller", "namespace"),
	}
	enqueue := func(obj any) {
		ns, ok := obj.(*corev1.Namespace)
		if ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("adding namespace handler: %w", err)
	}
	return c, nil
}

// Run processes terminating namespaces with workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	for range workers {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	err := c.sync(ctx, name)
	var pending *contentRemainingError
	switch {
	case err == nil:
		c.queue.Forget(name)
	case errors.As(err, &pending):
		// Content with finalizers or graceful deletion is still going away: look again soon.
		c.queue.AddAfter(name, time.Second)
	default:
		c.log.Error("syncing namespace", "namespace", name, "err", err)
		c.queue.AddRateLimited(name)
	}
	return true
}

type contentRemainingError struct{ count int }

func (e *contentRemainingError) Error() string {
	return fmt.Sprintf("%d objects remain in the namespace", e.count)
}

// sync deletes the namespace's content and, once nothing is left, finalizes it.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading namespace: %w", err)
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}
	remaining, err := c.deleteContent(ctx, name)
	if err != nil {
		return err
	}
	if remaining > 0 {
		return &contentRemainingError{count: remaining}
	}
	fresh, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading namespace: %w", err)
	}
	fresh.Spec.Finalizers = slices.DeleteFunc(fresh.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	if _, err := c.client.CoreV1().Namespaces().Finalize(ctx, fresh, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalizing namespace: %w", err)
	}
	c.log.Info("namespace emptied and finalized", "namespace", name)
	return nil
}

// deleteContent deletes every namespaced object in ns and reports how many are left.
func (c *Controller) deleteContent(ctx context.Context, ns string) (int, error) {
	lists, err := c.discovery.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return 0, fmt.Errorf("discovering namespaced resources: %w", err)
	}
	remaining := 0
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if !slices.Contains(r.Verbs, "deletecollection") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			res := c.metadata.Resource(gv.WithResource(r.Name)).Namespace(ns)
			bg := metav1.DeletePropagationBackground
			if err := res.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("deleting %s in %s: %w", r.Name, ns, err)
			}
			left, err := res.List(ctx, metav1.ListOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("listing %s in %s: %w", r.Name, ns, err)
			}
			if left != nil {
				remaining += len(left.Items)
			}
		}
	}
	return remaining, nil
}
