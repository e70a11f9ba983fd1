// Package podautoscaler is the HorizontalPodAutoscaler controller: every sync period it
// reads each HPA's target through the /scale subresource, computes the replicas its
// Resource and ContainerResource metrics call for from the pods' usage (a
// PodMetricsLister: metrics.k8s.io in a cluster), bounds them by minReplicas,
// maxReplicas and the HPA's behavior, scales the target and reports status, conditions
// and events as Kubernetes 1.37's controller does. Pods, Object and External metrics
// need a custom or external metrics API, which wasmplane does not serve: they are
// reported as failing. It talks to the API only through client-go.
package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/wasmplane/wasmplane/core/api/hpaconv"
	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Kubernetes' defaults (kube-controller-manager's --horizontal-pod-autoscaler-* flags).
const (
	DefaultSyncPeriod              = 15 * time.Second
	DefaultDownscaleStabilization  = 5 * time.Minute
	DefaultTolerance               = 0.1
	DefaultCPUInitializationPeriod = 5 * time.Minute
	DefaultInitialReadinessDelay   = 30 * time.Second
)

// Options tunes a Controller; the zero value is Kubernetes' behaviour.
type Options struct {
	// Logger receives logs (nil = discarded).
	Logger *slog.Logger
	// Recorder receives events (SuccessfulRescale, FailedGetScale…); nil = none.
	Recorder record.EventRecorder
	// Clock tells the time (default the real clock).
	Clock clock.PassiveClock
	// SyncPeriod is how often each HPA is reconciled (default DefaultSyncPeriod).
	SyncPeriod time.Duration
	// DownscaleStabilization is the scale-down stabilization window of HPAs that do not
	// set one (default DefaultDownscaleStabilization).
	DownscaleStabilization time.Duration
	// Tolerance is the relative distance from the target within which nothing is scaled
	// (kube-controller-manager's --horizontal-pod-autoscaler-tolerance; nil =
	// DefaultTolerance, 0 scales on any distance). An HPA's behavior may set its own.
	Tolerance *float64
	// CPUInitializationPeriod and InitialReadinessDelay decide which pods' CPU samples
	// are trusted (defaults DefaultCPUInitializationPeriod, DefaultInitialReadinessDelay).
	CPUInitializationPeriod, InitialReadinessDelay time.Duration
}

// Controller reconciles HorizontalPodAutoscalers.
type Controller struct {
	client    kubernetes.Interface
	scales    scale.ScalesGetter
	mapper    meta.ResettableRESTMapper
	metrics   PodMetricsLister
	hpaLister autoscalinglisters.HorizontalPodAutoscalerLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	history   *history
	selectors *selectors
	log       *slog.Logger
	recorder  record.EventRecorder
	clock     clock.PassiveClock
	opts      Options
}

