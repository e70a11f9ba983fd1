package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/aggregator"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/storage"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	"k8s.io/utils/ptr"
)

var apiServicesResource = apiregistrationv1.Resource("apiservices")

const (
	// autoManagedLabel marks the APIServices the server keeps, with kube-aggregator's
	// values: onstart for built-in group versions, true for custom resources'.
	autoManagedLabel   = "kube-aggregator.kubernetes.io/automanaged"
	manageOnStart      = "onstart"
	manageContinuously = "true"

	// apiServiceCheckInterval is how often the aggregated API servers are checked (and
	// their discovery documents fetched) besides on every APIService change.
	apiServiceCheckInterval = 10 * time.Second
)

// apiServicePriority is an APIService's groupPriorityMinimum and versionPriority.
type apiServicePriority struct{ group, version int32 }

// builtinAPIServicePriority returns kube-apiserver's priorities for a built-in group
// version (its DefaultGenericAPIServicePriorities with kube-apiserver's additions).
// A group version kube-apiserver does not serve (wasmplane's own) gets 15000 and 9, what
// kube-apiserver's table says a new group should start from.
func builtinAPIServicePriority(gv schema.GroupVersion) apiServicePriority {
	switch gv.Group {
	case "":
		return apiServicePriority{18000, 1}
	case "apps":
		return apiServicePriority{17800, 15}
	case "events.k8s.io":
		return apiServicePriority{17750, 15}
	case "authentication.k8s.io":
		return apiServicePriority{17700, 15}
	case "authorization.k8s.io":
		return apiServicePriority{17600, 15}
	case "autoscaling":
		if gv.Version == "v2" {
			return apiServicePriority{17500, 30}
		}
		return apiServicePriority{17500, 15}
	case "batch":
		return apiServicePriority{17400, 15}
	case "certificates.k8s.io":
		return apiServicePriority{17300, 15}
	case "networking.k8s.io":
		return apiServicePriority{17200, 15}
	case "policy":
		return apiServicePriority{17100, 15}
	case "rbac.authorization.k8s.io":
		return apiServicePriority{17000, 15}
	case "storage.k8s.io":
		return apiServicePriority{16800, 15}
	case "apiextensions.k8s.io":
		return apiServicePriority{16700, 15}
	case "admissionregistration.k8s.io":
		switch gv.Version {
		case "v1beta1":
			return apiServicePriority{16700, 12}
		case "v1alpha1":
			return apiServicePriority{16700, 9}
		}
		return apiServicePriority{16700, 15}
	case "scheduling.k8s.io":
		return apiServicePriority{16600, 15}
	case "coordination.k8s.io":
		return apiServicePriority{16500, 15}
	case "node.k8s.io":
		return apiServicePriority{16300, 15}
	case "discovery.k8s.io":
		return apiServicePriority{16200, 15}
	case "resource.k8s.io":
		return apiServicePriority{16200, 21}
	case "flowcontrol.apiserver.k8s.io":
		return apiServicePriority{16100, 21}
	case "storagemigration.k8s.io":
		return apiServicePriority{15800, 15}
	case "metrics.k8s.io":
		// Served here, not by kube-apiserver: metrics-server's APIService's priorities.
		return apiServicePriority{100, 100}
	}
	return apiServicePriority{15000, 9}
}

// localAPIService is the APIService kube-apiserver's autoregister controller keeps for a
// group version served by the server itself: named "<version>.<group>" ("v1." for the
// core group), without a Service.
func localAPIService(gv schema.GroupVersion, custom bool) *apiregistrationv1.APIService {
	p, managed := builtinAPIServicePriority(gv), manageOnStart
	if custom {
		// Custom resources sort after the built-in groups, as kube-apiserver places them.
		p, managed = apiServicePriority{1000, 100}, manageContinuously
	}
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: gv.Version + "." + gv.Group, Labels: map[string]string{autoManagedLabel: managed}},
		Spec: apiregistrationv1.APIServiceSpec{Group: gv.Group, Version: gv.Version,
			GroupPriorityMinimum: p.group, VersionPriority: p.version},
	}
}

// RunAPIServices keeps one local APIService per served group version, created and
// removed as resources (custom resources' too) come and go, and the Available condition
// of every APIService, until ctx ends.
func (s *Server) RunAPIServices(ctx context.Context, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	store := s.Store(apiServicesResource)
	if store == nil {
		return
	}
	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(apiServiceCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, n := s.aggregator.Generation(); n > 0 {
					poke()
				}
			case <-s.apiServiceRecheck:
				poke()
			}
		}
	})
	wg.Go(func() {
		for {
			snap := s.cur.Load()
			poke()
			select {
			case <-ctx.Done():
				return
			case <-snap.replaced:
			}
		}
	})
	wg.Go(func() { watchPoking(ctx, store, func(any) bool { return true }, poke, log) })
	// A change of the Service or Endpoints an APIService names is checked at once, as
	// kube-aggregator's availability controller does.
	for _, gr := range []schema.GroupResource{corev1.Resource("services"), corev1.Resource("endpoints")} {
		if st := s.Store(gr); st != nil {
			wg.Go(func() { watchPoking(ctx, st, s.aggregator.Names, poke, log) })
		}
	}
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-trigger:
		}
		if err := s.syncAPIServices(ctx, store); err != nil && ctx.Err() == nil {
			log.Error("syncing APIServices", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				poke()
			}
		}
	}
}

