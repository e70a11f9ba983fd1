package registry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/apiserver/filters"
	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/trace"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// Finalizers the API server adds for non-background propagation; the garbage collector
// removes them.
const (
	FinalizerOrphan     = metav1.FinalizerOrphanDependents
	FinalizerForeground = metav1.FinalizerDeleteDependents
)

// Admission is the admission chain a write passes through: Admit (mutating) before
// validation, Validate after. *admission.Chain implements it.
type Admission interface {
	Admit(ctx context.Context, a *admission.Attributes) error
	Validate(ctx context.Context, a *admission.Attributes) error
	// StartValidate begins the validating phase beside the object's own validation.
	StartValidate(ctx context.Context, a *admission.Attributes) *admission.Validation
}

// Store is the REST behaviour of one resource on top of storage.
type Store struct {
	// Resource is what is served.
	Resource *Resource
	// Storage keeps the objects.
	Storage storage.Interface
	// Prefix is the storage key prefix, e.g. "/registry/pods".
	Prefix string
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Initializers, when set, adds pending initializers to new objects.
	Initializers Initializers
	// Traces, when set, keeps the journey of created objects (`wasmplane trace`).
	Traces *trace.Store
}

// TraceKey is the key of an object's record in Traces.
func (s *Store) TraceKey(namespace, name string) string {
	return s.Resource.Name + "/" + namespace + "/" + name
}

// NewStore returns a Store keeping r under prefix in s.
func NewStore(r *Resource, s storage.Interface, prefix string) *Store {
	return &Store{Resource: r, Storage: s, Prefix: prefix}
}

func (s *Store) now() metav1.Time {
	if s.Now != nil {
		return metav1.NewTime(s.Now())
	}
	return metav1.Now()
}

// Key is the storage key of one object.
func (s *Store) Key(namespace, name string) string {
	if s.Resource.Namespaced {
		return s.Prefix + "/" + namespace + "/" + name
	}
	return s.Prefix + "/" + name
}

// ListKey is the storage prefix of a list in namespace ("" = all).
func (s *Store) ListKey(namespace string) string {
	if s.Resource.Namespaced && namespace != "" {
		return s.Prefix + "/" + namespace + "/"
	}
	return s.Prefix + "/"
}

func (s *Store) invalid(name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(s.Resource.GroupVersionKind().GroupKind(), name, errs)
}

// WriteOptions are the options common to create, update and delete.
type WriteOptions struct {
	// DryRun validates and admits but stores nothing.
	DryRun bool
	// Admission is the chain to run; nil = none.
	Admission Admission
	// Subresource is the subresource written through ("status", "binding", …).
	Subresource string
	// Defaulted says the caller already applied the strategy's defaults to the object
	// (the create handler does, to record managed fields of the defaulted object), so
	// the store does not repeat them before admission.
	Defaulted bool
}

// defaultAdmitted applies the strategy's defaults to an object that went through
// mutating admission, unless the resource says only a dynamic plugin's change needs
// them again and none made one.
func (s *Store) defaultAdmitted(strategy Strategy, obj runtime.Object, attrs *admission.Attributes) {
	if s.Resource.DefaultOnlyIfAdmissionChanged && !attrs.MaybeChangedByDynamic() {
		return
	}
	strategy.Default(obj)
}

func (o WriteOptions) admit(ctx context.Context, a *admission.Attributes) error {
	if o.Admission == nil {
		return nil
	}
	return o.Admission.Admit(ctx, a)
}

func (o WriteOptions) validate(ctx context.Context, a *admission.Attributes) error {
	if o.Admission == nil {
		return nil
	}
	return o.Admission.Validate(ctx, a)
}

// startValidate begins the validating admission plugins of a write whose object is final,
// so that they run while the registry validates the object; nil without a chain.
func (o WriteOptions) startValidate(ctx context.Context, a *admission.Attributes) *admission.Validation {
	if o.Admission == nil {
		return nil
	}
	return o.Admission.StartValidate(ctx, a)
}

