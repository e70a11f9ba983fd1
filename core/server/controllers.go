package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/certificates"
	"github.com/wasmplane/wasmplane/core/controller/clusterroleaggregation"
	"github.com/wasmplane/wasmplane/core/controller/cronjob"
	"github.com/wasmplane/wasmplane/core/controller/daemon"
	"github.com/wasmplane/wasmplane/core/controller/deployment"
	"github.com/wasmplane/wasmplane/core/controller/disruption"
	"github.com/wasmplane/wasmplane/core/controller/endpoint"
	"github.com/wasmplane/wasmplane/core/controller/endpointslice"
	"github.com/wasmplane/wasmplane/core/controller/endpointslicemirroring"
	"github.com/wasmplane/wasmplane/core/controller/garbagecollector"
	"github.com/wasmplane/wasmplane/core/controller/job"
	"github.com/wasmplane/wasmplane/core/controller/namespace"
	"github.com/wasmplane/wasmplane/core/controller/nodelifecycle"
	"github.com/wasmplane/wasmplane/core/controller/persistentvolume"
	"github.com/wasmplane/wasmplane/core/controller/podautoscaler"
	"github.com/wasmplane/wasmplane/core/controller/podgc"
	"github.com/wasmplane/wasmplane/core/controller/replicaset"
	"github.com/wasmplane/wasmplane/core/controller/replication"
	"github.com/wasmplane/wasmplane/core/controller/resourcequota"
	"github.com/wasmplane/wasmplane/core/controller/rootcacertpublisher"
	"github.com/wasmplane/wasmplane/core/controller/serviceaccount"
	"github.com/wasmplane/wasmplane/core/controller/statefulset"
	"github.com/wasmplane/wasmplane/core/controller/ttlafterfinished"
	"github.com/wasmplane/wasmplane/core/controller/vapstatus"
	"github.com/wasmplane/wasmplane/core/pki"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// Client rate limits for controllers. Stock kube-controller-manager uses 20 QPS, which caps
// pod creation near 20/s; wasmplane's controllers talk to a local server and use a high limit.
const (
	ControllerQPS   = 2000
	ControllerBurst = 4000
)

// Leader election timing, as kube-controller-manager's defaults.
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RetryPeriod   = 2 * time.Second
)

// ControllerConfig tunes individual controllers; the zero value is Kubernetes' defaults.
type ControllerConfig struct {
	// HPASyncPeriod is how often each HorizontalPodAutoscaler is reconciled
	// (kube-controller-manager's --horizontal-pod-autoscaler-sync-period; 0 = 15 s).
	HPASyncPeriod time.Duration
	// Selection says which controllers run (kube-controller-manager's --controllers;
	// empty = all), so that kube-controller-manager can run the others.
	Selection ControllerSelection
	// HPATolerance is the distance from an HPA's target within which it does not scale
	// (kube-controller-manager's --horizontal-pod-autoscaler-tolerance; nil = 0.1).
	HPATolerance *float64
	// PodMetrics is where the HorizontalPodAutoscaler controller reads pods' usage; nil =
	// metrics.k8s.io/v1beta1 PodMetrics through the API server.
	PodMetrics podautoscaler.PodMetricsLister
}

// startControllers runs the controllers against the API server through client-go, as a
// separate controller-manager would; the returned func stops them and waits.
func startControllers(ctx context.Context, cfg *rest.Config, signingCA *pki.CA, ctrl ControllerConfig, log *slog.Logger) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := RunControllers(ctx, cfg, log, ready, signingCA, ctrl); err != nil && ctx.Err() == nil {
			log.Error("controllers stopped", "err", err)
		}
	}()
	if err := <-ready; err != nil {
		cancel()
		<-done
		return nil, err
	}
	return func() {
		cancel()
		<-done
	}, nil
}