// New returns an HPA controller fed by factory's HPA and Pod informers, scaling targets
// through scales (whose kinds mapper resolves) and reading usage from metrics.
func New(client kubernetes.Interface, scales scale.ScalesGetter, mapper meta.ResettableRESTMapper, metrics PodMetricsLister,
	factory informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = DefaultSyncPeriod
	}
	if opts.DownscaleStabilization <= 0 {
		opts.DownscaleStabilization = DefaultDownscaleStabilization
	}
	if opts.Tolerance == nil {
		opts.Tolerance = ptr.To(DefaultTolerance)
	} else if *opts.Tolerance < 0 {
		return nil, fmt.Errorf("the HorizontalPodAutoscaler tolerance %v is negative", *opts.Tolerance)
	}
	if opts.CPUInitializationPeriod <= 0 {
		opts.CPUInitializationPeriod = DefaultCPUInitializationPeriod
	}
	if opts.InitialReadinessDelay <= 0 {
		opts.InitialReadinessDelay = DefaultInitialReadinessDelay
	}
	hpaInf := factory.Autoscaling().V2().HorizontalPodAutoscalers()
	podInf := factory.Core().V1().Pods()
	c := &Controller{
		client: client, scales: scales, mapper: mapper, metrics: metrics,
		hpaLister: hpaInf.Lister(), podLister: podInf.Lister(),
		synced: []cache.InformerSynced{hpaInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "horizontalpodautoscaler"}),
		history:   newHistory(),
		selectors: newSelectors(),
		log:       opts.Logger.With("controller", "horizontalpodautoscaler"),
		recorder:  opts.Recorder,
		clock:     opts.Clock,
		opts:      opts,
	}
	if _, err := hpaInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		// Status writes (our own) change no generation and need no sync before the next
		// period; a changed spec is acted on at once.
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*autoscalingv2.HorizontalPodAutoscaler)
			n, ok2 := cur.(*autoscalingv2.HorizontalPodAutoscaler)
			if ok1 && ok2 && o.Generation != n.Generation {
				c.enqueue(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			// Its pods are at once free for another HPA.
			if h, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
				c.selectors.forget(h.Namespace + "/" + h.Name)
				c.queue.Add(h.Namespace + "/" + h.Name)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("adding HorizontalPodAutoscaler handler: %w", err)
	}
	return c, nil
}

// Run syncs HPAs with workers goroutines until ctx ends, then waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.RunRequeueing(ctx, c.queue, workers, c.synced, c.sync, c.log, "hpa")
}

func (c *Controller) enqueue(obj any) {
	if h, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
		c.selectors.register(h.Namespace, h.Name)
		c.queue.Add(h.Namespace + "/" + h.Name)
	}
}

// sync reconciles one HPA and has it looked at again after the sync period, whatever
// the outcome: a failure (no metrics yet, a missing target) is retried at the HPA's own
// pace, as in Kubernetes, not with a fast backoff.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil //nolint:nilerr // a malformed key can never succeed
	}
	hpa, err := c.hpaLister.HorizontalPodAutoscalers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.history.forget(key)
		c.selectors.forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading HorizontalPodAutoscaler %s: %w", key, err)
	}
	if err := c.reconcile(ctx, hpa.DeepCopy()); err != nil && ctx.Err() == nil {
		c.log.Info("reconcile failed", "hpa", key, "err", err)
	}
	return c.opts.SyncPeriod, nil
}

