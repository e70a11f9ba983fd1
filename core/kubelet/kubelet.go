// Package kubelet is wasmplane's node agent: it registers the Node and heartbeats its
// Lease, watches the pods bound to it, runs them on a CRI runtime through per-pod workers
// (SyncPod), probes them, reports their status and serves their logs over HTTPS. It
// reaches the API only through client-go and containers only through CRI.
package kubelet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"k8s.io/client-go/tools/record"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/kubelet/kuberuntime"
	"github.com/wasmplane/wasmplane/core/kubelet/nodestatus"
	"github.com/wasmplane/wasmplane/core/kubelet/pleg"
	"github.com/wasmplane/wasmplane/core/kubelet/podworkers"
	"github.com/wasmplane/wasmplane/core/kubelet/prober"
	kubeletserver "github.com/wasmplane/wasmplane/core/kubelet/server"
	"github.com/wasmplane/wasmplane/core/kubelet/stats"
	"github.com/wasmplane/wasmplane/core/kubelet/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// DefaultPort is the kubelet's HTTPS port.
const DefaultPort = 10250

// preStatusDelay is how long a pod sync acts before the kubelet reports the interim
// (Pending) status: the pod startup goal, so that a start meeting it writes one status.
const preStatusDelay = 500 * time.Millisecond

// Config configures a Kubelet.
type Config struct {
	// Client talks to the API server (NewClient, or any kubernetes.Interface).
	Client Client
	// Runtime and Images are the CRI services.
	Runtime cri.RuntimeService
	Images  cri.ImageManagerService
	// NodeName is the Node this kubelet runs; Hostname defaults to it.
	NodeName, Hostname string
	// NodeIP is the node's InternalIP (default 127.0.0.1); it is also the pod IP of pods
	// whose sandbox has none (containers share the node's network).
	NodeIP string
	// RootDir holds pod logs (RootDir/pods) and state.
	RootDir string
	// MaxPods is the pods capacity (default 110).
	MaxPods int
	// Taints and Labels are registered with the Node.
	Taints []corev1.Taint
	Labels map[string]string
	// Listener serves the kubelet API; nil = listen on NodeIP:Port.
	Listener net.Listener
	// Port is used when Listener is nil (default 10250; 0 = a free port).
	Port int
	// TLS is the serving configuration (required).
	TLS *tls.Config
	// BackOffBase and BackOffMax bound crash-loop back-off (defaults 10 s, 5 min).
	BackOffBase, BackOffMax time.Duration
	// RelistPeriod is the PLEG period (default 1 s); ResyncPeriod the periodic pod sync
	// (default 10 s); HousekeepingPeriod the orphan sweep (default 2 s).
	RelistPeriod, ResyncPeriod, HousekeepingPeriod time.Duration
	// LeaseDuration, RenewInterval, StatusUpdateFrequency and StatusReportFrequency tune
	// the node heartbeat (see nodestatus).
	LeaseDuration, RenewInterval, StatusUpdateFrequency, StatusReportFrequency time.Duration
	// Logger receives logs.
	Logger *slog.Logger
}

// Client is the part of the API the kubelet uses (nodes, pods, leases): a
// kubernetes.Interface is one, and so is NewClient's.
type Client = nodestatus.Client

// apiClient is a Client of just the core and coordination groups, and the review groups
// the kubelet API's delegated authorization asks.
type apiClient struct {
	core   *corev1client.CoreV1Client
	coord  *coordinationv1client.CoordinationV1Client
	authn  *authenticationv1client.AuthenticationV1Client
	authzn *authorizationv1client.AuthorizationV1Client
}

func (c apiClient) CoreV1() corev1client.CoreV1Interface { return c.core }

func (c apiClient) CoordinationV1() coordinationv1client.CoordinationV1Interface { return c.coord }

// AuthenticationV1 implements kubeletserver.Reviewer.
func (c apiClient) AuthenticationV1() authenticationv1client.AuthenticationV1Interface {
	return c.authn
}

