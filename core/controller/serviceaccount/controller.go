// Package serviceaccount is the ServiceAccounts controller: every active namespace has a
// "default" ServiceAccount, recreated if someone deletes it (as Kubernetes does).
package serviceaccount

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DefaultName is the ServiceAccount every namespace gets.
const DefaultName = "default"

// Controller ensures the default ServiceAccount of each namespace.
type Controller struct {
	client   kubernetes.Interface
	nsLister corelisters.NamespaceLister
	saLister corelisters.ServiceAccountLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	log      *slog.Logger
}

// New returns a controller fed by factory's namespace and ServiceAccount informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ns, sa := factory.Core().V1().Namespaces(), factory.Core().V1().ServiceAccounts()
	c := &Controller{client: client, nsLister: ns.Lister(), saLister: sa.Lister(),
		synced: []cache.InformerSynced{ns.Informer().HasSynced, sa.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "serviceaccount"}),
		log: log.With("controller", "serviceaccount")}
	if _, err := ns.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueNamespace(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueNamespace(obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding namespace handler: %w", err)
	}
	if _, err := sa.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if s, ok := obj.(*corev1.ServiceAccount); ok && s.Name == DefaultName {
				c.queue.Add(s.Namespace)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("adding serviceaccount handler: %w", err)
	}
	return c, nil
}

func (c *Controller) enqueueNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok && ns.Status.Phase != corev1.NamespaceTerminating {
		c.queue.Add(ns.Name)
	}
}

// Run syncs namespaces with workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, c.synced, c.sync, c.log, "namespace")
}

func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.nsLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		return nil
	}
	if _, err := c.saLister.ServiceAccounts(name).Get(DefaultName); err == nil {
		return nil
	}
	_, err = c.client.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultName}}, metav1.CreateOptions{})
	switch {
	case err == nil || apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		return nil // namespace going away
	default:
		return fmt.Errorf("creating the default ServiceAccount in %s: %w", name, err)
	}
}
