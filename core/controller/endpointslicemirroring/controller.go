// Package endpointslicemirroring is the EndpointSlice mirroring controller: for every
// Service without a selector whose Endpoints someone writes by hand (or with their own
// controller), it keeps EndpointSlices carrying the same addresses and ports, labelled
// kubernetes.io/service-name and managed by endpointslicemirroring-controller.k8s.io, so
// that consumers of EndpointSlices (proxies, DNS) see custom endpoints too. It follows
// kube-controller-manager's controller of the same name: Endpoints labelled
// endpointslice.kubernetes.io/skip-mirror=true and leader-election Endpoints are not
// mirrored, at most 1,000 addresses of a subset are, and the slices go when the Endpoints,
// the Service or the Service's lack of selector does.
package endpointslicemirroring

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Kubernetes' values.
const (
	// ControllerName is the managed-by label value of the slices this controller owns.
	ControllerName = "endpointslicemirroring-controller.k8s.io"
	// MaxEndpointsPerSubset is how many addresses of one Endpoints subset are mirrored
	// (kube-controller-manager's --mirroring-max-endpoints-per-subset default).
	MaxEndpointsPerSubset = 1000
	// MaxEndpointsPerSlice is the most endpoints one mirrored slice holds (the API's limit
	// and kube-controller-manager's --mirroring-max-endpoints-per-slice default).
	MaxEndpointsPerSlice = 1000
	// leaderAnnotation marks the Endpoints old leader elections lock on; they are no
	// service's endpoints.
	leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"
)

// Controller mirrors custom Endpoints into EndpointSlices.
type Controller struct {
	client          kubernetes.Interface
	serviceLister   corelisters.ServiceLister
	endpointsLister corelisters.EndpointsLister
	sliceLister     discoverylisters.EndpointSliceLister
	synced          []cache.InformerSynced
	queue           workqueue.TypedRateLimitingInterface[string]
	log             *slog.Logger
}

// New returns a controller fed by factory's Service, Endpoints and EndpointSlice
// informers. Keys are namespace/name of the Service (and of its Endpoints: they share it).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	svcs, eps, es := factory.Core().V1().Services(), factory.Core().V1().Endpoints(), factory.Discovery().V1().EndpointSlices()
	c := &Controller{
		client: client, serviceLister: svcs.Lister(), endpointsLister: eps.Lister(), sliceLister: es.Lister(),
		synced: []cache.InformerSynced{svcs.Informer().HasSynced, eps.Informer().HasSynced, es.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpoint_slice_mirroring"}),
		log: log.With("controller", "endpointslicemirroring"),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}
	if _, err := svcs.Informer().AddEventHandler(handler); err != nil {
		return nil, fmt.Errorf("adding service handler: %w", err)
	}
	if _, err := eps.Informer().AddEventHandler(handler); err != nil {
		return nil, fmt.Errorf("adding endpoints handler: %w", err)
	}
	// A mirrored slice changed or deleted by someone else is put back.
	sliceEvent := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || s.Labels[discoveryv1.LabelManagedBy] != ControllerName || s.Labels[discoveryv1.LabelServiceName] == "" {
			return
		}
		c.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
	}
	if _, err := es.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: sliceEvent, UpdateFunc: func(_, obj any) { sliceEvent(obj) }, DeleteFunc: sliceEvent,
	}); err != nil {
		return nil, fmt.Errorf("adding endpointslice handler: %w", err)
	}
	return c, nil
}

// Run syncs keys with workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, c.synced, c.sync, c.log, "endpoints")
}

func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	current, err := c.sliceLister.EndpointSlices(namespace).List(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ControllerName}.AsSelectorPreValidated())
	if err != nil {
		return err
	}
	var want []*discoveryv1.EndpointSlice
	svc, err := c.serviceLister.Services(namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	// Services with a selector get their slices from the EndpointSlice controller; a
	// missing Service or Endpoints leaves nothing to mirror.
	if err == nil && svc.Spec.Selector == nil {
		ep, err := c.endpointsLister.Endpoints(namespace).Get(name)
		switch {
		case err == nil && mirrored(ep):
			want = Desired(ep)
		case err != nil && !apierrors.IsNotFound(err):
			return err
		}
	}
	return c.reconcile(ctx, namespace, want, current)
}

// mirrored reports whether an Endpoints object is one this controller copies.
func mirrored(ep *corev1.Endpoints) bool {
	if ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, leader := ep.Annotations[leaderAnnotation]
	return !leader
}

