package apiserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/admission/plugins"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// builtinAdmission builds the admission chain with Kubernetes' default built-in plugins,
// in Kubernetes' order, reading s's registry: mutating NamespaceLifecycle, LimitRanger,
// ServiceAccount, DefaultTolerationSeconds, Priority, RuntimeClass, then the dynamic (WASM)
// mutators; validating LimitRanger, ServiceAccount, Priority, RuntimeClass, then the
// dynamic validators, and
// ResourceQuota last of all — as kube-apiserver runs it after the webhooks — so that a
// quota is charged only once every other plugin has admitted the request. wasmplane's
// own WasmPluginLimits (ceilings for tenants' plugins) and WasmModuleAccess (a tenant
// runs only modules shared with it) run beside Kubernetes' built-ins.
func builtinAdmission(s *Server, cfg *Config) registry.Admission {
	r := registryReader{s: s, liveRanges: &liveLookups{}}
	sa := &plugins.ServiceAccount{Accounts: r}
	lr := &plugins.LimitRanger{Ranges: r}
	pr := &plugins.Priority{Classes: r}
	rc := &plugins.RuntimeClass{Classes: r}
	pl := &plugins.PluginLimits{Ceilings: cfg.PluginCeilings.WithDefaults(), Plugins: r}
	ma := &plugins.ModuleAccess{Modules: r, Authorize: userAuthorizer(cfg.Authorizer)}
	return &admission.Chain{
		Mutating:   []admission.Mutator{lifecycleMutator{namespaceLifecycle{s}}, lr, sa, plugins.DefaultTolerationSeconds{}, pr, rc, pl},
		Validating: []admission.Validator{lr, sa, pr, rc, pl, ma},
		Sources:    cfg.AdmissionSources,
		Final:      []admission.Validator{&plugins.ResourceQuota{Quotas: r}},
	}
}

// lifecycleMutator runs NamespaceLifecycle in the mutating phase, first, as
// kube-apiserver does: a write to a missing namespace is refused before any plugin
// looks at the object.
type lifecycleMutator struct{ namespaceLifecycle }

// Admit implements admission.Mutator.
func (l lifecycleMutator) Admit(ctx context.Context, a *admission.Attributes) error {
	return l.Validate(ctx, a)
}

// registryReader serves the plugins' lookups from the server's stores: reads from the
// watch cache (resourceVersion 0), with a quorum read where a miss could be a lag.
type registryReader struct {
	s *Server
	// liveRanges keeps LimitRange lists read from etcd because the cache had none.
	liveRanges *liveLookups
}

// liveTTL is how long a live LimitRange lookup is reused, as Kubernetes' LimitRanger
// does: the cache lags by milliseconds, so only a namespace's first creates after a
// LimitRange appears need etcd, and a namespace without any costs one read per TTL.
const liveTTL = 30 * time.Second

// maxLiveLookups bounds liveLookups; past it the oldest half of the entries is dropped.
const maxLiveLookups = 4096

// liveLookups is a small TTL cache of live LimitRange lists by namespace.
type liveLookups struct {
	mu sync.Mutex
	m  map[string]liveLookup
}

type liveLookup struct {
	items   []corev1.LimitRange
	expires time.Time
}

func (l *liveLookups) get(ns string, now time.Time) ([]corev1.LimitRange, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[ns]
	if !ok || now.After(e.expires) {
		return nil, false
	}
	return e.items, true
}

func (l *liveLookups) put(ns string, items []corev1.LimitRange, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]liveLookup{}
	}
	if len(l.m) >= maxLiveLookups {
		for k, e := range l.m { // drop what has expired, else half of the entries
			if now.After(e.expires) || len(l.m) >= maxLiveLookups/2 {
				delete(l.m, k)
			}
		}
	}
	l.m[ns] = liveLookup{items: items, expires: now.Add(liveTTL)}
}

func (r registryReader) store(gr schema.GroupResource) (*registry.Store, error) {
	st := r.s.Store(gr)
	if st == nil {
		return nil, fmt.Errorf("resource %s is not served", gr)
	}
	return st, nil
}

// getFresh reads from the cache, and from etcd when the cache does not have the object yet.
func (r registryReader) getFresh(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error) {
	st, err := r.store(gr)
	if err != nil {
		return nil, err
	}
	obj, err := st.Get(ctx, namespace, name, &metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		obj, err = st.Get(ctx, namespace, name, nil)
	}
	return obj, err
}