// attributes describes a write for admission.
func (s *Store) attributes(ctx context.Context, op admission.Operation, namespace, name string, obj, old runtime.Object, o WriteOptions) *admission.Attributes {
	a := &admission.Attributes{
		Kind: s.Resource.GroupVersionKind(), Resource: s.Resource.GroupVersion.WithResource(s.Resource.Name),
		Subresource: o.Subresource, Namespace: namespace, Name: name, Operation: op, Object: obj, OldObject: old, DryRun: o.DryRun,
	}
	if u, ok := filters.UserFrom(ctx); ok {
		a.User = admission.UserInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	}
	return a
}

// validateCreate is the registry's own validation of a new object.
func (s *Store) validateCreate(ctx context.Context, accessor metav1.Object, obj runtime.Object) error {
	if errs := s.validateMeta(accessor); len(errs) > 0 {
		return s.invalid(accessor.GetName(), errs)
	}
	if errs := s.Resource.Strategy.Validate(ctx, obj); len(errs) > 0 {
		return s.invalid(accessor.GetName(), errs)
	}
	if s.Resource.CheckWrite != nil {
		return s.Resource.CheckWrite(ctx, obj, nil)
	}
	return nil
}

// validateUpdate is the registry's own validation of an object replacing current.
func (s *Store) validateUpdate(ctx context.Context, strategy Strategy, name string, accessor, existingMeta metav1.Object, obj, current runtime.Object) error {
	errs := apimachineryvalidation.ValidateObjectMetaAccessorUpdate(metaForValidation(accessor), existingMeta, field.NewPath("metadata"))
	errs = append(errs, s.validateMeta(accessor)...)
	if existingMeta.GetDeletionTimestamp() != nil {
		errs = append(errs, apimachineryvalidation.ValidateNoNewFinalizers(accessor.GetFinalizers(), existingMeta.GetFinalizers(), field.NewPath("metadata", "finalizers"))...)
	}
	errs = append(errs, strategy.ValidateUpdate(ctx, obj, current)...)
	if len(errs) > 0 {
		return s.invalid(name, errs)
	}
	if s.Resource.CheckWrite != nil {
		return s.Resource.CheckWrite(ctx, obj, current)
	}
	return nil
}