// reconcile is one pass over hpa (a copy the caller owns), as Kubernetes'
// reconcileAutoscaler.
func (c *Controller) reconcile(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	key := hpa.Namespace + "/" + hpa.Name
	original := hpa.Status.DeepCopy()
	now := c.clock.Now()
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)
	// Written in the stored object too, so that later reads agree with what is used.
	hpaconv.DefaultBehavior(hpa.Spec.Behavior)

	sc, gr, err := c.getScale(ctx, hpa)
	if err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
		c.writeStatus(ctx, original, hpa)
		return fmt.Errorf("failed to query scale subresource for %s: %w", reference, err)
	}
	c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := sc.Spec.Replicas
	c.history.recordInitial(key, current, now)
	minReplicas := ptr.Deref(hpa.Spec.MinReplicas, 1)

	var (
		desired  int32
		reason   string
		statuses []autoscalingv2.MetricStatus
		retErr   error
	)
	rescale := true
	switch {
	case current == 0 && minReplicas != 0:
		rescale = false
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
	case current > hpa.Spec.MaxReplicas:
		reason, desired = "Current number of replicas above Spec.MaxReplicas", hpa.Spec.MaxReplicas
	case current < minReplicas:
		reason, desired = "Current number of replicas below Spec.MinReplicas", minReplicas
	default:
		var proposed int32
		var metricName string
		proposed, metricName, statuses, err = c.replicasForMetrics(ctx, hpa, sc, now)
		if err != nil && proposed == -1 {
			c.setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, now)
			c.writeStatus(ctx, original, hpa)
			c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
			return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", reference, err)
		}
		retErr = err // some metrics failed but the others still scale up
		desired = proposed
		switch {
		case desired > current:
			reason = metricName + " above target"
		case desired < current:
			reason = "All metrics below target"
		}
		var l limit
		if hpa.Spec.Behavior == nil {
			l = c.history.normalize(key, current, desired, minReplicas, hpa.Spec.MaxReplicas, c.opts.DownscaleStabilization, now)
		} else {
			if hpa.Spec.Behavior.ScaleDown.StabilizationWindowSeconds == nil {
				hpa.Spec.Behavior.ScaleDown.StabilizationWindowSeconds = ptr.To(int32(c.opts.DownscaleStabilization / time.Second))
			}
			l = c.history.normalizeWithBehavior(key, hpa.Spec.Behavior, current, desired, minReplicas, hpa.Spec.MaxReplicas, now)
		}
		if l.stabilized {
			c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, l.stabilizeReason, "%s", l.stabilizeMessage)
		} else {
			c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
		}
		limited := corev1.ConditionFalse
		if l.limitReason != "DesiredWithinRange" {
			limited = corev1.ConditionTrue
		}
		c.setCondition(hpa, autoscalingv2.ScalingLimited, limited, l.limitReason, "%s", l.limitMessage)
		desired = l.replicas
		rescale = desired != current
	}

	if rescale {
		sc.Spec.Replicas = desired
		if _, err := c.scales.Scales(hpa.Namespace).Update(ctx, gr, sc, metav1.UpdateOptions{}); err != nil {
			c.recorder.Eventf(hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, reason, err)
			c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err)
			c.setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, now)
			c.writeStatus(ctx, original, hpa)
			return fmt.Errorf("failed to rescale %s: %w", reference, err)
		}
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired)
		c.recorder.Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, reason)
		c.history.recordScale(key, hpa.Spec.Behavior, current, desired, now)
		c.log.Info("rescaled", "hpa", key, "from", current, "to", desired, "reason", reason)
	} else {
		desired = current
	}
	c.setStatus(hpa, current, desired, statuses, rescale, now)
	if err := c.writeStatus(ctx, original, hpa); err != nil {
		return err
	}
	return retErr
}

