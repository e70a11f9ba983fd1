// Package manager keeps the API server's WASM plugins in step with the WasmPlugin and
// ClusterWasmPlugin objects: it fetches and compiles modules, loads, hot-swaps and
// unloads plugins, reports their status, and serves them to the admission chain.
package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	wasmadmission "github.com/wasmplane/wasmplane/plugins/wasm/admission"
	wasmauthn "github.com/wasmplane/wasmplane/plugins/wasm/authenticator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Resources of the plugin objects.
var (
	WasmPlugins        = wasmv1.SchemeGroupVersion.WithResource("wasmplugins")
	ClusterWasmPlugins = wasmv1.SchemeGroupVersion.WithResource("clusterwasmplugins")
)

// Config is what a Manager needs.
type Config struct {
	// Runtime compiles and runs modules.
	Runtime *wasm.Runtime
	// Client reads namespaces and fetches module bytes.
	Client kubernetes.Interface
	// Dynamic watches plugin objects and writes their status.
	Dynamic dynamic.Interface
	// ServerName identifies this server in plugin status.
	ServerName string
	// Logger receives the manager's messages.
	Logger *slog.Logger
	// InitializerTimeout fails objects whose initializer does not act in time
	// (default DefaultInitializerTimeout).
	InitializerTimeout time.Duration
	// Scheduler, when set, makes this a scheduling manager: it loads only the filter and
	// score hooks, into this scheduler (scheduling.go). Nil loads only the API server's
	// hooks; an API server's manager must leave it nil.
	Scheduler SchedulerTarget
	// Authn configures the authenticate hooks of cluster plugins (see authenticate.go).
	Authn AuthnConfig
}

// entry is one loaded plugin object.
type entry struct {
	key        string // "ns/name" or "name"
	namespace  string // "" for cluster plugins
	generation int64
	spec       wasmv1.WasmPluginSpec
	plugin     *wasm.Plugin
	adapter    *wasmadmission.Plugin
	authn      *wasmauthn.Plugin
	nsSelector labels.Selector
	objSelect  labels.Selector
}

// pluginSet is an immutable set of entries with a reference count, so that the plugins a
// retired set alone holds are closed only after the requests using it finish.
type pluginSet struct {
	entries []*entry
	refs    atomic.Int64
	done    chan struct{}
}

func newSet(entries []*entry) *pluginSet {
	s := &pluginSet{entries: entries, done: make(chan struct{})}
	s.refs.Store(1)
	return s
}

func (s *pluginSet) tryAcquire() bool {
	for {
		n := s.refs.Load()
		if n == 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (s *pluginSet) release() {
	if s.refs.Add(-1) == 0 {
		close(s.done)
	}
}

// Manager implements admission.Source over the loaded plugins.
type Manager struct {
	cfg      Config
	log      *slog.Logger
	cur      atomic.Pointer[pluginSet]
	mu       sync.Mutex // serializes set changes
	nsLister corelisters.NamespaceLister
	retired  sync.WaitGroup
	// initQueue holds objects waiting for an initializer; initTimeout fails them.
	initQueue   workqueue.TypedRateLimitingInterface[waitingObject]
	initTimeout time.Duration
	// sched is what a scheduling manager has loaded (scheduling.go).
	sched schedState
}

// dynamicResource is the client of one resource (namespaced or not).
type dynamicResource = dynamic.ResourceInterface

// New returns a manager with no plugins loaded; Run loads them.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.InitializerTimeout <= 0 {
		cfg.InitializerTimeout = DefaultInitializerTimeout
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.With("component", "wasm-plugin-manager"), initQueue: newInitQueue(), initTimeout: cfg.InitializerTimeout}
	m.cur.Store(newSet(nil))
	return m
}

func (m *Manager) acquire() *pluginSet {
	for {
		s := m.cur.Load()
		if s.tryAcquire() {
			return s
		}
	}
}