// Create stores a new object in namespace.
func (s *Store) Create(ctx context.Context, namespace string, obj runtime.Object, opts WriteOptions) (runtime.Object, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := s.checkNamespace(namespace, accessor); err != nil {
		return nil, err
	}
	generated := accessor.GetName() == "" && accessor.GetGenerateName() != ""
	if generated {
		accessor.SetName(generateName(accessor.GetGenerateName()))
	}
	// Server-owned metadata is reset whatever the client sent.
	accessor.SetUID(uuid.NewUUID())
	accessor.SetCreationTimestamp(s.now())
	accessor.SetResourceVersion("")
	accessor.SetDeletionTimestamp(nil)
	accessor.SetDeletionGracePeriodSeconds(nil)
	accessor.SetSelfLink("")
	if s.Resource.TracksGeneration {
		accessor.SetGeneration(1)
	} else {
		accessor.SetGeneration(0)
	}
	if !opts.Defaulted {
		s.Resource.Strategy.Default(obj)
	}
	s.Resource.Strategy.PrepareForCreate(ctx, obj)
	attrs := s.attributes(ctx, admission.Create, namespace, accessor.GetName(), obj, nil, opts)
	if err := opts.admit(ctx, attrs); err != nil {
		return nil, err
	}
	// A mutating plugin may have replaced the object.
	obj = attrs.Object
	if accessor, err = meta.Accessor(obj); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	s.defaultAdmitted(s.Resource.Strategy, obj, attrs)
	// Kubernetes prepares the object after mutating admission: what the server derives
	// (a pod's QoS class from LimitRanger's defaults) sees the plugins' changes.
	s.Resource.Strategy.PrepareForCreate(ctx, obj)
	// The object is final: the validating plugins start now and run beside its validation.
	admitting := opts.startValidate(ctx, attrs)
	if err := s.validateCreate(ctx, accessor, obj); err != nil {
		admitting.Abandon()
		return nil, err
	}
	if err := admitting.Finish(); err != nil {
		return nil, err
	}
	pending := s.setPending(ctx, obj)
	finish := func(context.Context, bool) {}
	if a := s.Resource.Allocator; a != nil {
		if finish, err = a.BeginCreate(ctx, obj, opts.DryRun); err != nil {
			return nil, err
		}
	}
	if opts.DryRun {
		finish(ctx, false)
		// A dry run must still report a name clash, as Kubernetes does.
		existing := s.Resource.NewFunc()
		err := s.Storage.Get(ctx, s.Key(namespace, accessor.GetName()), storage.GetOptions{IgnoreNotFound: true}, existing)
		if err != nil {
			return nil, err
		}
		if em, _ := meta.Accessor(existing); em != nil && em.GetUID() != "" {
			return nil, apierrors.NewAlreadyExists(s.Resource.GroupResource(), accessor.GetName())
		}
		return obj, nil
	}
	out := s.Resource.NewFunc()
	if _, ok := obj.(*unstructured.Unstructured); ok {
		// Nothing reads obj once it is stored but for its name, which storing keeps: the
		// storage turns it into the stored object in place rather than copying it.
		out = obj
	}
	storeStart := time.Now()
	err = s.Storage.Create(ctx, s.Key(namespace, accessor.GetName()), obj, out)
	// A generated name that is already taken is drawn again, as Kubernetes does.
	for try := 0; apierrors.IsAlreadyExists(err) && generated && try < 8; try++ {
		accessor.SetName(generateName(accessor.GetGenerateName()))
		err = s.Storage.Create(ctx, s.Key(namespace, accessor.GetName()), obj, out)
	}
	finish(ctx, err == nil)
	if err != nil {
		return nil, err
	}
	if s.Traces != nil {
		if m, err := meta.Accessor(out); err == nil {
			steps := append(trace.From(ctx).Steps(), trace.Step{Time: storeStart, Duration: time.Since(storeStart),
				Component: "storage", Step: "create", Result: "stored", Detail: "resourceVersion " + m.GetResourceVersion()})
			if len(pending) > 0 {
				steps = append(steps, trace.Step{Time: time.Now(), Component: "initializers", Step: "pending", Result: "waiting", Detail: strings.Join(pending, ", ")})
			}
			s.Traces.Begin(s.TraceKey(namespace, m.GetName()), string(m.GetUID()), steps)
		}
	}
	if len(pending) > 0 {
		s.Initializers.Waiting(s.Resource.GroupVersion.WithResource(s.Resource.Name), namespace, accessor.GetName())
	}
	return out, nil
}

func (s *Store) validateMeta(accessor metav1.Object) field.ErrorList {
	nameFn := apimachineryvalidation.NameIsDNSSubdomain
	if s.Resource.ValidateName != nil {
		nameFn = s.Resource.ValidateName
	}
	return apimachineryvalidation.ValidateObjectMetaAccessor(metaForValidation(accessor), s.Resource.Namespaced, nameFn, field.NewPath("metadata"))
}