// RunControllers runs the namespace, ReplicaSet, ReplicationController, DaemonSet,
// StatefulSet, Deployment, HorizontalPodAutoscaler, Job, CronJob,
// TTL-after-finished, garbage-collector,
// CertificateSigningRequest, Endpoints, EndpointSlice and root CA publisher controllers
// (among others) until ctx ends and they have all stopped. If ready
// is non-nil it receives nil once the controllers are started, or the setup error. The
// kubelet client certificate signer runs only with a signingCA (the cluster CA and its
// key), as kube-controller-manager's csrsigning runs only with --cluster-signing-*-file.
// ctrl tunes individual controllers.
func RunControllers(ctx context.Context, cfg *rest.Config, log *slog.Logger, ready chan<- error, signingCA *pki.CA, ctrl ControllerConfig) error {
	fail := func(err error) error {
		if ready != nil {
			ready <- err
		}
		return err
	}
	if err := ctrl.Selection.Validate(); err != nil {
		return fail(fmt.Errorf("--controllers: %w", err))
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "wasmplane-controller-manager"
	}
	cfg.QPS, cfg.Burst = ControllerQPS, ControllerBurst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fail(fmt.Errorf("controller client: %w", err))
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fail(fmt.Errorf("controller metadata client: %w", err))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := informers.NewSharedInformerFactory(client, 0)
	// Events go out through their own broadcaster so `kubectl describe` shows what the
	// controllers did (SuccessfulCreate, ScalingReplicaSet, ...).
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(clientscheme.Scheme, corev1.EventSource{Component: "controller-manager"})
	nsc, err := namespace.New(client, md, factory, log)
	if err != nil {
		return fail(err)
	}
	rsc, err := replicaset.New(client, factory, replicaset.Options{Logger: log, Recorder: recorder})
	if err != nil {
		return fail(err)
	}
	rcc, err := replication.New(client, factory, replication.Options{Logger: log, Recorder: recorder})
	if err != nil {
		return fail(err)
	}
	dsc, err := daemon.New(client, factory, daemon.Options{Logger: log, Recorder: recorder})
	if err != nil {
		return fail(err)
	}
	ssc, err := statefulset.New(client, factory, statefulset.Options{Logger: log, Recorder: recorder})
	if err != nil {
		return fail(err)
	}
	dc, err := deployment.New(client, factory, log)
	if err != nil {
		return fail(err)
	}
	dc.SetEventRecorder(recorder)
	hpac, err := newHPAController(cfg, client, factory, ctrl, recorder, log)
	if err != nil {
		return fail(err)
	}
	jc, err := job.New(client, factory, job.Options{Logger: log, Recorder: recorder})
	if err != nil {
		return fail(err)
	}
	cjc, err := cronjob.New(client, factory, cronjob.Options{Logger: log, Recorder: recorder})
	if err != nil {
		return fail(err)
	}
	ttlc, err := ttlafterfinished.New(client, factory, nil, log)
	if err != nil {
		return fail(err)
	}
	crac, err := clusterroleaggregation.New(client, factory, log)
	if err != nil {
		return fail(err)
	}
	sac, err := serviceaccount.New(client, factory, log)
	if err != nil {
		return fail(err)
	}
	rqc, err := resourcequota.New(client, md, factory, resourcequota.Options{Logger: log})
	if err != nil {
		return fail(err)
	}
	gc := garbagecollector.New(md, client.Discovery(), log)
	nlc, err := nodelifecycle.New(client, factory, nodelifecycle.Options{Logger: log})
	if err != nil {
		return fail(err)
	}
	pgc := podgc.New(client, factory, podgc.Options{Logger: log})
	csrApprover, err := certificates.NewApprover(client, factory, log)
	if err != nil {
		return fail(err)
	}
	epc, err := endpoint.New(client, factory, log)
	if err != nil {
		return fail(err)
	}
	esc, err := endpointslice.New(client, factory, recorder, log)
	if err != nil {
		return fail(err)
	}
	esmc, err := endpointslicemirroring.New(client, factory, log)
	if err != nil {
		return fail(err)
	}
	pvb, err := persistentvolume.New(client, factory, log)
	if err != nil {
		return fail(err)
	}
	pdbc, err := disruption.New(client, factory, log)
	if err != nil {
		return fail(err)
	}
	// The CA pods are told to trust is the one this client trusts the server with, as
	// kube-controller-manager falls back to without --root-ca-file.
	rootCA := cfg.CAData
	if len(rootCA) == 0 && cfg.CAFile != "" {
		if rootCA, err = os.ReadFile(cfg.CAFile); err != nil {
			return fail(fmt.Errorf("reading the CA of the controllers' kubeconfig: %w", err))
		}
	}
	if len(rootCA) == 0 && signingCA != nil {
		rootCA = signingCA.CertPEM
	}
	vapc, err := vapstatus.New(client, factory, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery())), log)
	if err != nil {
		return fail(err)
	}
	var rootCAPublisher *rootcacertpublisher.Publisher
	if len(rootCA) > 0 {
		if rootCAPublisher, err = rootcacertpublisher.New(client, factory, rootCA, log); err != nil {
			return fail(err)
		}
	} else {
		log.Warn("no cluster CA known: kube-root-ca.crt is not published")
	}
	var csrSigner *certificates.Signer
	if signingCA != nil {
		if csrSigner, err = certificates.NewSigner(client, factory, signingCA, 0, log); err != nil {
			return fail(err)
		}
	}
	var wg sync.WaitGroup
	// A controller not selected is built (its informers are shared) but not run.
	run := func(name string, f func()) {
		if ctrl.Selection.Enabled(name) {
			wg.Go(f)
		} else {
			log.Info("controller disabled by --controllers", "controller", name)
		}
	}
	factory.Start(ctx.Done())
	run("certificatesigningrequest-approving-controller", func() { csrApprover.Run(ctx, 1) })
	if csrSigner != nil {
		run("certificatesigningrequest-signing-controller", func() { csrSigner.Run(ctx, 1) })
	}
	run("namespace-controller", func() { nsc.Run(ctx, 2) })
	run("replicaset-controller", func() { rsc.Run(ctx, 5) })
	run("replicationcontroller-controller", func() { rcc.Run(ctx, 5) })
	run("daemonset-controller", func() { dsc.Run(ctx, 2) })
	run("statefulset-controller", func() { ssc.Run(ctx, 2) })
	run("deployment-controller", func() { dc.Run(ctx, 5) })
	run("horizontal-pod-autoscaler-controller", func() { hpac.Run(ctx, 5) })
	run("job-controller", func() { jc.Run(ctx, 5) })
	run("cronjob-controller", func() { cjc.Run(ctx, 5) })
	run("ttl-after-finished-controller", func() { ttlc.Run(ctx, 5) })
	run("node-lifecycle-controller", func() { nlc.Run(ctx) })
	run("pod-garbage-collector-controller", func() { pgc.Run(ctx) })
	run("clusterrole-aggregation-controller", func() { crac.Run(ctx, 1) })
	run("serviceaccount-controller", func() { sac.Run(ctx, 1) })
	run("resourcequota-controller", func() { rqc.Run(ctx, 2) })
	run("endpoints-controller", func() { epc.Run(ctx, 5) })
	run("endpointslice-controller", func() { esc.Run(ctx, 5) })
	run("endpointslice-mirroring-controller", func() { esmc.Run(ctx, 5) })
	run("disruption-controller", func() { pdbc.Run(ctx, 2) })
	run("persistentvolume-binder-controller", func() { pvb.Run(ctx, 2) })
	run("validatingadmissionpolicy-status-controller", func() { vapc.Run(ctx, 1) })
	if rootCAPublisher != nil {
		run("root-ca-certificate-publisher-controller", func() { rootCAPublisher.Run(ctx, 1) })
	}
	run("garbage-collector-controller", func() {
		if err := gc.Run(ctx, 5); err != nil && ctx.Err() == nil {
			log.Error("garbage collector stopped", "err", err)
		}
	})
	if ready != nil {
		ready <- nil
	}
	<-ctx.Done()
	wg.Wait()
	factory.Shutdown()
	return nil
}