// Acquire implements admission.Source.
func (m *Manager) Acquire(a *admission.Attributes) ([]admission.Mutator, []admission.Validator, func()) {
	s := m.acquire()
	var ms []admission.Mutator
	var vs []admission.Validator
	for _, e := range s.entries {
		if !m.matches(e, a) {
			continue
		}
		if slices.Contains(e.spec.Hooks, wasmv1.HookMutate) && a.Operation != admission.Delete {
			ms = append(ms, e.adapter)
		}
		if slices.Contains(e.spec.Hooks, wasmv1.HookValidate) {
			vs = append(vs, e.adapter)
		}
	}
	return ms, vs, s.release
}

// matches applies a plugin's scope, rules and selectors to a request.
func (m *Manager) matches(e *entry, a *admission.Attributes) bool {
	// No plugin sees the objects that configure admission: otherwise a plugin could make
	// itself, or the plugins that would correct it, impossible to change or delete.
	if admission.IsAdmissionConfiguration(a.Resource.GroupResource()) {
		return false
	}
	// A tenant's plugin sees only its own namespace's requests.
	if e.namespace != "" && a.Namespace != e.namespace {
		return false
	}
	if !rulesMatch(e.spec.Rules, a) {
		return false
	}
	// Nor may it keep the control plane from deleting its namespace or collecting garbage.
	if e.namespace != "" && (admission.IsCleanup(a) || a.Operation == admission.Delete && m.terminating(a.Namespace)) {
		return false
	}
	if e.objSelect != nil && !e.objSelect.Empty() {
		obj := a.Object
		if obj == nil {
			obj = a.OldObject
		}
		mo, ok := obj.(metav1.Object)
		if !ok || !e.objSelect.Matches(labels.Set(mo.GetLabels())) {
			return false
		}
	}
	if e.nsSelector != nil && !e.nsSelector.Empty() {
		if a.Namespace == "" || m.nsLister == nil {
			return false
		}
		ns, err := m.nsLister.Get(a.Namespace)
		if err != nil || !e.nsSelector.Matches(labels.Set(ns.Labels)) {
			return false
		}
	}
	return true
}

// terminating reports whether namespace ns is being deleted: from then on its contents go
// away whoever asks, so a tenant's plugin no longer sees deletes there (the namespace
// controller may run with any identity). A namespace not in the cache yet is not.
func (m *Manager) terminating(ns string) bool {
	if m.nsLister == nil {
		return false
	}
	n, err := m.nsLister.Get(ns)
	return err == nil && (n.DeletionTimestamp != nil || n.Status.Phase == corev1.NamespaceTerminating)
}

func rulesMatch(rules []wasmv1.Rule, a *admission.Attributes) bool {
	if len(rules) == 0 {
		return true
	}
	res := a.Resource.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	for _, r := range rules {
		if !matchAny(r.APIGroups, a.Resource.Group) || !matchAny(r.APIVersions, a.Resource.Version) {
			continue
		}
		if !matchResource(r.Resources, res, a.Subresource) {
			continue
		}
		if len(r.Operations) > 0 && !slices.Contains(r.Operations, wasmv1.OperationAll) && !slices.Contains(r.Operations, wasmv1.Operation(a.Operation)) {
			continue
		}
		switch r.Scope {
		case "Cluster":
			if a.Namespace != "" {
				continue
			}
		case "Namespaced":
			if a.Namespace == "" {
				continue
			}
		}
		return true
	}
	return false
}

func matchAny(list []string, v string) bool {
	return len(list) == 0 || slices.Contains(list, "*") || slices.Contains(list, v)
}

func matchResource(list []string, res, sub string) bool {
	for _, r := range list {
		switch {
		case r == "*/*", r == res:
			return true
		case r == "*" && sub == "":
			return true
		case strings.HasPrefix(r, "*/") && sub != "" && strings.TrimPrefix(r, "*/") == sub:
			return true
		case strings.HasSuffix(r, "/*") && sub != "" && strings.TrimSuffix(r, "/*") == strings.Split(res, "/")[0]:
			return true
		}
	}
	return len(list) == 0
}

