package apiserver

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/core/apiserver/aggregator"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/crdnames"
	"github.com/wasmplane/wasmplane/core/apiserver/customresource"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/storage"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/spec3"
)

var crdResource = apiextensionsv1.Resource("customresourcedefinitions")

// crdServer serves the custom resources of the CustomResourceDefinitions inside the API
// server: it accepts names and reports NamesAccepted and Established (Kubernetes' naming
// and establishing controllers), routes every served version as soon as the CRD is
// established, and deletes a deleted CRD's objects before letting the CRD go (the
// finalizer controller). It runs in the server because routing is the server's own
// state and a CRD must be served before it is reported Established.
type crdServer struct {
	s     *Server
	log   *slog.Logger
	crds  *registry.Store
	queue workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// seen is the latest state of every CRD.
	seen map[string]*apiextensionsv1.CustomResourceDefinition
	// served is what is routed for each CRD.
	served map[string]*servedCRD
	// converters builds the conversion webhook clients of CRDs that name one.
	converters *conversion.CRConverterFactory
}

// servedCRD is one CRD's storage and routes.
type servedCRD struct {
	uid     string
	prefix  string
	storage storage.Interface
	// built identifies the CRD state the routes were built from.
	built string
	// stores by version, for cleanup.
	stores      []*registry.Store
	terminating *bool
	// gvrs are the resources served for the CRD.
	gvrs []schema.GroupVersionResource
	// schema identifies the spec and names the stores read objects by; superseded is
	// closed when they change, which ends the watches opened under them.
	schema     string
	superseded chan struct{}
}

// RunCustomResources serves CustomResourceDefinitions until ctx ends.
func (s *Server) RunCustomResources(ctx context.Context, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &crdServer{s: s, log: log, crds: s.Store(crdResource),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 5*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "crds"}),
		seen: map[string]*apiextensionsv1.CustomResourceDefinition{}, served: map[string]*servedCRD{}}
	// Conversion webhooks reach a Service as the aggregation layer does; a CRD naming one
	// cannot be served without this, so failing to build it is logged and such CRDs wait.
	converters, err := conversion.NewCRConverterFactory(aggregator.ResolveService{Lookup: s.Lookup}, nil)
	if err != nil {
		log.Error("conversion webhooks unavailable", "err", err)
	}
	c.converters = converters
	var wg sync.WaitGroup
	wg.Go(func() { c.work(ctx) })
	c.watch(ctx)
	c.queue.ShutDown()
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.served {
		c.unserve(name)
	}
}

// watch keeps seen current and queues every CRD that changes, relisting after a broken
// watch.
func (c *crdServer) watch(ctx context.Context) {
	for ctx.Err() == nil {
		list, err := c.crds.List(ctx, "", &metav1.ListOptions{})
		if err != nil {
			c.log.Error("listing CustomResourceDefinitions", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		l := list.(*apiextensionsv1.CustomResourceDefinitionList)
		c.mu.Lock()
		old := c.seen
		c.seen = map[string]*apiextensionsv1.CustomResourceDefinition{}
		for i := range l.Items {
			c.seen[l.Items[i].Name] = &l.Items[i]
			c.queue.Add(l.Items[i].Name)
		}
		for name := range old {
			if c.seen[name] == nil {
				c.queue.Add(name)
			}
		}
		c.mu.Unlock()
		w, err := c.crds.Watch(ctx, "", &metav1.ListOptions{ResourceVersion: l.ResourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			c.log.Error("watching CustomResourceDefinitions", "err", err)
			continue
		}
		c.consume(ctx, w)
		w.Stop()
	}
}

func (c *crdServer) consume(ctx context.Context, w watch.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if e.Type == watch.Bookmark {
				// A bookmark carries an empty object with only a resourceVersion.
				continue
			}
			obj := e.Object
			if co, ok := obj.(runtime.CacheableObject); ok {
				obj = co.GetObject()
			}
			crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
			if !ok {
				if e.Type == watch.Error {
					return
				}
				continue
			}
			c.mu.Lock()
			if e.Type == watch.Deleted {
				delete(c.seen, crd.Name)
			} else {
				c.seen[crd.Name] = crd
			}
			c.mu.Unlock()
			c.queue.Add(crd.Name)
			// A name released or claimed may let another CRD of the group through.
			c.mu.Lock()
			for name, other := range c.seen {
				if other.Spec.Group == crd.Spec.Group && name != crd.Name && !apiextensionshelpers.IsCRDConditionTrue(other, apiextensionsv1.NamesAccepted) {
					c.queue.Add(name)
				}
			}
			c.mu.Unlock()
		}
	}
}

func (c *crdServer) work(ctx context.Context) {
	for {
		name, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		requeue, err := c.sync(ctx, name)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				c.log.Warn("serving a CustomResourceDefinition", "crd", name, "err", err)
			}
			c.queue.AddRateLimited(name)
		case requeue:
			c.queue.AddAfter(name, 100*time.Millisecond)
		default:
			c.queue.Forget(name)
		}
		c.queue.Done(name)
	}
}