func (r registryReader) list(ctx context.Context, gr schema.GroupResource, namespace, rv string) (runtime.Object, error) {
	st, err := r.store(gr)
	if err != nil {
		return nil, err
	}
	return st.List(ctx, namespace, &metav1.ListOptions{ResourceVersion: rv})
}

// GetServiceAccount implements plugins.ServiceAccountGetter.
func (r registryReader) GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	obj, err := r.getFresh(ctx, corev1.Resource("serviceaccounts"), namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ServiceAccount), nil
}

// ListLimitRanges implements plugins.LimitRangeLister.
// A namespace without LimitRanges in the watch cache is read again from etcd (and that
// answer reused for liveTTL), as Kubernetes' LimitRanger does: a LimitRange created an
// instant before a pod may not be in the cache yet, and the pod must still get its
// defaults.
func (r registryReader) ListLimitRanges(ctx context.Context, namespace string) ([]corev1.LimitRange, error) {
	obj, err := r.list(ctx, corev1.Resource("limitranges"), namespace, "0")
	if err != nil {
		return nil, err
	}
	if items := obj.(*corev1.LimitRangeList).Items; len(items) > 0 || r.liveRanges == nil {
		return items, nil
	}
	now := time.Now()
	if items, ok := r.liveRanges.get(namespace, now); ok {
		return items, nil
	}
	if obj, err = r.list(ctx, corev1.Resource("limitranges"), namespace, ""); err != nil {
		return nil, err
	}
	items := obj.(*corev1.LimitRangeList).Items
	r.liveRanges.put(namespace, items, now)
	return items, nil
}

// GetPriorityClass implements plugins.PriorityClassLister.
func (r registryReader) GetPriorityClass(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
	obj, err := r.getFresh(ctx, schedulingv1.Resource("priorityclasses"), "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*schedulingv1.PriorityClass), nil
}

// ListPriorityClasses implements plugins.PriorityClassLister.
func (r registryReader) ListPriorityClasses(ctx context.Context, fresh bool) ([]schedulingv1.PriorityClass, error) {
	rv := "0" // from the watch cache
	if fresh {
		rv = "" // a consistent read from etcd
	}
	obj, err := r.list(ctx, schedulingv1.Resource("priorityclasses"), "", rv)
	if err != nil {
		return nil, err
	}
	return obj.(*schedulingv1.PriorityClassList).Items, nil
}

// GetRuntimeClass implements plugins.RuntimeClassGetter: a class missing from the watch
// cache is read from etcd, as Kubernetes' plugin does, so a class created an instant
// before its first pod is found.
func (r registryReader) GetRuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
	obj, err := r.getFresh(ctx, nodev1.Resource("runtimeclasses"), "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*nodev1.RuntimeClass), nil
}

// ListQuotas implements plugins.QuotaAccessor.
func (r registryReader) ListQuotas(ctx context.Context, namespace string, fresh bool) ([]corev1.ResourceQuota, error) {
	rv := "0"
	if fresh {
		rv = ""
	}
	obj, err := r.list(ctx, corev1.Resource("resourcequotas"), namespace, rv)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ResourceQuotaList).Items, nil
}

// UpdateQuotaStatus implements plugins.QuotaAccessor: a status write whose precondition
// is q's resourceVersion.
func (r registryReader) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) error {
	st, err := r.store(corev1.Resource("resourcequotas"))
	if err != nil {
		return err
	}
	_, _, err = st.Update(ctx, q.Namespace, q.Name, func(_ context.Context, existing runtime.Object) (runtime.Object, error) {
		if existing == nil {
			return nil, apierrors.NewNotFound(corev1.Resource("resourcequotas"), q.Name)
		}
		return q.DeepCopy(), nil
	}, registry.UpdateOptions{Strategy: st.Resource.StatusStrategy, WriteOptions: registry.WriteOptions{Subresource: "status"}})
	return err
}

// EnsureSystemPriorityClasses creates system-node-critical and system-cluster-critical,
// as kube-apiserver does on start.
func (s *Server) EnsureSystemPriorityClasses(ctx context.Context) error {
	store := s.Store(schedulingv1.Resource("priorityclasses"))
	if store == nil {
		return nil
	}
	for _, pc := range resources.SystemPriorityClasses() {
		_, err := store.Create(ctx, "", pc, registry.WriteOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating priority class %s: %w", pc.Name, err)
		}
	}
	return nil
}