// Run watches plugin objects and keeps the loaded set in step until ctx ends; then it
// unloads everything.
func (m *Manager) Run(ctx context.Context) error {
	kf := informers.NewSharedInformerFactory(m.cfg.Client, 0)
	m.nsLister = kf.Core().V1().Namespaces().Lister()
	df := dynamicinformer.NewDynamicSharedInformerFactory(m.cfg.Dynamic, 0)
	events := make(chan struct{}, 1)
	notify := func() {
		select {
		case events <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { notify() }, UpdateFunc: func(any, any) { notify() }, DeleteFunc: func(any) { notify() },
	}
	nsInf := df.ForResource(WasmPlugins).Informer()
	clInf := df.ForResource(ClusterWasmPlugins).Informer()
	for _, inf := range []cache.SharedIndexInformer{nsInf, clInf} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watching plugins: %w", err)
		}
	}
	_ = kf.Core().V1().Namespaces().Informer()
	kf.Start(ctx.Done())
	df.Start(ctx.Done())
	defer func() {
		kf.Shutdown()
		df.Shutdown()
		m.unloadAll()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), nsInf.HasSynced, clInf.HasSynced) {
		return ctx.Err()
	}
	initDone := make(chan struct{})
	go func() {
		defer close(initDone)
		m.runInitializers(ctx)
	}()
	defer func() { <-initDone }()
	// Reconcile on every change, and periodically so that a failed load is retried.
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		m.reconcile(ctx, append(nsInf.GetStore().List(), clInf.GetStore().List()...))
		select {
		case <-ctx.Done():
			return nil
		case <-events:
		case <-tick.C:
		}
	}
}

// Loaded reports the digest a plugin object (key "ns/name" or "name") runs, if loaded.
func (m *Manager) Loaded(key string) (digest string, ok bool) {
	s := m.acquire()
	defer s.release()
	for _, e := range s.entries {
		if e.key == key {
			return e.plugin.Digest(), true
		}
	}
	return "", false
}

type object struct {
	key, namespace, name string
	cluster              bool
	generation           int64
	spec                 wasmv1.WasmPluginSpec
	status               wasmv1.WasmPluginStatus
}

func decode(obj any) (*object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected %T", obj)
	}
	var p wasmv1.WasmPlugin
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", u.GetName(), err)
	}
	o := &object{namespace: p.Namespace, name: p.Name, cluster: p.Namespace == "", generation: p.Generation, spec: p.Spec, status: p.Status}
	o.key = p.Name
	if p.Namespace != "" {
		o.key = p.Namespace + "/" + p.Name
	}
	return o, nil
}

// usesAdmission reports whether a plugin has hooks this manager serves; the others are
// loaded by the components that call them.
func usesAdmission(spec *wasmv1.WasmPluginSpec) bool {
	return slices.Contains(spec.Hooks, wasmv1.HookMutate) || slices.Contains(spec.Hooks, wasmv1.HookValidate) ||
		slices.Contains(spec.Hooks, wasmv1.HookInitialize) || slices.Contains(spec.Hooks, wasmv1.HookAuthenticate)
}