// sync brings one CRD's status, routes and cleanup up to date. requeue asks for another
// pass soon (objects still being deleted).
func (c *crdServer) sync(ctx context.Context, name string) (requeue bool, err error) {
	c.mu.Lock()
	crd := c.seen[name]
	var all []*apiextensionsv1.CustomResourceDefinition
	for _, other := range c.seen {
		all = append(all, other)
	}
	c.mu.Unlock()
	if crd == nil {
		c.mu.Lock()
		c.unserve(name)
		c.mu.Unlock()
		return false, nil
	}
	if crd.DeletionTimestamp != nil {
		return c.cleanup(ctx, crd)
	}
	res := crdnames.Calculate(crd, all)
	next := crd.DeepCopy()
	next.Status.AcceptedNames = res.Names
	apiextensionshelpers.SetCRDCondition(next, res.NamesAccepted)
	if res.Established.Status == apiextensionsv1.ConditionTrue {
		// Routed before it is reported: whoever sees Established may use it at once.
		if err := c.serve(next); err != nil {
			return false, err
		}
	}
	apiextensionshelpers.SetCRDCondition(next, res.Established)
	if apiequalStatus(crd, next) {
		return false, nil
	}
	return false, c.writeStatus(ctx, name, func(cur *apiextensionsv1.CustomResourceDefinition) {
		cur.Status.AcceptedNames = res.Names
		apiextensionshelpers.SetCRDCondition(cur, res.NamesAccepted)
		apiextensionshelpers.SetCRDCondition(cur, res.Established)
	})
}

func apiequalStatus(a, b *apiextensionsv1.CustomResourceDefinition) bool {
	if !namesEqual(a.Status.AcceptedNames, b.Status.AcceptedNames) {
		return false
	}
	for _, t := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.NamesAccepted, apiextensionsv1.Established} {
		if !apiextensionshelpers.IsCRDConditionEquivalent(apiextensionshelpers.FindCRDCondition(a, t), apiextensionshelpers.FindCRDCondition(b, t)) {
			return false
		}
	}
	return true
}

func namesEqual(a, b apiextensionsv1.CustomResourceDefinitionNames) bool {
	return a.Plural == b.Plural && a.Singular == b.Singular && a.Kind == b.Kind && a.ListKind == b.ListKind &&
		slices.Equal(a.ShortNames, b.ShortNames) && slices.Equal(a.Categories, b.Categories)
}

