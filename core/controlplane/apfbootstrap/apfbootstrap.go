// Package apfbootstrap keeps API Priority and Fairness' bootstrap configuration, as
// kube-apiserver's priority-and-fairness-config-producer does: the mandatory
// FlowSchemas and PriorityLevelConfigurations ("exempt", "catch-all") always exist with
// their fixed specs and are restored when deleted or changed; the suggested ones are
// created when missing and have their specs brought up to date only while the
// apf.kubernetes.io/autoupdate-spec annotation allows it; objects the bootstrap
// configuration no longer has are deleted when they still carry that annotation as
// "true". The objects themselves are k8s.io/apiserver's bootstrap package's.
package apfbootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
)

// FieldManager is the manager the ensurer's writes are recorded under (kube-apiserver's).
const FieldManager = "api-priority-and-fairness-config-producer-v1"

// Defaults kube-apiserver uses.
const (
	// DefaultInterval is how often the configuration is re-ensured once it has been.
	DefaultInterval = time.Minute
	// initialRetry and initialTimeout bound the first ensure, retried until it succeeds.
	initialRetry   = time.Second
	initialTimeout = 5 * time.Minute
)

// Ensurer keeps the bootstrap configuration through an API client.
type Ensurer struct {
	// Client reaches the API server (its loopback client).
	Client flowcontrolclient.FlowcontrolV1Interface
	// Interval is how often the configuration is re-ensured (0 = DefaultInterval).
	Interval time.Duration
	// Logger receives logs.
	Logger *slog.Logger
}

// Run ensures the configuration, retrying every second for up to five minutes until
// a pass succeeds, then again every Interval until ctx ends. It returns an error only
// when the first pass never succeeded.
func (e *Ensurer) Run(ctx context.Context) error {
	interval := e.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	log := e.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	initCtx, cancel := context.WithTimeout(ctx, initialTimeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(initCtx, initialRetry, true, func(ctx context.Context) (bool, error) {
		if err := e.Ensure(ctx); err != nil {
			log.Info("APF bootstrap configuration not ensured yet; retrying", "err", err)
			return false, nil
		}
		return true, nil
	}); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("ensuring the APF bootstrap configuration: %w", err)
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := e.Ensure(ctx); err != nil && ctx.Err() == nil {
			log.Error("ensuring the APF bootstrap configuration", "err", err)
		}
	}, interval)
	return nil
}