// AuthorizationV1 implements kubeletserver.Reviewer.
func (c apiClient) AuthorizationV1() authorizationv1client.AuthorizationV1Interface { return c.authzn }

// NewClient is a Client for rc that shares one connection pool. Unlike
// kubernetes.NewForConfig it does not link every API group's client, which keeps the
// agent-only binary small (its mapped code is most of an idle agent's memory).
func NewClient(rc *rest.Config) (Client, error) {
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubelet: API client: %w", err)
	}
	core, err := corev1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("kubelet: API client: %w", err)
	}
	coord, err := coordinationv1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("kubelet: API client: %w", err)
	}
	authn, err := authenticationv1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("kubelet: API client: %w", err)
	}
	authzn, err := authorizationv1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("kubelet: API client: %w", err)
	}
	return apiClient{core: core, coord: coord, authn: authn, authzn: authzn}, nil
}

// access is whom the kubelet API serves: delegated authentication and authorization
// when the client can ask the API server for reviews (every client wasmplane gives the
// kubelet can), and anonymous requests only without a client CA.
func (k *Kubelet) access() kubeletserver.Access {
	a := kubeletserver.Access{Anonymous: k.cfg.TLS.ClientCAs == nil}
	if r, ok := k.cfg.Client.(kubeletserver.Reviewer); ok {
		a.Delegated = kubeletserver.NewDelegated(r, k.cfg.NodeName)
	}
	return a
}

// Kubelet runs pods bound to one node.
type Kubelet struct {
	cfg      Config
	log      *slog.Logger
	runtime  *kuberuntime.Manager
	status   *status.Manager
	stats    *stats.Provider
	prober   *prober.Manager
	workers  *podworkers.Workers
	lister   corelisters.PodLister
	synced   cache.InformerSynced
	idType   string
	port     int
	portOnce chan struct{}

	mu     sync.Mutex
	errors map[types.UID]map[string]kuberuntime.ContainerError
}