// writeStatus changes the stored CRD's status with change, retrying on conflicts.
func (c *crdServer) writeStatus(ctx context.Context, name string, change func(*apiextensionsv1.CustomResourceDefinition)) error {
	_, _, err := c.crds.Update(ctx, "", name, func(_ context.Context, existing runtime.Object) (runtime.Object, error) {
		if existing == nil {
			return nil, apierrors.NewNotFound(crdResource, name)
		}
		cur := existing.DeepCopyObject().(*apiextensionsv1.CustomResourceDefinition)
		change(cur)
		return cur, nil
	}, registry.UpdateOptions{Strategy: c.crds.Resource.StatusStrategy, AllowUnconditional: true})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// serve routes every served version of crd (with accepted names), building storage once
// per CRD and routes again whenever the CRD changes.
func (c *crdServer) serve(crd *apiextensionsv1.CustomResourceDefinition) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	terminating := crd.DeletionTimestamp != nil
	built := fmt.Sprintf("%s/%d/%v/%v", crd.UID, crd.Generation, crd.Status.AcceptedNames, terminating)
	cur := c.served[crd.Name]
	if cur != nil && cur.built == built {
		return nil
	}
	versions, err := customresource.Build(crd)
	if err != nil {
		return err
	}
	var converter runtime.ObjectConvertor
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		if c.converters == nil {
			return fmt.Errorf("%s needs a conversion webhook and the webhook client could not be built", crd.Name)
		}
		if converter, _, err = c.converters.NewConverter(crd); err != nil {
			return fmt.Errorf("conversion webhook of %s: %w", crd.Name, err)
		}
	}
	prefix := customresource.StoragePrefix(crd)
	if cur != nil && (cur.uid != string(crd.UID) || cur.prefix != prefix) {
		c.unserve(crd.Name)
		cur = nil
	}
	if cur == nil {
		var storageRes registry.Resource
		var attrs []func(runtime.Object) (labels.Set, fields.Set, error)
		for _, v := range versions {
			attrs = append(attrs, v.Resource.GetAttrs)
			if v.Resource.GroupVersion.Version == v.StorageVersion {
				storageRes = *v.Resource
			}
		}
		// One store for every version: a field selector of any version can be matched.
		storageRes.GetAttrs = unionAttrs(attrs)
		st, err := c.s.newStorage(&storageRes, prefix)
		if err != nil {
			return fmt.Errorf("storage for %s: %w", crd.Name, err)
		}
		cur = &servedCRD{uid: string(crd.UID), prefix: prefix, storage: st, terminating: new(bool)}
		c.served[crd.Name] = cur
	}
	*cur.terminating = terminating
	cur.stores = nil
	if state := fmt.Sprintf("%s/%d/%v", crd.UID, crd.Generation, crd.Status.AcceptedNames); cur.schema != state {
		// Watches opened under the previous schema end, as kube-apiserver ends them when it
		// replaces a CRD's storage: their clients watch again and read by the new one.
		if cur.superseded != nil {
			close(cur.superseded)
		}
		cur.schema, cur.superseded = state, make(chan struct{})
	}
	// Apply merges lists and maps as the schemas' list-type and map-type say. One type
	// converter knows every version, as kube-apiserver's does: a manager's fields kept
	// in another version are typed in that version's schema.
	applyTypes, err := applyTypeConverter(crd)
	if err != nil {
		c.log.Warn("building the apply type converter of a custom resource", "crd", crd.Name, "err", err)
	}
	var defs []endpoints.Definition
	for _, v := range versions {
		res := v.Resource
		res.StoragePrefix = prefix
		res.Warning = v.Deprecation
		res.DefaultOnlyIfAdmissionChanged = true
		res.Convertor = converter
		coerce := v.Coerce
		res.Prune = func(obj runtime.Object) ([]string, error) {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return nil, nil
			}
			return coerce(u)
		}
		st := &customresource.Versioned{Inner: cur.storage, Served: res.GroupVersion,
			Stored: schema.GroupVersion{Group: res.GroupVersion.Group, Version: v.StorageVersion}, Read: v.Read, Converter: converter, Superseded: cur.superseded}
		store := registry.NewStore(res, st, prefix)
		store.Initializers = c.s.initializers
		cur.stores = append(cur.stores, store)
		if !v.Served {
			continue
		}
		flag := cur.terminating
		d := endpoints.Definition{Resource: res, Storage: st,
			CreateHandler: func(scope *endpoints.Scope) endpoints.HandlerFunc {
				return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
					if *flag {
						err := apierrors.NewMethodNotSupported(res.GroupResource(), "create")
						err.ErrStatus.Message = "create not allowed while custom resource definition is terminating"
						scope.Codecs.WriteError(w, req, err)
						return
					}
					scope.Create(w, req, r)
				}
			},
		}
		status, spec := v.Status, v.Scale
		if status != nil {
			// Writes of the object and of its status keep managedFields apart, and
			// neither owns what the other resets.
			res.StatusStrategy = status
		}
		d.Subresources = func(scope *endpoints.Scope) []endpoints.Subresource {
			var subs []endpoints.Subresource
			if status != nil {
				subs = append(subs, endpoints.StatusSubresource(scope, status))
			}
			if spec != nil {
				subs = append(subs, resources.ScaleSubresource(scope,
					func(obj runtime.Object) (*autoscalingv1.Scale, error) { return customresource.ToScale(spec, obj) },
					func(obj runtime.Object, n int32) { customresource.SetReplicas(spec, obj, n) }))
			}
			return subs
		}
		doc, err := builder.BuildOpenAPIV3(crd, res.GroupVersion.Version, builder.Options{V2: false, IncludeSelectableFields: true})
		if err != nil {
			// kubectl explain will not know the kind; serving does not depend on it.
			c.log.Warn("building the OpenAPI document of a custom resource", "crd", crd.Name, "version", res.GroupVersion.Version, "err", err)
		} else {
			d.OpenAPIV3 = doc
		}
		res.TypeConverter = applyTypes
		if v2, err := builder.BuildOpenAPIV2(crd, res.GroupVersion.Version, builder.Options{V2: true, IncludeSelectableFields: true}); err != nil {
			c.log.Warn("building the OpenAPI v2 definitions of a custom resource", "crd", crd.Name, "version", res.GroupVersion.Version, "err", err)
		} else {
			// The built-in document has its defaults pruned; so must the merged ones be,
			// as kube-apiserver's CRD OpenAPI controller does.
			v2.Definitions = handler.PruneDefaults(v2.Definitions)
			d.OpenAPIV2 = v2
		}
		if res.TypeConverter == nil {
			// Without a usable schema apply still works, with lists replaced whole.
			res.TypeConverter = managedfields.NewDeducedTypeConverter()
		}
		defs = append(defs, d)
	}
	var next []schema.GroupVersionResource
	for _, d := range defs {
		next = append(next, d.Resource.GroupVersionResource())
	}
	if err := c.s.ReplaceResources(cur.gvrs, defs...); err != nil {
		return fmt.Errorf("serving %s: %w", crd.Name, err)
	}
	cur.gvrs = next
	cur.built = built
	return nil
}