// reconcile builds the next set from the objects, reusing unchanged entries.
func (m *Manager) reconcile(ctx context.Context, objs []any) {
	if m.cfg.Scheduler != nil {
		m.reconcileScheduling(ctx, objs)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.cur.Load()
	byKey := map[string]*entry{}
	for _, e := range old.entries {
		byKey[e.key] = e
	}
	var next []*entry
	// "Loaded" is written only once the new set serves requests: a client waiting for
	// the status (kubectl wait) must find the new version live, not about to be.
	type loadedStatus struct {
		o      *object
		digest string
	}
	var loaded []loadedStatus
	for _, raw := range objs {
		o, err := decode(raw)
		if err != nil {
			m.log.Error("reading plugin object", "err", err)
			continue
		}
		if !usesAdmission(&o.spec) {
			continue
		}
		prev := byKey[o.key]
		if prev != nil && prev.generation == o.generation {
			next = append(next, prev)
			continue
		}
		e, err := m.load(ctx, o, prev)
		if err != nil {
			m.log.Error("loading plugin", "plugin", o.key, "err", err)
			m.writeStatus(ctx, o, "Failed", "", err.Error())
			if prev != nil {
				// Keep serving the last good version.
				next = append(next, prev)
			}
			continue
		}
		loaded = append(loaded, loadedStatus{o, e.plugin.Digest()})
		next = append(next, e)
	}
	slices.SortStableFunc(next, func(a, b *entry) int {
		if a.spec.Order != b.spec.Order {
			return int(a.spec.Order - b.spec.Order)
		}
		return strings.Compare(a.key, b.key)
	})
	keep := map[*wasm.Plugin]bool{}
	for _, e := range next {
		keep[e.plugin] = true
	}
	var drop []*wasm.Plugin
	for _, e := range old.entries {
		if !keep[e.plugin] {
			drop = append(drop, e.plugin)
		}
	}
	m.cur.Store(newSet(next))
	m.retire(old, drop)
	for _, l := range loaded {
		m.writeStatus(ctx, l.o, "Loaded", l.digest, "")
	}
}

// retire closes the plugins only old held, once old's requests are done.
func (m *Manager) retire(old *pluginSet, drop []*wasm.Plugin) {
	old.release()
	if len(drop) == 0 {
		return
	}
	m.retired.Add(1)
	go func() {
		defer m.retired.Done()
		<-old.done
		for _, p := range drop {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := p.Close(ctx); err != nil {
				m.log.Warn("closing retired plugin", "plugin", p.Name(), "err", err)
			}
			cancel()
		}
	}()
}

func (m *Manager) unloadAll() {
	m.unloadScheduling()
	m.mu.Lock()
	old := m.cur.Swap(newSet(nil))
	m.mu.Unlock()
	var all []*wasm.Plugin
	for _, e := range old.entries {
		all = append(all, e.plugin)
	}
	m.retire(old, all)
	m.retired.Wait()
}

// load fetches, compiles and loads the module of o. When only the module changed, the
// previous plugin is hot-swapped in place; a config or limits change loads a new plugin.
func (m *Manager) load(ctx context.Context, o *object, prev *entry) (*entry, error) {
	data, err := m.fetch(ctx, o)
	if err != nil {
		return nil, err
	}
	mod, err := m.cfg.Runtime.Compile(ctx, data, o.spec.SHA256)
	if err != nil {
		return nil, fmt.Errorf("compiling module: %w", err)
	}
	defer func() { _ = mod.Close(context.WithoutCancel(ctx)) }()
	for _, h := range o.spec.Hooks {
		if (h == wasmv1.HookMutate || h == wasmv1.HookValidate || h == wasmv1.HookInitialize || h == wasmv1.HookAuthenticate) && !mod.Implements(string(h)) {
			return nil, fmt.Errorf("the module does not export the %s hook", h)
		}
	}
	e := &entry{key: o.key, namespace: o.namespace, generation: o.generation, spec: o.spec}
	if e.nsSelector, err = selector(o.spec.NamespaceSelector); err != nil {
		return nil, err
	}
	if e.objSelect, err = selector(o.spec.ObjectSelector); err != nil {
		return nil, err
	}
	if prev != nil && sameRuntimeConfig(&prev.spec, &o.spec) {
		if prev.plugin.Digest() != mod.Digest() {
			if err := prev.plugin.Swap(ctx, mod); err != nil {
				return nil, err
			}
		}
		e.plugin = prev.plugin
	} else {
		var cfgJSON json.RawMessage
		if o.spec.Config != nil {
			cfgJSON = o.spec.Config.Raw
		}
		p, err := m.cfg.Runtime.Load(ctx, mod, wasm.PluginConfig{Name: o.name, Namespace: o.namespace, Config: cfgJSON, Limits: limits(o.spec.Limits)})
		if err != nil {
			return nil, err
		}
		e.plugin = p
	}
	fp := o.spec.FailurePolicy
	e.adapter = &wasmadmission.Plugin{PluginName: o.key, Caller: e.plugin, Ignore: fp != nil && *fp == wasmv1.Ignore,
		NoReinvocation: o.spec.ReinvocationPolicy == wasmv1.Never, Log: m.log}
	e.authn = m.authenticator(e)
	return e, nil
}

func sameRuntimeConfig(a, b *wasmv1.WasmPluginSpec) bool {
	ac, bc := "", ""
	if a.Config != nil {
		ac = string(a.Config.Raw)
	}
	if b.Config != nil {
		bc = string(b.Config.Raw)
	}
	al, bl := limits(a.Limits), limits(b.Limits)
	return ac == bc && al == bl
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("selector: %w", err)
	}
	return sel, nil
}