// checkNamespace reconciles the namespace in the URL with the one in the body.
func (s *Store) checkNamespace(namespace string, accessor metav1.Object) error {
	if !s.Resource.Namespaced {
		if accessor.GetNamespace() != "" {
			accessor.SetNamespace("")
		}
		return nil
	}
	switch objNS := accessor.GetNamespace(); {
	case objNS == "":
		accessor.SetNamespace(namespace)
	case objNS != namespace:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

// Get returns one object.
func (s *Store) Get(ctx context.Context, namespace, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	out := s.Resource.NewFunc()
	rv := ""
	if opts != nil {
		rv = opts.ResourceVersion
	}
	if err := s.Storage.Get(ctx, s.Key(namespace, name), storage.GetOptions{ResourceVersion: rv}, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Predicate converts list options to a storage predicate, refusing unsupported field
// selectors the way Kubernetes does.
func (s *Store) Predicate(opts *metav1.ListOptions) (storage.SelectionPredicate, error) {
	// GetAttrs stays nil: storage computes each object's fields once (StorageAttrs)
	// instead of once per watcher and event.
	p := storage.SelectionPredicate{Label: labels.Everything(), Field: fields.Everything()}
	if opts == nil {
		return p, nil
	}
	if opts.LabelSelector != "" {
		sel, err := labels.Parse(opts.LabelSelector)
		if err != nil {
			return p, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
		p.Label = sel
	}
	if opts.FieldSelector != "" {
		sel, err := fields.ParseSelector(opts.FieldSelector)
		if err != nil {
			return p, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
		for _, r := range sel.Requirements() {
			if r.Field == "metadata.name" || (r.Field == "metadata.namespace" && s.Resource.Namespaced) {
				continue
			}
			if !slices.Contains(s.Resource.FieldLabels, r.Field) {
				return p, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
			}
		}
		p.Field = sel
	}
	p.Limit = opts.Limit
	p.Continue = opts.Continue
	p.AllowWatchBookmarks = opts.AllowWatchBookmarks
	return p, nil
}

// DefaultAttrs returns an object's labels and its metadata.name/namespace fields.
func DefaultAttrs(obj runtime.Object, namespaced bool) (labels.Set, fields.Set, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("reading object metadata: %w", err)
	}
	f := fields.Set{"metadata.name": accessor.GetName()}
	if namespaced {
		f["metadata.namespace"] = accessor.GetNamespace()
	}
	return labels.Set(accessor.GetLabels()), f, nil
}

// List returns the objects of namespace ("" = all) matching opts.
func (s *Store) List(ctx context.Context, namespace string, opts *metav1.ListOptions) (runtime.Object, error) {
	p, err := s.Predicate(opts)
	if err != nil {
		return nil, err
	}
	if !includeUninitialized(ctx) {
		p.CountRemaining = p.Empty()
		p.Field = hideUninitialized(p.Field)
	}
	lo := storage.ListOptions{Predicate: p, Recursive: true}
	if opts != nil {
		lo.ResourceVersion = opts.ResourceVersion
		lo.ResourceVersionMatch = opts.ResourceVersionMatch
	}
	out := s.Resource.NewListFunc()
	if err := s.Storage.GetList(ctx, s.ListKey(namespace), lo, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Watch streams changes to the objects of namespace ("" = all) matching opts.
func (s *Store) Watch(ctx context.Context, namespace string, opts *metav1.ListOptions) (watch.Interface, error) {
	p, err := s.Predicate(opts)
	if err != nil {
		return nil, err
	}
	if !includeUninitialized(ctx) {
		p.Field = hideUninitialized(p.Field)
	}
	lo := storage.ListOptions{Predicate: p, Recursive: true}
	if opts != nil {
		lo.ResourceVersion = opts.ResourceVersion
		lo.ResourceVersionMatch = opts.ResourceVersionMatch
		lo.SendInitialEvents = opts.SendInitialEvents
	}
	return s.Storage.Watch(ctx, s.ListKey(namespace), lo)
}

// UpdatedObjectFunc computes the object a client asks for from the stored one (for PUT
// the body, for PATCH the patched current object). existing is nil when nothing is stored.
type UpdatedObjectFunc func(ctx context.Context, existing runtime.Object) (runtime.Object, error)

// UpdateOptionsFor returns the options of an update through the resource's main
// endpoint (PUT of the object; strategy nil) or through a subresource with strategy:
// create-on-update and unconditional update as the descriptor allows them.
func (s *Store) UpdateOptionsFor(w WriteOptions, strategy Strategy) UpdateOptions {
	return UpdateOptions{WriteOptions: w, Strategy: strategy,
		AllowCreate: strategy == nil && s.Resource.AllowCreateOnUpdate, AllowUnconditional: s.Resource.AllowUnconditionalUpdate}
}

// UpdateOptions are the options of an update.
type UpdateOptions struct {
	WriteOptions
	// Strategy overrides the resource's strategy (the status subresource).
	Strategy Strategy
	// AllowCreate creates the object when it does not exist (PUT of a missing object
	// for resources that allow it).
	AllowCreate bool
	// AllowUnconditional lets an update without resourceVersion through.
	AllowUnconditional bool
	// BeforeWrite, when set, sees the final object of an update of an existing object
	// after validation, with old the stored one (managedFields keep their times when
	// nothing else changed).
	BeforeWrite func(obj, old runtime.Object)
}

// Update applies objFunc to the stored object with optimistic concurrency.
func (s *Store) Update(ctx context.Context, namespace, name string, objFunc UpdatedObjectFunc, opts UpdateOptions) (runtime.Object, bool, error) {
	strategy := opts.Strategy
	if strategy == nil {
		strategy = s.Resource.Strategy
	}
	key := s.Key(namespace, name)
	created := false
	var dryRunResult runtime.Object
	var oldPending string
	// finish ends the allocation of the last attempt; an attempt retried after a conflict
	// first releases what the one before it reserved.
	var finish func(context.Context, bool)
	endAttempt := func(stored bool) {
		if finish != nil {
			finish(ctx, stored)
			finish = nil
		}
	}
	out := s.Resource.NewFunc()
	err := s.Storage.GuaranteedUpdate(ctx, key, out, true, nil, func(current runtime.Object, _ storage.ResponseMeta) (runtime.Object, error) {
		endAttempt(false)
		existingMeta, err := meta.Accessor(current)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		exists := existingMeta.GetUID() != "" || existingMeta.GetResourceVersion() != ""
		var existing runtime.Object
		if exists {
			existing = current
		}
		if existing != nil {
			oldPending = strings.Join(PendingInitializers(existing), ",")
		}
		obj, err := objFunc(ctx, existing)
		if err != nil {
			return nil, err
		}
		accessor, err := meta.Accessor(obj)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if err := s.checkNamespace(namespace, accessor); err != nil {
			return nil, err
		}
		if accessor.GetName() != name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", accessor.GetName(), name))
		}
		if !exists {
			if !opts.AllowCreate {
				return nil, apierrors.NewNotFound(s.Resource.GroupResource(), name)
			}
			created = true
			res, err := s.Create(ctx, namespace, obj, WriteOptions{DryRun: true, Admission: opts.Admission, Subresource: opts.Subresource})
			if err != nil {
				return nil, err
			}
			if opts.DryRun {
				dryRunResult = res
				return nil, errDryRunDone
			}
			if a := s.Resource.Allocator; a != nil {
				if finish, err = a.BeginCreate(ctx, res, false); err != nil {
					return nil, err
				}
			}
			return res, nil
		}
		newRV := accessor.GetResourceVersion()
		if newRV == "" {
			if !opts.AllowUnconditional {
				// Kubernetes' message, which names the resource where the kind would be.
				gk := schema.GroupKind{Group: s.Resource.GroupVersion.Group, Kind: s.Resource.Name}
				return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "resourceVersion"), 0, "must be specified for an update")})
			}
			// An unconditional update replaces whatever is stored: it is validated and
			// written as an update of the current revision.
			accessor.SetResourceVersion(existingMeta.GetResourceVersion())
		} else if newRV != existingMeta.GetResourceVersion() {
			return nil, apierrors.NewConflict(s.Resource.GroupResource(), name, errors.New(storage.OptimisticLockErrorMsg))
		}
		s.keepServerMeta(accessor, existingMeta)
		strategy.Default(obj)
		strategy.PrepareForUpdate(ctx, obj, current)
		attrs := s.attributes(ctx, admission.Update, namespace, name, obj, current, opts.WriteOptions)
		if err := opts.admit(ctx, attrs); err != nil {
			return nil, err
		}
		obj = attrs.Object
		if accessor, err = meta.Accessor(obj); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		s.defaultAdmitted(strategy, obj, attrs)
		if s.Resource.TracksGeneration && specChanged(obj, current) {
			accessor.SetGeneration(existingMeta.GetGeneration() + 1)
		}
		admitting := opts.startValidate(ctx, attrs)
		if err := s.validateUpdate(ctx, strategy, name, accessor, existingMeta, obj, current); err != nil {
			admitting.Abandon()
			return nil, err
		}
		if err := admitting.Finish(); err != nil {
			return nil, err
		}
		// The stored revision is the precondition of the write, not the client's copy.
		accessor.SetResourceVersion(existingMeta.GetResourceVersion())
		if opts.BeforeWrite != nil {
			opts.BeforeWrite(obj, current)
		}
		if a := s.Resource.Allocator; a != nil && opts.Strategy == nil {
			if finish, err = a.BeginUpdate(ctx, obj, current, opts.DryRun); err != nil {
				return nil, err
			}
		}
		if opts.DryRun {
			endAttempt(false)
			dryRunResult = obj
			return nil, errDryRunDone
		}
		return obj, nil
	})
	endAttempt(err == nil)
	if errors.Is(err, errDryRunDone) {
		return dryRunResult, created, nil
	}
	if err != nil {
		return nil, false, err
	}
	if s.Initializers != nil && len(PendingInitializers(out)) > 0 {
		s.Initializers.Waiting(s.Resource.GroupVersion.WithResource(s.Resource.Name), namespace, name)
	}
	if newPending := strings.Join(PendingInitializers(out), ","); s.Traces != nil && newPending != oldPending {
		s.traceInitializer(ctx, namespace, name, out, oldPending, newPending)
	}
	// An update that removed the last finalizer of an object being deleted completes the
	// deletion, as in Kubernetes.
	if m, _ := meta.Accessor(out); m != nil && m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 &&
		(m.GetDeletionGracePeriodSeconds() == nil || *m.GetDeletionGracePeriodSeconds() == 0) && !s.retain(out) {
		uid := m.GetUID()
		deleted := s.Resource.NewFunc()
		derr := s.Storage.Delete(ctx, key, deleted, &storage.Preconditions{UID: &uid}, nil)
		if derr == nil {
			s.release(ctx, deleted)
			return deleted, false, nil
		}
		if !apierrors.IsNotFound(derr) && !apierrors.IsConflict(derr) {
			return nil, false, derr
		}
	}
	return out, created, nil
}

var errDryRunDone = errors.New("wasmplane: dry run complete")

// keepServerMeta carries over what only the server sets.
func (s *Store) keepServerMeta(obj, old metav1.Object) {
	if obj.GetUID() == "" {
		obj.SetUID(old.GetUID())
	}
	obj.SetCreationTimestamp(old.GetCreationTimestamp())
	obj.SetDeletionTimestamp(old.GetDeletionTimestamp())
	obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	obj.SetGeneration(old.GetGeneration())
	obj.SetSelfLink("")
	if obj.GetGenerateName() == "" {
		obj.SetGenerateName(old.GetGenerateName())
	}
}

// specChanged compares everything but metadata and status.
func specChanged(obj, old runtime.Object) bool {
	a, b := reflect.ValueOf(obj).Elem(), reflect.ValueOf(old).Elem()
	for i := 0; i < a.NumField(); i++ {
		switch a.Type().Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
			continue
		}
		if !apiequality.Semantic.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			return true
		}
	}
	return false
}

