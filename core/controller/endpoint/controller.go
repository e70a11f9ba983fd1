// Package endpoint is the Endpoints controller: for every Service with a selector it
// keeps a core/v1 Endpoints object of the same name listing the matching pods' IPs
// (ready ones in addresses, the rest in notReadyAddresses, or all ready with
// publishNotReadyAddresses), with their node, target reference and ports resolved by
// name, as kube-controller-manager's endpoint controller does.
package endpoint

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/podservices"
	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	reconciler "k8s.io/endpointslice"
	endpointsliceutil "k8s.io/endpointslice/util"
)

// Kubernetes' values.
const (
	// LabelManagedBy marks the Endpoints this controller writes.
	LabelManagedBy = "endpoints.kubernetes.io/managed-by"
	// ControllerName is LabelManagedBy's value.
	ControllerName = "endpoint-controller"
	// MaxCapacity is how many addresses one Endpoints object keeps; beyond, it is
	// truncated and annotated endpoints.kubernetes.io/over-capacity: truncated.
	MaxCapacity = 1000
)

// Controller keeps the Endpoints of Services with selectors.
type Controller struct {
	client          kubernetes.Interface
	serviceLister   corelisters.ServiceLister
	podLister       corelisters.PodLister
	endpointsLister corelisters.EndpointsLister
	synced          []cache.InformerSynced
	queue           workqueue.TypedRateLimitingInterface[string]
	log             *slog.Logger
}

// New returns a controller fed by factory's Service, Pod and Endpoints informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	svcs, pods, eps := factory.Core().V1().Services(), factory.Core().V1().Pods(), factory.Core().V1().Endpoints()
	c := &Controller{client: client, serviceLister: svcs.Lister(), podLister: pods.Lister(), endpointsLister: eps.Lister(),
		synced: []cache.InformerSynced{svcs.Informer().HasSynced, pods.Informer().HasSynced, eps.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpoint"}),
		log: log.With("controller", "endpoint")}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if err := podservices.Watch(svcs, pods, c.queue.Add); err != nil {
		return nil, err
	}
	// Endpoints deleted by someone else are written again.
	if _, err := eps.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: enqueue}); err != nil {
		return nil, fmt.Errorf("adding endpoints handler: %w", err)
	}
	return c, nil
}

// Run syncs Services with workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, c.synced, c.sync, c.log, "service")
}

func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.serviceLister.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// The Endpoints of a deleted Service go with it, as in Kubernetes.
		cur, err := c.endpointsLister.Endpoints(namespace).Get(name)
		if apierrors.IsNotFound(err) || (err == nil && cur.Labels[LabelManagedBy] != ControllerName) {
			return nil
		}
		err = c.client.CoreV1().Endpoints(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the Endpoints of %s: %w", key, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return nil
	}
	pods, err := c.podLister.Pods(namespace).List(labels.Set(svc.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		return err
	}
	want := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Subsets: Subsets(svc, pods)}
	want.Labels = maps.Clone(svc.Labels)
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		want.Labels[corev1.IsHeadlessService] = ""
	} else {
		delete(want.Labels, corev1.IsHeadlessService)
	}
	want.Labels[LabelManagedBy] = ControllerName
	truncated := truncate(want)
	cur, err := c.endpointsLister.Endpoints(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		if truncated {
			want.Annotations = map[string]string{corev1.EndpointsOverCapacity: "truncated"}
		}
		_, err = c.client.CoreV1().Endpoints(namespace).Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) {
			// Either the cache lags (the next event syncs again) or the namespace is going.
			return nil
		}
		if err != nil {
			return fmt.Errorf("creating the Endpoints of %s: %w", key, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	upd := cur.DeepCopy()
	upd.Subsets, upd.Labels = want.Subsets, want.Labels
	if truncated {
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		upd.Annotations[corev1.EndpointsOverCapacity] = "truncated"
	} else {
		delete(upd.Annotations, corev1.EndpointsOverCapacity)
	}
	if apiequality.Semantic.DeepEqual(cur.Subsets, upd.Subsets) && maps.Equal(cur.Labels, upd.Labels) && maps.Equal(cur.Annotations, upd.Annotations) {
		return nil
	}
	if _, err := c.client.CoreV1().Endpoints(namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating the Endpoints of %s: %w", key, err)
	}
	return nil
}

// Subsets are the Endpoints subsets of svc's pods, packed as Kubernetes' RepackSubsets
// packs them: addresses with the same ports share a subset, everything sorted.
func Subsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	var subsets []corev1.EndpointSubset
	for _, pod := range pods {
		if !endpointsliceutil.ShouldPodBeInEndpoints(pod, svc.Spec.PublishNotReadyAddresses) {
			continue
		}
		addr, ok := podAddress(svc, pod)
		if !ok {
			continue
		}
		ready := svc.Spec.PublishNotReadyAddresses || endpointsliceutil.IsPodReady(pod)
		add := func(ports []corev1.EndpointPort) {
			ss := corev1.EndpointSubset{Ports: ports}
			if ready {
				ss.Addresses = []corev1.EndpointAddress{addr}
			} else {
				ss.NotReadyAddresses = []corev1.EndpointAddress{addr}
			}
			subsets = append(subsets, ss)
		}
		if len(svc.Spec.Ports) == 0 {
			// A headless Service may have no ports: the addresses are all there is.
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				add(nil)
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			port, err := reconciler.FindPort(pod, sp)
			if err != nil {
				continue
			}
			add([]corev1.EndpointPort{{Name: sp.Name, Port: int32(port), Protocol: sp.Protocol, AppProtocol: sp.AppProtocol}})
		}
	}
	return repack(subsets)
}

// podAddress is pod's address in svc's IP family, with its node and reference.
func podAddress(svc *corev1.Service, pod *corev1.Pod) (corev1.EndpointAddress, bool) {
	wantV6 := false
	if len(svc.Spec.IPFamilies) > 0 {
		wantV6 = svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	}
	ips := pod.Status.PodIPs
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: pod.Status.PodIP}}
	}
	for _, pip := range ips {
		ip, ok := parseIP(pip.IP)
		if !ok || ip.Is6() != wantV6 {
			continue
		}
		a := corev1.EndpointAddress{IP: ip.String(), NodeName: &pod.Spec.NodeName,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
		if endpointsliceutil.ShouldSetHostname(pod, svc) {
			a.Hostname = pod.Spec.Hostname
		}
		return a, true
	}
	return corev1.EndpointAddress{}, false
}

// truncate keeps at most MaxCapacity addresses, ready ones first, and says whether it
// dropped any.
func truncate(e *corev1.Endpoints) bool {
	total := 0
	for _, ss := range e.Subsets {
		total += len(ss.Addresses) + len(ss.NotReadyAddresses)
	}
	if total <= MaxCapacity {
		return false
	}
	room := MaxCapacity
	for i := range e.Subsets {
		ss := &e.Subsets[i]
		n := min(room, len(ss.Addresses))
		ss.Addresses = ss.Addresses[:n]
		room -= n
	}
	for i := range e.Subsets {
		ss := &e.Subsets[i]
		n := min(room, len(ss.NotReadyAddresses))
		ss.NotReadyAddresses = ss.NotReadyAddresses[:n]
		room -= n
	}
	return true
}