// Ensure makes one pass: suggested objects, then mandatory ones, then removal of the
// objects dropped from the bootstrap configuration.
func (e *Ensurer) Ensure(ctx context.Context) error {
	pls, fss := plKind(e.Client.PriorityLevelConfigurations()), fsKind(e.Client.FlowSchemas())
	steps := []func() error{
		func() error { return ensureAll(ctx, pls, bootstrap.SuggestedPriorityLevelConfigurations, false) },
		func() error { return ensureAll(ctx, fss, bootstrap.SuggestedFlowSchemas, false) },
		func() error { return ensureAll(ctx, pls, bootstrap.MandatoryPriorityLevelConfigurations, true) },
		func() error { return ensureAll(ctx, fss, bootstrap.MandatoryFlowSchemas, true) },
		func() error {
			return removeDropped(ctx, pls, append(names(bootstrap.MandatoryPriorityLevelConfigurations), names(bootstrap.SuggestedPriorityLevelConfigurations)...))
		},
		func() error {
			return removeDropped(ctx, fss, append(names(bootstrap.MandatoryFlowSchemas), names(bootstrap.SuggestedFlowSchemas)...))
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func names[T metav1.Object](objs []T) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetName()
	}
	return out
}

// client is what the ensurer uses of a typed client-go client.
type client[T, L any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// object is a FlowSchema or a PriorityLevelConfiguration.
type object interface {
	metav1.Object
	DeepCopyObject() runtime.Object
}

// kind is one of the two resources as the ensurer handles it.
type kind[T object, L any] struct {
	resource string
	client   client[T, L]
	items    func(L) []T
	// defaults applies the server's defaults, so that a bootstrap spec compares with a
	// stored one.
	defaults func(T)
	// spec returns the object's spec; setSpec copies src's spec into dst.
	spec    func(T) any
	setSpec func(dst, src T)
}

func copyOf[T object](o T) T { return o.DeepCopyObject().(T) }

// pointers points at each item of a list.
func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

func plKind(c flowcontrolclient.PriorityLevelConfigurationInterface) kind[*flowcontrolv1.PriorityLevelConfiguration, *flowcontrolv1.PriorityLevelConfigurationList] {
	type pl = *flowcontrolv1.PriorityLevelConfiguration
	return kind[pl, *flowcontrolv1.PriorityLevelConfigurationList]{
		resource: "prioritylevelconfigurations", client: c,
		items:    func(l *flowcontrolv1.PriorityLevelConfigurationList) []pl { return pointers(l.Items) },
		defaults: resources.DefaultPriorityLevelConfiguration,
		spec:     func(o pl) any { return o.Spec },
		setSpec:  func(dst, src pl) { dst.Spec = *src.Spec.DeepCopy() },
	}
}

func fsKind(c flowcontrolclient.FlowSchemaInterface) kind[*flowcontrolv1.FlowSchema, *flowcontrolv1.FlowSchemaList] {
	type fs = *flowcontrolv1.FlowSchema
	return kind[fs, *flowcontrolv1.FlowSchemaList]{
		resource: "flowschemas", client: c,
		items:    func(l *flowcontrolv1.FlowSchemaList) []fs { return pointers(l.Items) },
		defaults: resources.DefaultFlowSchema,
		spec:     func(o fs) any { return o.Spec },
		setSpec:  func(dst, src fs) { dst.Spec = *src.Spec.DeepCopy() },
	}
}

// ensureAll creates each wanted object that is missing and updates the ones whose
// annotation or (when allowed) spec differ. Mandatory objects always take the spec.
func ensureAll[T object, L any](ctx context.Context, k kind[T, L], wanted []T, mandatory bool) error {
	for _, w := range wanted {
		current, err := k.client.Get(ctx, w.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err := k.client.Create(ctx, copyOf(w), metav1.CreateOptions{FieldManager: FieldManager})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating %s %q: %w", k.resource, w.GetName(), err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s %q: %w", k.resource, w.GetName(), err)
		}
		autoUpdate := mandatory || autoUpdateSpec(current)
		want := copyOf(w)
		k.defaults(want)
		specChanged := autoUpdate && !apiequality.Semantic.DeepEqual(k.spec(current), k.spec(want))
		wantAnnotation := strconv.FormatBool(autoUpdate)
		if !specChanged && current.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey] == wantAnnotation {
			continue
		}
		obj := copyOf(current)
		if specChanged {
			k.setSpec(obj, w)
		}
		ann := map[string]string{}
		for key, v := range obj.GetAnnotations() {
			ann[key] = v
		}
		ann[flowcontrolv1.AutoUpdateAnnotationKey] = wantAnnotation
		obj.SetAnnotations(ann)
		// A conflict means someone wrote meanwhile; the next pass looks again.
		_, err = k.client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("updating %s %q: %w", k.resource, w.GetName(), err)
		}
	}
	return nil
}

// autoUpdateSpec is kube-apiserver's rule for a suggested object: the annotation decides
// when it holds a boolean; otherwise only an object never changed since its creation
// (generation 1) is kept up to date.
func autoUpdateSpec(obj metav1.Object) bool {
	if v, err := strconv.ParseBool(obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err == nil {
		return v
	}
	return obj.GetGeneration() == 1
}

// removeDropped deletes objects that carry the auto-update annotation, still allow
// auto-update, and are not in the bootstrap configuration (kube-apiserver drops
// configuration a newer version no longer suggests this way). Objects without the
// annotation are administrators' own and are left alone.
func removeDropped[T object, L any](ctx context.Context, k kind[T, L], bootstrapNames []string) error {
	keep := sets.New(bootstrapNames...)
	list, err := k.client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing %s: %w", k.resource, err)
	}
	for _, o := range k.items(list) {
		if _, ok := o.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]; !ok || keep.Has(o.GetName()) || !autoUpdateSpec(o) {
			continue
		}
		uid, rv := o.GetUID(), o.GetResourceVersion()
		err := k.client.Delete(ctx, o.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		if err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting %s %q: %w", k.resource, o.GetName(), err)
		}
	}
	return nil
}