// getScale reads the target's Scale through the first of its kind's REST mappings that
// answers; an unknown kind resets the mapper so that a resource added since (a CRD) is
// found on the next sync.
func (c *Controller) getScale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.Scale, schema.GroupResource, error) {
	ref := hpa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, schema.GroupResource{}, fmt.Errorf("invalid API version in scale target reference: %w", err)
	}
	mappings, err := c.mapper.RESTMappings(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	if err != nil {
		c.mapper.Reset()
		return nil, schema.GroupResource{}, fmt.Errorf("unable to determine resource for scale target reference: %w", err)
	}
	var first error
	for _, m := range mappings {
		gr := m.Resource.GroupResource()
		sc, err := c.scales.Scales(hpa.Namespace).Get(ctx, gr, ref.Name, metav1.GetOptions{})
		if err == nil {
			return sc, gr, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("no REST mapping for %s", ref.Kind)
	}
	return nil, schema.GroupResource{}, first
}

// replicasForMetrics takes the highest proposal of hpa's metrics. It fails (-1) when
// every metric fails, or when some fail and the others would scale down: without them
// the HPA cannot tell that scaling down is safe.
func (c *Controller) replicasForMetrics(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, sc *autoscalingv1.Scale, now time.Time) (int32, string, []autoscalingv2.MetricStatus, error) {
	if sc.Status.Selector == "" {
		msg := "selector is required"
		c.recorder.Event(hpa, corev1.EventTypeWarning, "SelectorRequired", msg)
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return -1, "", nil, errors.New(msg)
	}
	selector, err := labels.Parse(sc.Status.Selector)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "InvalidSelector", msg)
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "%s", msg)
		return -1, "", nil, errors.New(msg)
	}
	c.selectors.put(hpa.Namespace, hpa.Name, selector)
	pods, err := c.podLister.Pods(hpa.Namespace).List(selector)
	if err != nil {
		return -1, "", nil, fmt.Errorf("listing the target's pods: %w", err)
	}
	// Two HPAs scaling the same pods would undo each other's work: neither scales.
	if hpas := c.selectors.controlling(pods); len(hpas) > 1 {
		msg := fmt.Sprintf("pods by selector %v are controlled by multiple HPAs: %v", sc.Status.Selector, hpas)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "AmbiguousSelector", msg)
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "AmbiguousSelector", "%s", msg)
		return -1, "", nil, errors.New(msg)
	}
	specs := hpa.Spec.Metrics
	statuses := make([]autoscalingv2.MetricStatus, len(specs))
	var replicas int32
	var name string
	invalid := 0
	var firstErr error
	var firstReason string
	calc := c.calculator(now)
	for i, spec := range specs {
		n, metricName, reason, err := c.replicasForMetric(ctx, hpa.Namespace, selector, pods, sc.Spec.Replicas, spec, calc, &statuses[i])
		if err != nil {
			// Kubernetes records an event for every failing metric, and keeps the
			// condition of the first.
			c.recorder.Event(hpa, corev1.EventTypeWarning, reason, err.Error())
			if invalid == 0 {
				firstErr, firstReason = err, reason
			}
			invalid++
			continue
		}
		if replicas == 0 || n > replicas {
			replicas, name = n, metricName
		}
	}
	if invalid > 0 {
		err := fmt.Errorf("invalid metrics (%d invalid out of %d), first error is: %w", invalid, len(specs), firstErr)
		if invalid >= len(specs) || replicas < sc.Spec.Replicas {
			c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, firstReason, "the HPA was unable to compute the replica count: %v", firstErr)
			return -1, "", statuses, err
		}
		firstErr = err
	}
	c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", name)
	return replicas, name, statuses, firstErr
}

func (c *Controller) calculator(now time.Time) calculator {
	return calculator{now: now, cpuInitialization: c.opts.CPUInitializationPeriod, initialReadiness: c.opts.InitialReadinessDelay,
		tol: tolerances{down: *c.opts.Tolerance, up: *c.opts.Tolerance}}
}

// errNoCustomMetrics is why Pods, Object and External metrics cannot be read.
var errNoCustomMetrics = errors.New("wasmplane serves no custom or external metrics API (custom.metrics.k8s.io, external.metrics.k8s.io)")

// replicasForMetric computes one metric's proposal and fills its status; on failure it
// returns the reason of the ScalingActive condition and event.
func (c *Controller) replicasForMetric(ctx context.Context, namespace string, selector labels.Selector, pods []*corev1.Pod, current int32,
	spec autoscalingv2.MetricSpec, calc calculator, status *autoscalingv2.MetricStatus) (int32, string, string, error) {
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			return 0, "", "FailedGetResourceMetric", errors.New("resource metric source is nil")
		}
		n, name, cur, err := c.resourceProposal(ctx, namespace, selector, pods, current, spec.Resource.Name, "", spec.Resource.Target, calc)
		if err != nil {
			return 0, "", "FailedGetResourceMetric", err
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, Resource: &autoscalingv2.ResourceMetricStatus{Name: spec.Resource.Name, Current: cur}}
		return n, name, "", nil
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource == nil {
			return 0, "", "FailedGetContainerResourceMetric", errors.New("container resource metric source is nil")
		}
		cr := spec.ContainerResource
		n, name, cur, err := c.resourceProposal(ctx, namespace, selector, pods, current, cr.Name, cr.Container, cr.Target, calc)
		if err != nil {
			return 0, "", "FailedGetContainerResourceMetric", err
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: cr.Name, Container: cr.Container, Current: cur}}
		return n, name, "", nil
	case autoscalingv2.PodsMetricSourceType:
		return 0, "", "FailedGetPodsMetric", fmt.Errorf("failed to get pods metric value: %w", errNoCustomMetrics)
	case autoscalingv2.ObjectMetricSourceType:
		return 0, "", "FailedGetObjectMetric", fmt.Errorf("failed to get object metric value: %w", errNoCustomMetrics)
	case autoscalingv2.ExternalMetricSourceType:
		return 0, "", "FailedGetExternalMetric", fmt.Errorf("failed to get external metric value: %w", errNoCustomMetrics)
	default:
		return 0, "", "InvalidMetricSourceType", fmt.Errorf("unknown metric source type %q", spec.Type)
	}
}