// New checks the configuration and returns a Kubelet ready to Run.
func New(cfg Config) (*Kubelet, error) {
	if cfg.Client == nil || cfg.Runtime == nil {
		return nil, errors.New("kubelet: a client and a CRI runtime are required")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("kubelet: node name is required")
	}
	if cfg.TLS == nil {
		return nil, errors.New("kubelet: a serving TLS configuration is required")
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = "127.0.0.1"
	}
	if cfg.RootDir == "" {
		return nil, errors.New("kubelet: root dir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Port == 0 && cfg.Listener == nil {
		cfg.Port = DefaultPort
	} else if cfg.Port < 0 {
		cfg.Port = 0
	}
	if cfg.HousekeepingPeriod <= 0 {
		cfg.HousekeepingPeriod = 2 * time.Second
	}
	log := cfg.Logger.With("component", "kubelet", "node", cfg.NodeName)
	k := &Kubelet{cfg: cfg, log: log, errors: map[types.UID]map[string]kuberuntime.ContainerError{}, portOnce: make(chan struct{})}
	k.runtime = kuberuntime.NewManager(kuberuntime.Config{
		Runtime: cfg.Runtime, Images: cfg.Images, LogRoot: filepath.Join(cfg.RootDir, "pods"),
		BackOffBase: cfg.BackOffBase, BackOffMax: cfg.BackOffMax, NodeName: cfg.NodeName, NodeIP: cfg.NodeIP, Logger: log,
	})
	k.status = status.NewManager(cfg.Client, log)
	k.stats = stats.NewProvider(cfg.Runtime, cfg.NodeName, nil)
	return k, nil
}

// Port is the kubelet API's port once Run has started listening (0 before).
func (k *Kubelet) Port(ctx context.Context) int {
	select {
	case <-k.portOnce:
		return k.port
	case <-ctx.Done():
		return 0
	}
}

// Run registers the node and runs pods until ctx ends; it returns once every goroutine
// it started has stopped.
func (k *Kubelet) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	name, _, err := nodestatus.RuntimeName(ctx, k.cfg.Runtime)
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	// Container ids carry the runtime's short name: "wasi://…" for wasmplane-wasi, as
	// "containerd://…" for containerd.
	k.idType = strings.TrimPrefix(name, "wasmplane-")
	ln := k.cfg.Listener
	if ln == nil {
		ln, err = net.Listen("tcp", net.JoinHostPort(k.cfg.NodeIP, strconv.Itoa(k.cfg.Port)))
		if err != nil {
			return fmt.Errorf("kubelet: listening: %w", err)
		}
	}
	k.port = ln.Addr().(*net.TCPAddr).Port
	close(k.portOnce)
	// Events about pods and containers, as the kubelet records them (Pulled, Created,
	// Started, Killing, BackOff, Unhealthy, ...). The broadcaster is shut down after
	// every worker that records has stopped (deferred first, so it runs last).
	events := record.NewBroadcaster(record.WithContext(ctx))
	defer events.Shutdown()
	events.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: k.cfg.Client.CoreV1().Events("")})
	// Only the core group's kinds are referenced: a scheme of them alone keeps the node
	// agent from linking every API group.
	sch := runtime.NewScheme()
	if err := corev1.AddToScheme(sch); err != nil {
		return fmt.Errorf("kubelet: event scheme: %w", err)
	}
	recorder := events.NewRecorder(sch, corev1.EventSource{Component: "kubelet", Host: k.cfg.NodeName})
	k.runtime.SetRecorder(recorder)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	reporter := nodestatus.New(nodestatus.Config{
		Client: k.cfg.Client, Runtime: k.cfg.Runtime, NodeName: k.cfg.NodeName, Hostname: k.cfg.Hostname, NodeIP: k.cfg.NodeIP,
		Port: k.port, RootDir: k.cfg.RootDir, MaxPods: k.cfg.MaxPods, Taints: k.cfg.Taints, Labels: k.cfg.Labels,
		LeaseDuration: k.cfg.LeaseDuration, RenewInterval: k.cfg.RenewInterval,
		StatusUpdateFrequency: k.cfg.StatusUpdateFrequency, StatusReportFrequency: k.cfg.StatusReportFrequency, Logger: k.log,
	})
	for {
		err := reporter.Register(ctx)
		if err == nil {
			break
		}
		k.log.Warn("registering node, will retry", "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			_ = ln.Close()
			return nil
		case <-t.C:
		}
	}
	wg.Go(func() { reporter.Run(ctx) })

	k.prober = prober.NewManager(ctx, k.cfg.Runtime, k.status.Get, func(uid types.UID) { k.workers.Trigger(uid) }, k.log)
	k.prober.SetRecorder(recorder)
	k.workers = podworkers.New(ctx, k.syncPod, k.cfg.ResyncPeriod)
	// Only this node's pods, as the kubelet watches them. The informer is built from the
	// typed pods client rather than an informer factory, which would link every group's.
	onNode := fields.OneTermEqualSelector("spec.nodeName", k.cfg.NodeName).String()
	pods := k.cfg.Client.CoreV1().Pods(metav1.NamespaceAll)
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = onNode
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = onNode
			return pods.Watch(ctx, o)
		},
	}, &corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	k.lister, k.synced = corelisters.NewPodLister(inf.GetIndexer()), inf.HasSynced
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.workers.Update(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { k.workers.Update(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				k.workers.Remove(pod)
			}
		},
	}); err != nil {
		return fmt.Errorf("kubelet: pod informer: %w", err)
	}
	informerDone := make(chan struct{})
	go func() {
		defer close(informerDone)
		inf.RunWithContext(ctx)
	}()
	// Deferred calls run last first: prober, workers, then the informer, as the factory's
	// Shutdown did.
	defer func() { cancel(); <-informerDone }()
	defer k.workers.Wait()
	defer k.prober.Wait()
	if !cache.WaitForCacheSync(ctx.Done(), k.synced) {
		_ = ln.Close()
		return nil
	}
	wg.Go(func() {
		if err := kubeletserver.Serve(ctx, ln, k.cfg.TLS, kubeletserver.Handler(k, k.log, k.access()), k.log); err != nil {
			k.log.Error("kubelet server stopped", "err", err)
		}
	})
	p := pleg.New(k.cfg.Runtime, k.cfg.RelistPeriod, func(uid types.UID) { k.workers.Trigger(uid) }, k.log)
	wg.Go(func() { p.Run(ctx) })
	wg.Go(func() { k.housekeeping(ctx) })
	k.log.Info("kubelet started", "port", k.port, "runtime", name)
	<-ctx.Done()
	return nil
}