func limits(l *wasmv1.Limits) wasm.Limits {
	var out wasm.Limits
	if l == nil {
		return out
	}
	out.MemoryBytes = uint64(l.MemoryPages) * 65536
	if l.Timeout != nil {
		out.Timeout = l.Timeout.Duration
	}
	out.MaxInputBytes = int(l.MaxInputBytes)
	out.MaxOutputBytes = int(l.MaxOutputBytes)
	out.MaxInstances = int(l.MaxInstances)
	return out
}

// fetch returns the module bytes of o: from the cluster's module store, or a server file
// (cluster plugins only; validation refuses files for tenant plugins).
func (m *Manager) fetch(ctx context.Context, o *object) ([]byte, error) {
	switch {
	case o.spec.Module.Digest != "":
		name := "sha256-" + strings.TrimPrefix(o.spec.Module.Digest, "sha256:")
		data, err := m.cfg.Client.CoreV1().RESTClient().Get().
			AbsPath("/apis", wasmv1.GroupName, wasmv1.SchemeGroupVersion.Version, "wasmmodules", name, "blob").DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("fetching module %s: %w", o.spec.Module.Digest, err)
		}
		return data, nil
	case o.spec.Module.File != "":
		if !o.cluster {
			return nil, errors.New("a namespaced plugin may not load a server file")
		}
		data, err := os.ReadFile(strings.TrimPrefix(o.spec.Module.File, "file://"))
		if err != nil {
			return nil, fmt.Errorf("reading module file: %w", err)
		}
		return data, nil
	}
	return nil, errors.New("module URLs are not supported yet; push the module and use its digest")
}

// writeStatus records this server's load state on the plugin object.
func (m *Manager) writeStatus(ctx context.Context, o *object, phase, digest, msg string) {
	if o.status.Phase == phase && o.status.Digest == digest && o.status.Message == msg && o.status.ObservedGeneration == o.generation {
		return
	}
	gvr := ClusterWasmPlugins
	var ri dynamic.ResourceInterface = m.cfg.Dynamic.Resource(gvr)
	if !o.cluster {
		ri = m.cfg.Dynamic.Resource(WasmPlugins).Namespace(o.namespace)
	}
	for range 3 {
		u, err := ri.Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			return
		}
		st := wasmv1.WasmPluginStatus{Phase: phase, Digest: digest, Message: msg, ObservedGeneration: o.generation,
			Servers: []wasmv1.ServerLoadState{{Server: m.cfg.ServerName, Phase: phase, Digest: digest, Message: msg, LastTransitionTime: metav1.Now()}}}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
		if err != nil {
			return
		}
		u.Object["status"] = raw
		if _, err = ri.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err == nil || !apierrors.IsConflict(err) {
			if err != nil {
				m.log.Warn("writing plugin status", "plugin", o.key, "err", err)
			}
			return
		}
	}
}

var _ admission.Source = (*Manager)(nil)