// Desired returns the EndpointSlices that mirror ep: one per address family and set of
// ports, each holding the subsets' ready and not-ready addresses. The slices have no name
// yet (they are created with generateName) and are owned by ep.
func Desired(ep *corev1.Endpoints) []*discoveryv1.EndpointSlice {
	type group struct {
		family discoveryv1.AddressType
		ports  []discoveryv1.EndpointPort
		eps    []discoveryv1.Endpoint
	}
	groups := map[string]*group{}
	var order []string
	for _, ss := range ep.Subsets {
		ports := slicePorts(ss.Ports)
		n := 0
		add := func(addrs []corev1.EndpointAddress, ready bool) {
			for _, a := range addrs {
				if n >= MaxEndpointsPerSubset {
					return
				}
				ip, err := netip.ParseAddr(a.IP)
				if err != nil {
					continue // Endpoints validation allows nothing else; be safe anyway
				}
				n++
				family := discoveryv1.AddressTypeIPv4
				if ip.Is6() && !ip.Is4In6() {
					family = discoveryv1.AddressTypeIPv6
				}
				k := string(family) + "|" + portsKey(ports)
				g := groups[k]
				if g == nil {
					g = &group{family: family, ports: ports}
					groups[k] = g
					order = append(order, k)
				}
				e := discoveryv1.Endpoint{Addresses: []string{a.IP}, Conditions: discoveryv1.EndpointConditions{Ready: new(ready)},
					TargetRef: a.TargetRef, NodeName: a.NodeName}
				if a.Hostname != "" {
					e.Hostname = new(a.Hostname)
				}
				g.eps = append(g.eps, e)
			}
		}
		add(ss.Addresses, true)
		add(ss.NotReadyAddresses, false)
	}
	meta := metav1.ObjectMeta{
		GenerateName: ep.Name + "-", Namespace: ep.Namespace,
		Labels:      maps.Clone(ep.Labels),
		Annotations: maps.Clone(ep.Annotations),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Endpoints", Name: ep.Name, UID: ep.UID,
			Controller: new(true), BlockOwnerDeletion: new(true)}},
	}
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	meta.Labels[discoveryv1.LabelServiceName] = ep.Name
	meta.Labels[discoveryv1.LabelManagedBy] = ControllerName
	delete(meta.Annotations, corev1.EndpointsLastChangeTriggerTime)
	delete(meta.Annotations, corev1.LastAppliedConfigAnnotation)
	if len(meta.Annotations) == 0 {
		meta.Annotations = nil
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(order))
	for _, k := range order {
		g := groups[k]
		// Several subsets with the same ports can add up to more than one slice holds.
		for chunk := range slices.Chunk(g.eps, MaxEndpointsPerSlice) {
			out = append(out, &discoveryv1.EndpointSlice{ObjectMeta: *meta.DeepCopy(), AddressType: g.family, Ports: g.ports, Endpoints: chunk})
		}
	}
	return out
}

func slicePorts(ports []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		out = append(out, discoveryv1.EndpointPort{Name: new(p.Name), Port: new(p.Port), Protocol: new(p.Protocol), AppProtocol: p.AppProtocol})
	}
	sort.Slice(out, func(i, j int) bool {
		return *out[i].Name < *out[j].Name || (*out[i].Name == *out[j].Name && *out[i].Port < *out[j].Port)
	})
	return out
}

// portsKey names a set of ports so that slices with the same ports are matched up.
func portsKey(ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		b.WriteString(*p.Name + "/" + string(*p.Protocol) + "/" + strconv.Itoa(int(*p.Port)) + ";")
	}
	return b.String()
}

func sliceKey(s *discoveryv1.EndpointSlice) string {
	return string(s.AddressType) + "|" + portsKey(s.Ports)
}

// reconcile makes the mirrored slices of one Service the desired ones: a slice whose
// family and ports match a desired one is updated in place, the rest are created and the
// left-over ones deleted.
func (c *Controller) reconcile(ctx context.Context, namespace string, want, current []*discoveryv1.EndpointSlice) error {
	api := c.client.DiscoveryV1().EndpointSlices(namespace)
	byKey := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range current {
		if s.DeletionTimestamp == nil {
			byKey[sliceKey(s)] = append(byKey[sliceKey(s)], s)
		}
	}
	for _, w := range want {
		k := sliceKey(w)
		if have := byKey[k]; len(have) > 0 {
			cur := have[0]
			byKey[k] = have[1:]
			if sameSlice(cur, w) {
				continue
			}
			upd := cur.DeepCopy()
			upd.Labels, upd.Annotations, upd.OwnerReferences = w.Labels, w.Annotations, w.OwnerReferences
			upd.Endpoints, upd.Ports = w.Endpoints, w.Ports
			if _, err := api.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("updating EndpointSlice %s/%s: %w", namespace, cur.Name, err)
			}
			continue
		}
		if _, err := api.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			if apierrors.IsForbidden(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil // the namespace is going
			}
			return fmt.Errorf("creating an EndpointSlice for %s/%s: %w", namespace, w.Labels[discoveryv1.LabelServiceName], err)
		}
	}
	keys := slices.Sorted(maps.Keys(byKey))
	for _, k := range keys {
		for _, s := range byKey[k] {
			if err := api.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(s.UID))}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("deleting EndpointSlice %s/%s: %w", namespace, s.Name, err)
			}
		}
	}
	return nil
}

func sameSlice(cur, want *discoveryv1.EndpointSlice) bool {
	return maps.Equal(cur.Labels, want.Labels) && maps.Equal(cur.Annotations, want.Annotations) &&
		apiequality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences) &&
		apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) && apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints)
}