// Delete deletes one object, gracefully or through finalizers where that applies. The
// bool is true when the object is gone from storage.
func (s *Store) Delete(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions, wopts WriteOptions) (runtime.Object, bool, error) {
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	for {
		out, gone, err := s.deleteOnce(ctx, namespace, name, opts, wopts)
		// The object the checks were made on was deleted and created anew before the
		// write: the delete is of whatever is stored when it is written (as kube-apiserver's
		// storage, which re-checks the latest object), so it starts over on the new one.
		// Only a client's own uid or resourceVersion precondition makes this a conflict.
		if errors.Is(err, errReplaced) {
			continue
		}
		return out, gone, err
	}
}

// errReplaced says that the object a delete checked is no longer the one stored.
var errReplaced = errors.New("wasmplane: the object was replaced during the delete")

// deleteOnce checks the stored object, then deletes it (or marks it deleted) provided it
// is still the same object (same uid) and the client's preconditions still hold.
func (s *Store) deleteOnce(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions, wopts WriteOptions) (runtime.Object, bool, error) {
	key := s.Key(namespace, name)
	current := s.Resource.NewFunc()
	if err := s.Storage.Get(ctx, key, storage.GetOptions{}, current); err != nil {
		return nil, false, err
	}
	cm, err := meta.Accessor(current)
	if err != nil {
		return nil, false, apierrors.NewInternalError(err)
	}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != cm.GetUID() {
			return nil, false, apierrors.NewConflict(s.Resource.GroupResource(), name,
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, cm.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != cm.GetResourceVersion() {
			return nil, false, apierrors.NewConflict(s.Resource.GroupResource(), name,
				fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, cm.GetResourceVersion()))
		}
	}
	if s.Resource.DeleteNotAllowed != nil {
		if err := s.Resource.DeleteNotAllowed(current); err != nil {
			return nil, false, err
		}
	}
	if err := wopts.validate(ctx, s.attributes(ctx, admission.Delete, namespace, name, nil, current, wopts)); err != nil {
		return nil, false, err
	}
	var grace int64
	if s.Resource.GracefulDelete != nil {
		grace = s.Resource.GracefulDelete(current, opts)
	}
	finalizers := deleteFinalizers(cm.GetFinalizers(), opts, s.Resource.OrphanByDefault)
	if wopts.DryRun {
		return current, false, nil
	}
	// The checks above read the object before this write: storage checks the client's
	// preconditions again in the write itself, or a write between the two would be deleted
	// despite them; and the write must meet the object that was checked, not a new one of
	// the same name.
	uid := cm.GetUID()
	pre := &storage.Preconditions{}
	if opts.Preconditions != nil {
		pre.UID, pre.ResourceVersion = opts.Preconditions.UID, opts.Preconditions.ResourceVersion
	}
	sameObject := func(_ context.Context, obj runtime.Object) error {
		m, err := meta.Accessor(obj)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if m.GetUID() != uid {
			return errReplaced
		}
		return nil
	}
	if grace > 0 || len(finalizers) > 0 || s.Resource.OnDeleteMarked != nil || s.retain(current) {
		out := s.Resource.NewFunc()
		var gone bool
		err := s.Storage.GuaranteedUpdate(ctx, key, out, false, pre, func(obj runtime.Object, _ storage.ResponseMeta) (runtime.Object, error) {
			if err := sameObject(ctx, obj); err != nil {
				return nil, err
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			fin := deleteFinalizers(m.GetFinalizers(), opts, s.Resource.OrphanByDefault)
			m.SetFinalizers(fin)
			now := s.now()
			if dt := m.GetDeletionTimestamp(); dt == nil {
				t := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
				m.SetDeletionTimestamp(&t)
				g := grace
				m.SetDeletionGracePeriodSeconds(&g)
			} else if g := m.GetDeletionGracePeriodSeconds(); g != nil && grace < *g {
				// A shorter grace period shortens a pending graceful deletion.
				t := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
				m.SetDeletionTimestamp(&t)
				gg := grace
				m.SetDeletionGracePeriodSeconds(&gg)
			}
			if s.Resource.OnDeleteMarked != nil {
				s.Resource.OnDeleteMarked(obj)
			}
			gone = len(m.GetFinalizers()) == 0 && *m.GetDeletionGracePeriodSeconds() == 0 && !s.retain(obj)
			return obj, nil
		})
		if err != nil {
			return nil, false, err
		}
		if !gone {
			return out, false, nil
		}
		// The update above changed the resourceVersion; sameObject still holds the delete
		// to the object marked. Once marked, the object is this delete's to remove: if
		// something else removed it first (and maybe created another of the same name),
		// the delete is done, with the marked object as its last state (as Kubernetes).
		marked := out
		out = s.Resource.NewFunc()
		err = s.Storage.Delete(ctx, key, out, nil, sameObject)
		if errors.Is(err, errReplaced) || apierrors.IsNotFound(err) {
			return marked, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		return out, true, nil
	}
	out := s.Resource.NewFunc()
	if err := s.Storage.Delete(ctx, key, out, pre, sameObject); err != nil {
		return nil, false, err
	}
	s.release(ctx, out)
	return out, true, nil
}

// release frees what a deleted object held in the resource's allocator.
func (s *Store) release(ctx context.Context, deleted runtime.Object) {
	if a := s.Resource.Allocator; a != nil {
		a.Release(ctx, deleted)
	}
}

func (s *Store) retain(obj runtime.Object) bool {
	return s.Resource.Retain != nil && s.Resource.Retain(obj)
}

// deleteFinalizers adds the propagation finalizers a delete asks for. Without a policy in
// the request, a propagation finalizer already on the object decides, else the
// resource's default: orphan when orphanByDefault, else background.
func deleteFinalizers(existing []string, opts *metav1.DeleteOptions, orphanByDefault bool) []string {
	fin := slices.Clone(existing)
	policy := metav1.DeletePropagationBackground
	switch {
	case opts.PropagationPolicy != nil:
		policy = *opts.PropagationPolicy
	case opts.OrphanDependents != nil:
		if *opts.OrphanDependents {
			policy = metav1.DeletePropagationOrphan
		}
	case orphanByDefault && !slices.Contains(existing, FinalizerForeground):
		policy = metav1.DeletePropagationOrphan
	}
	add := func(f string) {
		if !slices.Contains(fin, f) {
			fin = append(fin, f)
		}
	}
	remove := func(f string) { fin = slices.DeleteFunc(fin, func(x string) bool { return x == f }) }
	switch policy {
	case metav1.DeletePropagationOrphan:
		add(FinalizerOrphan)
		remove(FinalizerForeground)
	case metav1.DeletePropagationForeground:
		add(FinalizerForeground)
		remove(FinalizerOrphan)
	}
	return fin
}

// DeleteCollection deletes every object of namespace matching listOpts.
func (s *Store) DeleteCollection(ctx context.Context, namespace string, opts *metav1.DeleteOptions, listOpts *metav1.ListOptions, wopts WriteOptions) (runtime.Object, error) {
	// A collection delete removes uninitialized objects too.
	list, err := s.List(WithIncludeUninitialized(ctx), namespace, listOpts)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var deleted []runtime.Object
	for _, item := range items {
		m, err := meta.Accessor(item)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		o := opts.DeepCopy()
		if o == nil {
			o = &metav1.DeleteOptions{}
		}
		uid := m.GetUID()
		if o.Preconditions == nil {
			o.Preconditions = &metav1.Preconditions{UID: &uid}
		}
		obj, _, err := s.Delete(ctx, m.GetNamespace(), m.GetName(), o, wopts)
		if err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				continue
			}
			return nil, err
		}
		deleted = append(deleted, obj)
	}
	out := s.Resource.NewListFunc()
	if err := meta.SetList(out, deleted); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

// generateName appends Kubernetes-style random suffix characters to base.
func generateName(base string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	const maxBase = 63 - 5
	if len(base) > maxBase {
		base = base[:maxBase]
	}
	var b strings.Builder
	b.WriteString(base)
	for range 5 {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(fmt.Sprintf("crypto/rand failed: %v", err))
		}
		b.WriteByte(alphabet[n.Int64()])
	}
	return b.String()
}

// UIDPtr is a convenience for preconditions.
func UIDPtr(u types.UID) *types.UID { return &u }

// traceInitializer records that an initializer finished (removed itself from pending).
func (s *Store) traceInitializer(ctx context.Context, namespace, name string, out runtime.Object, before, after string) {
	m, err := meta.Accessor(out)
	if err != nil {
		return
	}
	by := ""
	if u, ok := filters.UserFrom(ctx); ok {
		by = " by " + u.Name
	}
	result := "initialized"
	if after != "" {
		result = "pending " + after
	}
	var done []string
	for _, n := range strings.Split(before, ",") {
		if n != "" && !slices.Contains(strings.Split(after, ","), n) {
			done = append(done, n)
		}
	}
	s.Traces.Append(s.TraceKey(namespace, name), string(m.GetUID()), trace.Step{Time: time.Now(), Component: "initializers",
		Step: strings.Join(done, ","), Result: result, Detail: "pending [" + before + "] → [" + after + "]" + by})
}