// resourceProposal is the proposal of a Resource or ContainerResource metric, with the
// metric's name for the rescale reason and its current value for the status.
func (c *Controller) resourceProposal(ctx context.Context, namespace string, selector labels.Selector, pods []*corev1.Pod, current int32,
	resource corev1.ResourceName, container string, target autoscalingv2.MetricTarget, calc calculator) (int32, string, autoscalingv2.MetricValueStatus, error) {
	var t usageTarget
	switch {
	case target.AverageValue != nil:
		t.averageValue = target.AverageValue.MilliValue()
	case target.AverageUtilization != nil:
		t.utilization = *target.AverageUtilization
	default:
		return 0, "", autoscalingv2.MetricValueStatus{}, errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	what := "usage"
	if t.utilization > 0 {
		what = "utilization"
	}
	metrics, _, err := resourceMetrics(ctx, c.metrics, namespace, selector, resource, container)
	if err != nil {
		return 0, "", autoscalingv2.MetricValueStatus{}, fmt.Errorf("failed to get %s %s: %w", resource, what, err)
	}
	p, err := calc.resourceReplicas(current, t, resource, container, pods, metrics)
	if err != nil {
		return 0, "", autoscalingv2.MetricValueStatus{}, fmt.Errorf("failed to get %s %s: %w", resource, what, err)
	}
	cur := autoscalingv2.MetricValueStatus{AverageValue: resourceQuantity(p.average)}
	if t.utilization == 0 {
		return p.replicas, fmt.Sprintf("%s resource", resource), cur, nil
	}
	cur.AverageUtilization = ptr.To(p.utilization)
	name := fmt.Sprintf("%s resource utilization (percentage of request)", resource)
	if container != "" {
		name = fmt.Sprintf("%s container resource utilization (percentage of request)", resource)
	}
	return p.replicas, name, cur, nil
}

// setStatus writes the replica counts and metrics; conditions are set as they happen.
func (c *Controller) setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired int32, metrics []autoscalingv2.MetricStatus, rescaled bool, now time.Time) {
	hpa.Status.CurrentReplicas = current
	hpa.Status.DesiredReplicas = desired
	hpa.Status.CurrentMetrics = metrics
	if rescaled {
		hpa.Status.LastScaleTime = &metav1.Time{Time: now}
	}
}

// setCondition sets a condition, keeping its transition time unless its status changes.
func (c *Controller) setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType,
	status corev1.ConditionStatus, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for i := range hpa.Status.Conditions {
		cond := &hpa.Status.Conditions[i]
		if cond.Type != typ {
			continue
		}
		if cond.Status != status {
			cond.LastTransitionTime = metav1.Time{Time: c.clock.Now()}
		}
		cond.Status, cond.Reason, cond.Message = status, reason, msg
		return
	}
	hpa.Status.Conditions = append(hpa.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
		Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.Time{Time: c.clock.Now()}})
}

// writeStatus updates the HPA's status if it changed.
func (c *Controller) writeStatus(ctx context.Context, original *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if apiequality.Semantic.DeepEqual(original, &hpa.Status) {
		return nil
	}
	if _, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	return nil
}