// housekeeping tears down runtime pods the API no longer has (deleted while the kubelet
// was down, or force-deleted).
func (k *Kubelet) housekeeping(ctx context.Context) {
	t := time.NewTicker(k.cfg.HousekeepingPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pods, err := k.runtime.ListPods(ctx)
		if err != nil {
			continue
		}
		known := map[types.UID]bool{}
		all, _ := k.lister.List(labels.Everything())
		for _, p := range all {
			known[p.UID] = true
		}
		for _, rp := range pods {
			if known[rp.UID] || k.workers.Known(rp.UID) {
				continue
			}
			k.log.Info("removing orphaned pod", "pod", rp.Namespace+"/"+rp.Name, "uid", rp.UID)
			k.workers.Remove(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: rp.UID, Name: rp.Name, Namespace: rp.Namespace}})
		}
	}
}

func (k *Kubelet) setErrors(uid types.UID, res kuberuntime.SyncResult) map[string]kuberuntime.ContainerError {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.errors[uid]
	if m == nil {
		m = map[string]kuberuntime.ContainerError{}
		k.errors[uid] = m
	}
	for _, n := range res.Started {
		delete(m, n)
	}
	for n, e := range res.Errors {
		m[n] = e
	}
	out := make(map[string]kuberuntime.ContainerError, len(m))
	for n, e := range m {
		out[n] = e
	}
	return out
}

func (k *Kubelet) forget(uid types.UID) {
	k.mu.Lock()
	delete(k.errors, uid)
	k.mu.Unlock()
	k.status.Forget(uid)
	k.prober.RemovePod(uid)
}

func probeSet(pod *corev1.Pod, get func(*corev1.Container) *corev1.Probe) func(string) bool {
	return func(name string) bool {
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == name {
				return get(&pod.Spec.Containers[i]) != nil
			}
		}
		return false
	}
}

func (k *Kubelet) generate(pod *corev1.Pod, rs *kuberuntime.PodStatus, errs map[string]kuberuntime.ContainerError) corev1.PodStatus {
	return status.GeneratePodStatus(status.Input{
		Pod: pod, Runtime: rs, Errors: errs, Ready: k.prober.Ready, Started: k.prober.Started,
		HasReadiness: probeSet(pod, func(c *corev1.Container) *corev1.Probe { return c.ReadinessProbe }),
		HasStartup:   probeSet(pod, func(c *corev1.Container) *corev1.Probe { return c.StartupProbe }),
		HostIP:       k.cfg.NodeIP, RuntimeName: k.idType, Now: time.Now(),
	})
}