// watchPoking calls poke on every change of store's objects that matters says matter,
// rewatching when a watch ends.
func watchPoking(ctx context.Context, store *registry.Store, matters func(obj any) bool, poke func(), log *slog.Logger) {
	for ctx.Err() == nil {
		w, err := store.Watch(ctx, "", &metav1.ListOptions{})
		if err != nil {
			log.Error("watching APIServices", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range w.ResultChan() {
			// The watch cache hands out its shared wrapper; matters looks at the object.
			obj := ev.Object
			if co, ok := obj.(*storage.CachingObject); ok {
				obj = co.Shared()
			}
			if matters(obj) {
				poke()
			}
		}
		w.Stop()
		poke()
	}
}

// desiredAPIServices returns the local APIServices the served group versions call for,
// by name. apiregistration.k8s.io itself has none, as in kube-apiserver, whose
// aggregator serves it without an APIService.
func (s *Server) desiredAPIServices(ctx context.Context) (map[string]*apiregistrationv1.APIService, error) {
	out := map[string]*apiregistrationv1.APIService{}
	routes := s.cur.Load().routes
	for _, gv := range routes.GroupVersions() {
		if gv.Group == apiregistrationv1.GroupName {
			continue
		}
		custom := true
		for _, a := range routes.Version(gv).Resources {
			if s.scheme.Recognizes(a.Scope.Store.Resource.GroupVersionKind()) {
				custom = false
				break
			}
		}
		as := localAPIService(gv, custom)
		out[as.Name] = as
	}
	// The served versions of every CRD, served yet or not, so that a restart does not
	// remove the APIServices of custom resources before their CRDs are served again.
	if crds := s.Store(crdResource); crds != nil {
		list, err := crds.List(ctx, "", &metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing CustomResourceDefinitions: %w", err)
		}
		for _, crd := range list.(*apiextensionsv1.CustomResourceDefinitionList).Items {
			for _, v := range crd.Spec.Versions {
				if v.Served {
					as := localAPIService(schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}, true)
					if _, ok := out[as.Name]; !ok {
						out[as.Name] = as
					}
				}
			}
		}
	}
	return out, nil
}

// syncAPIServices makes the stored APIServices what desiredAPIServices says, then brings
// each one's Available condition up to date.
func (s *Server) syncAPIServices(ctx context.Context, store *registry.Store) error {
	desired, err := s.desiredAPIServices(ctx)
	if err != nil {
		return err
	}
	list, err := store.List(ctx, "", &metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing APIServices: %w", err)
	}
	existing := map[string]*apiregistrationv1.APIService{}
	for i := range list.(*apiregistrationv1.APIServiceList).Items {
		as := &list.(*apiregistrationv1.APIServiceList).Items[i]
		existing[as.Name] = as
	}
	for name, want := range desired {
		have := existing[name]
		switch {
		case have == nil:
			created, err := store.Create(ctx, "", want, registry.WriteOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("creating APIService %s: %w", name, err)
			}
			existing[name] = created.(*apiregistrationv1.APIService)
		case have.Spec.Service != nil:
			// The admin handed this group version to an aggregated server: theirs to keep.
		case have.Labels[autoManagedLabel] != "" &&
			(!equality.Semantic.DeepEqual(have.Spec, want.Spec) || have.Labels[autoManagedLabel] != want.Labels[autoManagedLabel]):
			updated, _, err := store.Update(ctx, "", name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
				as := cur.DeepCopyObject().(*apiregistrationv1.APIService)
				as.Spec = want.Spec
				if as.Labels == nil {
					as.Labels = map[string]string{}
				}
				as.Labels[autoManagedLabel] = want.Labels[autoManagedLabel]
				return as, nil
			}, registry.UpdateOptions{AllowUnconditional: true})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("updating APIService %s: %w", name, err)
			}
			if err == nil {
				existing[name] = updated.(*apiregistrationv1.APIService)
			}
		}
	}
	for name, have := range existing {
		if desired[name] != nil || have.Labels[autoManagedLabel] == "" || have.Spec.Service != nil {
			continue
		}
		_, _, err := store.Delete(ctx, "", name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(have.UID)}}, registry.WriteOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting APIService %s: %w", name, err)
		}
		delete(existing, name)
	}
	all := make([]*apiregistrationv1.APIService, 0, len(existing))
	for _, have := range existing {
		all = append(all, have)
	}
	s.aggregator.SetAPIServices(all)
	s.aggregator.Check(ctx)
	for name, have := range existing {
		want := s.availability(have)
		if c := apiregistrationv1helper.GetAPIServiceConditionByType(have, apiregistrationv1.Available); c != nil &&
			c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message {
			continue
		}
		_, _, err := store.Update(ctx, "", name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			as := cur.DeepCopyObject().(*apiregistrationv1.APIService)
			apiregistrationv1helper.SetAPIServiceCondition(as, s.availability(as))
			return as, nil
		}, registry.UpdateOptions{WriteOptions: registry.WriteOptions{Subresource: "status"}, Strategy: store.Resource.StatusStrategy, AllowUnconditional: true})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("updating the status of APIService %s: %w", name, err)
		}
	}
	return nil
}

// availability is the Available condition an APIService should have: true for a local
// one, as kube-aggregator says; for one that names a Service, what the last check of its
// server found.
func (s *Server) availability(as *apiregistrationv1.APIService) apiregistrationv1.APIServiceCondition {
	if as.Spec.Service == nil {
		return apiregistrationv1helper.NewLocalAvailableAPIServiceCondition()
	}
	c, ok := s.aggregator.Condition(as.Name, schema.GroupVersion{Group: as.Spec.Group, Version: as.Spec.Version})
	if !ok {
		c = apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse,
			Reason: aggregator.ReasonFailedDiscoveryCheck, Message: "not checked yet"}
	}
	c.LastTransitionTime = metav1.Now()
	return c
}