// newHPAController builds the HorizontalPodAutoscaler controller: targets are scaled
// through their /scale subresource, found by discovery (so custom resources with one are
// scaled too), and usage is read from ctrl.PodMetrics or else metrics.k8s.io.
func newHPAController(cfg *rest.Config, client kubernetes.Interface, factory informers.SharedInformerFactory, ctrl ControllerConfig,
	recorder record.EventRecorder, log *slog.Logger) (*podautoscaler.Controller, error) {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(client.Discovery()))
	if err != nil {
		return nil, fmt.Errorf("scale client: %w", err)
	}
	metrics := ctrl.PodMetrics
	if metrics == nil {
		mc, err := metricsclient.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("metrics client: %w", err)
		}
		metrics = podautoscaler.NewMetricsAPILister(mc)
	}
	return podautoscaler.New(client, scales, mapper, metrics, factory, podautoscaler.Options{
		Logger: log, Recorder: recorder, SyncPeriod: ctrl.HPASyncPeriod, Tolerance: ctrl.HPATolerance})
}

// ControllerManagerOptions configures RunControllerManager.
type ControllerManagerOptions struct {
	// Identity names this candidate in the Lease (default hostname_pid).
	Identity string
	// LeaseNamespace and LeaseName locate the Lease (default kube-system /
	// wasmplane-controller-manager).
	LeaseNamespace, LeaseName string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election (defaults the
	// package's LeaseDuration, RenewDeadline and RetryPeriod): a shorter Lease makes a
	// standby take over sooner after the leader dies.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger receives logs (nil = discarded).
	Logger *slog.Logger
	// SigningCA, when set, is the cluster CA (certificate and key) the kubelet client
	// certificate signer signs approved CertificateSigningRequests with; nil = no signer.
	SigningCA *pki.CA
	// Controllers tunes individual controllers.
	Controllers ControllerConfig
	// OnLeading, if set, is told when this instance starts (true) and stops (false) leading.
	OnLeading func(leading bool)
}

// RunControllerManager runs the controllers only while this instance holds the controller
// manager Lease, so several copies can run and one acts; it returns when ctx ends (releasing
// the Lease) and every controller has stopped. Losing the Lease stops the controllers and
// the instance campaigns again.
func RunControllerManager(ctx context.Context, cfg *rest.Config, opts ControllerManagerOptions) error {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	if opts.LeaseNamespace == "" {
		opts.LeaseNamespace = metav1.NamespaceSystem
	}
	if opts.LeaseName == "" {
		opts.LeaseName = "wasmplane-controller-manager"
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = LeaseDuration
	}
	if opts.RenewDeadline <= 0 {
		opts.RenewDeadline = RenewDeadline
	}
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = RetryPeriod
	}
	log := opts.Logger.With("identity", opts.Identity)
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "wasmplane-controller-manager/" + opts.Identity
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("leader election client: %w", err)
	}
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.LeaseNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s for the Lease: %w", opts.LeaseNamespace, err)
	}
	for ctx.Err() == nil {
		lock := &acquireTracker{Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: opts.LeaseNamespace, Name: opts.LeaseName},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
		}}
		controllersDone := make(chan struct{})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   opts.LeaseDuration,
			RenewDeadline:   opts.RenewDeadline,
			RetryPeriod:     opts.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            opts.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					defer close(controllersDone)
					log.Info("became leader, starting controllers")
					if opts.OnLeading != nil {
						opts.OnLeading(true)
					}
					if err := RunControllers(lctx, cfg, log, nil, opts.SigningCA, opts.Controllers); err != nil {
						log.Error("controllers failed", "err", err)
					}
				},
				OnStoppedLeading: func() {
					log.Info("stopped leading")
				},
				OnNewLeader: func(id string) {
					if id != opts.Identity {
						log.Info("following leader", "leader", id)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx)
		// Run returns once leadership is lost or ctx ends; OnStartedLeading runs in its own
		// goroutine, so wait for the controllers before campaigning again or returning.
		if lock.acquired.Load() {
			<-controllersDone
			if opts.OnLeading != nil {
				opts.OnLeading(false)
			}
		}
	}
	return nil
}

// acquireTracker notes whether this candidate ever wrote the lock as holder, which the
// leader elector does synchronously before it starts OnStartedLeading in a goroutine: after
// Run returns, a true flag means that goroutine exists and must be waited for.
type acquireTracker struct {
	resourcelock.Interface
	acquired atomic.Bool
}

// Create records a successful first acquisition.
func (t *acquireTracker) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := t.Interface.Create(ctx, ler)
	if err == nil && ler.HolderIdentity == t.Identity() {
		t.acquired.Store(true)
	}
	return err
}

// Update records a successful acquisition or renewal.
func (t *acquireTracker) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := t.Interface.Update(ctx, ler)
	if err == nil && ler.HolderIdentity == t.Identity() {
		t.acquired.Store(true)
	}
	return err
}