// syncPod is one pod worker pass.
func (k *Kubelet) syncPod(ctx context.Context, pod *corev1.Pod, removed bool) (time.Duration, bool) {
	log := k.log.With("pod", pod.Namespace+"/"+pod.Name)
	rs, err := k.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("reading pod from the runtime", "err", err)
		}
		return time.Second, false
	}
	if removed {
		// Gone from the API: stop whatever still runs, then remove it all.
		if err := k.runtime.KillPod(ctx, pod, rs, nil); err != nil {
			log.Warn("killing removed pod", "err", err)
			return time.Second, false
		}
		if err := k.runtime.RemovePod(ctx, rs); err != nil {
			log.Warn("removing pod from the runtime", "err", err)
			return time.Second, false
		}
		k.forget(pod.UID)
		return 0, true
	}
	if pod.DeletionTimestamp != nil {
		return k.terminate(ctx, pod, rs, log)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		// A finished pod never runs again: make sure nothing does.
		if rs.Running() || (len(rs.Sandboxes) > 0 && rs.Sandboxes[0].Ready) {
			if err := k.runtime.KillPod(ctx, pod, rs, nil); err != nil {
				log.Warn("stopping finished pod", "err", err)
			}
		}
		k.prober.RemovePod(pod.UID)
		return 0, false
	}
	k.prober.AddPod(pod)
	// Report what is known before acting, as the kubelet does, so that a pod whose
	// containers take long to create (a large module compiling) shows
	// Pending/ContainerCreating meanwhile; but only once acting has taken preStatusDelay.
	// A start that is quicker needs no interim status: writing it anyway cost every pod
	// start a second pods/status write (and a watch event for every watcher).
	// (The kubelet's asynchronous status manager coalesces such updates too.)
	k.mu.Lock()
	prevErrs := maps.Clone(k.errors[pod.UID])
	k.mu.Unlock()
	pending := k.generate(pod, rs, prevErrs)
	interimDone := make(chan struct{})
	interim := time.AfterFunc(preStatusDelay, func() {
		defer close(interimDone)
		if _, err := k.status.SetPodStatus(ctx, pod, pending); err != nil && ctx.Err() == nil {
			log.Warn("updating pod status", "err", err)
		}
	})
	res := k.runtime.SyncPod(ctx, pod, rs, k.prober.Unhealthy)
	if !interim.Stop() {
		// The interim write started: the final one must not overtake it.
		<-interimDone
	}
	if res.Err != nil && ctx.Err() == nil {
		log.Warn("syncing pod", "err", res.Err)
	}
	errs := k.setErrors(pod.UID, res)
	if rs2, err := k.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err == nil {
		rs = rs2
	}
	st := k.generate(pod, rs, errs)
	// The pod was acknowledged before acting, whether or not the interim status was written.
	st.StartTime = pending.StartTime
	if _, err := k.status.SetPodStatus(ctx, pod, st); err != nil && ctx.Err() == nil {
		log.Warn("updating pod status", "err", err)
		return time.Second, false
	}
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		if rs.Running() || (len(rs.Sandboxes) > 0 && rs.Sandboxes[0].Ready) {
			// Stop the sandbox of a pod that just finished.
			return 100 * time.Millisecond, false
		}
	}
	next := res.RequeueAfter
	if res.Err != nil && (next == 0 || next > 2*time.Second) {
		next = 2 * time.Second
	}
	return next, false
}

// terminate stops a pod being deleted within its grace period, reports the final
// container states and deletes the object for good, as the kubelet's status manager does.
func (k *Kubelet) terminate(ctx context.Context, pod *corev1.Pod, rs *kuberuntime.PodStatus, log *slog.Logger) (time.Duration, bool) {
	if err := k.runtime.KillPod(ctx, pod, rs, nil); err != nil {
		log.Warn("killing pod", "err", err)
		return time.Second, false
	}
	k.prober.RemovePod(pod.UID)
	if rs2, err := k.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err == nil {
		rs = rs2
	}
	st := k.generate(pod, rs, nil)
	if st.Phase != corev1.PodSucceeded && st.Phase != corev1.PodFailed {
		// Containers killed for the deletion end the pod as Failed unless they all
		// succeeded, which GeneratePodStatus decides only for restartPolicy Never.
		st.Phase = corev1.PodFailed
		allOK := len(st.ContainerStatuses) > 0
		for _, cs := range st.ContainerStatuses {
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
				allOK = false
			}
		}
		if allOK {
			st.Phase = corev1.PodSucceeded
		}
	}
	if k.podGone(pod) {
		// Someone deleted it for good already (grace period 0, or a namespace going away):
		// there is no object left to report to, and the node authorizer rightly refuses
		// writes about a pod no longer bound here.
		log.Debug("pod terminated; its object is already gone")
		return 0, false
	}
	if _, err := k.status.SetPodStatus(ctx, pod, st); err != nil {
		log.Warn("final pod status", "err", err)
	}
	zero := int64(0)
	uid := pod.UID
	err := k.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
		Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsForbidden(err) && k.podGone(pod) {
		err = nil
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.Warn("deleting terminated pod", "err", err)
		return time.Second, false
	}
	log.Debug("pod terminated and deleted")
	return 0, false
}

