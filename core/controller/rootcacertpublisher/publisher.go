// Package rootcacertpublisher publishes the cluster CA into every namespace as the
// ConfigMap kube-root-ca.crt, as kube-controller-manager's root-ca-cert-publisher does:
// pods (client-go's in-cluster config, projected service account volumes) read it to
// trust the API server. The ConfigMap is recreated if deleted and put back if changed.
package rootcacertpublisher

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Kubernetes' name, key and annotation.
const (
	ConfigMapName         = "kube-root-ca.crt"
	Key                   = "ca.crt"
	DescriptionAnnotation = "kubernetes.io/description"
	Description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
		"No other usage is guaranteed across distributions of Kubernetes clusters."
)

// Publisher keeps kube-root-ca.crt in every namespace.
type Publisher struct {
	client   kubernetes.Interface
	rootCA   string
	nsLister corelisters.NamespaceLister
	cmLister corelisters.ConfigMapLister
	cms      informers.SharedInformerFactory
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	log      *slog.Logger
}

// New returns a publisher of rootCA (PEM) fed by factory's namespace informer; the
// ConfigMaps it watches are only those named kube-root-ca.crt, through an informer of
// its own that Run starts.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, rootCA []byte, log *slog.Logger) (*Publisher, error) {
	if len(rootCA) == 0 {
		return nil, fmt.Errorf("root CA publisher: no CA certificate")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cms := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ConfigMapName).String()
	}))
	ns, cm := factory.Core().V1().Namespaces(), cms.Core().V1().ConfigMaps()
	p := &Publisher{client: client, rootCA: string(rootCA), nsLister: ns.Lister(), cmLister: cm.Lister(), cms: cms,
		synced: []cache.InformerSynced{ns.Informer().HasSynced, cm.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "root_ca_cert_publisher"}),
		log: log.With("controller", "root-ca-cert-publisher")}
	if _, err := ns.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.enqueueNamespace(obj) },
		UpdateFunc: func(_, obj any) { p.enqueueNamespace(obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding namespace handler: %w", err)
	}
	if _, err := cm.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { p.enqueueConfigMap(obj) },
		DeleteFunc: p.enqueueConfigMap,
	}); err != nil {
		return nil, fmt.Errorf("adding configmap handler: %w", err)
	}
	return p, nil
}

func (p *Publisher) enqueueNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok && ns.Status.Phase != corev1.NamespaceTerminating {
		p.queue.Add(ns.Name)
	}
}

func (p *Publisher) enqueueConfigMap(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == ConfigMapName {
		p.queue.Add(cm.Namespace)
	}
}

// Run syncs namespaces with workers until ctx ends.
func (p *Publisher) Run(ctx context.Context, workers int) {
	p.cms.Start(ctx.Done())
	defer p.cms.Shutdown()
	worker.Run(ctx, p.queue, workers, p.synced, p.sync, p.log, "namespace")
}

func (p *Publisher) sync(ctx context.Context, ns string) error {
	n, err := p.nsLister.Get(ns)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.Status.Phase == corev1.NamespaceTerminating || n.DeletionTimestamp != nil {
		return nil
	}
	want := map[string]string{Key: p.rootCA}
	cm, err := p.cmLister.ConfigMaps(ns).Get(ConfigMapName)
	switch {
	case apierrors.IsNotFound(err):
		_, err = p.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Annotations: map[string]string{DescriptionAnnotation: Description}},
			Data:       want,
		}, metav1.CreateOptions{})
		// A namespace going away refuses new content; it needs no CA.
		if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("creating %s in %s: %w", ConfigMapName, ns, err)
		}
		return nil
	case err != nil:
		return err
	}
	if maps.Equal(cm.Data, want) && cm.Annotations[DescriptionAnnotation] != "" {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = want
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = Description
	if _, err := p.client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating %s in %s: %w", ConfigMapName, ns, err)
	}
	return nil
}