// unserve stops routing a CRD and releases its storage (under mu).
func (c *crdServer) unserve(name string) {
	cur := c.served[name]
	if cur == nil {
		return
	}
	delete(c.served, name)
	if cur.superseded != nil {
		close(cur.superseded)
	}
	if err := c.s.ReplaceResources(cur.gvrs); err != nil {
		c.log.Warn("no longer serving a CustomResourceDefinition", "crd", name, "err", err)
	}
	if st, ok := cur.storage.(interface{ Stop() }); ok {
		st.Stop()
	}
}

// cleanup deletes every object of a CRD being deleted, then removes the cleanup
// finalizer, as Kubernetes' finalizer controller does; the objects stay served (but not
// creatable) meanwhile.
func (c *crdServer) cleanup(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	if !apiextensionshelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
		return false, nil
	}
	if apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		if err := c.serve(crd); err != nil {
			return false, err
		}
	}
	c.mu.Lock()
	var store *registry.Store
	if cur := c.served[crd.Name]; cur != nil && len(cur.stores) > 0 {
		store = cur.stores[0]
	}
	c.mu.Unlock()
	if store != nil {
		_, err := store.DeleteCollection(registry.WithIncludeUninitialized(ctx), "", &metav1.DeleteOptions{}, &metav1.ListOptions{}, registry.WriteOptions{})
		if err != nil {
			return false, c.cleanupFailed(ctx, crd, err)
		}
		left, err := store.List(registry.WithIncludeUninitialized(ctx), "", &metav1.ListOptions{})
		if err != nil {
			return false, c.cleanupFailed(ctx, crd, err)
		}
		if meta.LenList(left) > 0 {
			if err := c.writeStatus(ctx, crd.Name, func(cur *apiextensionsv1.CustomResourceDefinition) {
				apiextensionshelpers.SetCRDCondition(cur, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
					Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress"})
			}); err != nil {
				return false, err
			}
			return true, nil
		}
	}
	_, _, err := c.crds.Update(ctx, "", crd.Name, func(_ context.Context, existing runtime.Object) (runtime.Object, error) {
		if existing == nil {
			return nil, apierrors.NewNotFound(crdResource, crd.Name)
		}
		cur := existing.DeepCopyObject().(*apiextensionsv1.CustomResourceDefinition)
		apiextensionshelpers.SetCRDCondition(cur, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionFalse,
			Reason: "InstanceDeletionCompleted", Message: "removed all instances"})
		apiextensionshelpers.CRDRemoveFinalizer(cur, apiextensionsv1.CustomResourceCleanupFinalizer)
		return cur, nil
	}, registry.UpdateOptions{AllowUnconditional: true})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return false, err
}

func (c *crdServer) cleanupFailed(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, cause error) error {
	if err := c.writeStatus(ctx, crd.Name, func(cur *apiextensionsv1.CustomResourceDefinition) {
		apiextensionshelpers.SetCRDCondition(cur, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
			Reason: "InstanceDeletionFailed", Message: fmt.Sprintf("could not delete instances: %v", cause)})
	}); err != nil {
		return err
	}
	return cause
}

// unionAttrs matches field selectors of every version of a CRD on one store.
func unionAttrs(fns []func(runtime.Object) (labels.Set, fields.Set, error)) func(runtime.Object) (labels.Set, fields.Set, error) {
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		var ls labels.Set
		fs := fields.Set{}
		for _, fn := range fns {
			l, f, err := fn(obj)
			if err != nil {
				return nil, nil, err
			}
			ls = l
			for k, v := range f {
				fs[k] = v
			}
		}
		return ls, fs, nil
	}
}

// preserveUnknown tells whether a CRD keeps fields its schema does not name (the
// deprecated top-level flag), which apply's type converter must know.
// applyTypeConverter types the objects of every version of crd for server-side apply.
func applyTypeConverter(crd *apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, error) {
	var specs []*spec3.OpenAPI
	for _, v := range crd.Spec.Versions {
		doc, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return nil, fmt.Errorf("version %s: %w", v.Name, err)
		}
		specs = append(specs, doc)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, err
	}
	return managedfields.NewTypeConverter(merged.Components.Schemas, preserveUnknown(crd))
}

func preserveUnknown(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd.Spec.PreserveUnknownFields
}