// podGone tells whether the API no longer holds pod (by UID), as far as the informer saw.
func (k *Kubelet) podGone(pod *corev1.Pod) bool {
	cur, err := k.lister.Pods(pod.Namespace).Get(pod.Name)
	return apierrors.IsNotFound(err) || (err == nil && cur.UID != pod.UID)
}

// Summary implements kubeletserver.StatsSource.
func (k *Kubelet) Summary(ctx context.Context) (*statsapi.Summary, error) {
	return k.stats.Summary(ctx)
}

// ContainerLogFile implements kubeletserver.LogSource.
func (k *Kubelet) ContainerLogFile(ctx context.Context, namespace, name, container string, previous bool) (string, func() bool, error) {
	pod, err := k.lister.Pods(namespace).Get(name)
	if err != nil {
		return "", nil, kubeletserver.NotFound("pod %q not found on node %s", namespace+"/"+name, k.cfg.NodeName)
	}
	valid := false
	for _, c := range pod.Spec.InitContainers {
		valid = valid || c.Name == container
	}
	for _, c := range pod.Spec.Containers {
		valid = valid || c.Name == container
	}
	for _, c := range pod.Spec.EphemeralContainers {
		valid = valid || c.Name == container
	}
	if !valid {
		return "", nil, kubeletserver.BadRequest("container %s is not valid for pod %s", container, name)
	}
	rs, err := k.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return "", nil, fmt.Errorf("reading pod from the runtime: %w", err)
	}
	latest := rs.Latest(container)
	st, _ := k.status.Get(pod.UID)
	var cs *corev1.ContainerStatus
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses, st.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == container {
				cs = &list[i]
			}
		}
	}
	logPath := func(c *kuberuntime.ContainerStatus, p string) string {
		if p != "" && !filepath.IsAbs(p) {
			p = filepath.Join(kuberuntime.PodLogDir(k.runtime.LogDir(), pod.Namespace, pod.Name, pod.UID), p)
		}
		if p == "" && c != nil {
			p = filepath.Join(kuberuntime.PodLogDir(k.runtime.LogDir(), pod.Namespace, pod.Name, pod.UID), kuberuntime.ContainerLogPath(container, c.RestartCount))
		}
		return p
	}
	if previous {
		waitingAfterExit := latest != nil && latest.State == runtimeapi.ContainerState_CONTAINER_EXITED && cs != nil && cs.State.Waiting != nil
		switch {
		case waitingAfterExit:
			return logPath(latest, latest.LogPath), nil, nil
		case latest != nil && latest.RestartCount > 0:
			return logPath(nil, kuberuntime.PreviousLogPath(&kuberuntime.ContainerStatus{LogPath: logPath(latest, latest.LogPath), RestartCount: latest.RestartCount})), nil, nil
		}
		return "", nil, BadRequestPrevious(container, name)
	}
	if latest == nil {
		reason := "ContainerCreating"
		if cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
			reason = cs.State.Waiting.Reason
		}
		return "", nil, kubeletserver.BadRequest("container %q in pod %q is waiting to start: %s", container, name, reason)
	}
	id := latest.ID
	alive := func() bool {
		resp, err := k.cfg.Runtime.ContainerStatus(ctx, id, false)
		return err == nil && resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return logPath(latest, latest.LogPath), alive, nil
}

// BadRequestPrevious is the kubelet's error for --previous without a previous instance.
func BadRequestPrevious(container, pod string) error {
	return kubeletserver.BadRequest("previous terminated container %q in pod %q not found", container, pod)
}
