// Package job is the batch/v1 Job controller: it runs a Job's pods until enough of them
// succeed (NonIndexed or Indexed completion, or a successPolicy) or the Job fails
// (backoff limit, active deadline, a podFailurePolicy FailJob rule, failed indexes under
// backoffLimitPerIndex), tracks terminated pods with the batch.kubernetes.io/job-tracking finalizer
// and status.uncountedTerminatedPods so no pod is counted twice or lost, and reports the
// conditions Kubernetes 1.37 reports. It talks to the API only through client-go.
package job

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	"github.com/wasmplane/wasmplane/core/controller/replicaset"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Labels, annotations and the finalizer Kubernetes' Job controller uses.
const (
	// TrackingFinalizer keeps a Job's terminated pod around until the controller has
	// counted it in the Job's status.
	TrackingFinalizer = "batch.kubernetes.io/job-tracking"
	// CompletionIndexKey is the annotation and label that carry an Indexed Job pod's index.
	CompletionIndexKey = "batch.kubernetes.io/job-completion-index"
	// CompletionIndexEnv is the environment variable that gives a container its index.
	CompletionIndexEnv = "JOB_COMPLETION_INDEX"
)

// Backoff between pod recreations after failures, as kube-controller-manager's.
const (
	DefaultBackoff = 10 * time.Second
	MaxBackoff     = 6 * time.Minute
)

// controllerKind is written into the ownerReferences of the pods a Job creates.
var controllerKind = batchv1.SchemeGroupVersion.WithKind("Job")

// Options tunes a Controller; the zero value is Kubernetes' behaviour.
type Options struct {
	// Logger receives logs (nil = discarded).
	Logger *slog.Logger
	// Recorder receives events (SuccessfulCreate, BackoffLimitExceeded, Completed…); nil = none.
	Recorder record.EventRecorder
	// Clock tells the time for deadlines, backoff and status times (default the real clock).
	Clock clock.Clock
	// Backoff is the delay before recreating a pod after the first failure; it doubles
	// with each further failure up to MaxBackoff (default DefaultBackoff).
	Backoff time.Duration
}

// Controller reconciles Jobs.
type Controller struct {
	client       kubernetes.Interface
	jobLister    batchlisters.JobLister
	podLister    corelisters.PodLister
	synced       []cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *replicaset.Expectations
	log          *slog.Logger
	recorder     record.EventRecorder
	clock        clock.Clock
	backoff      time.Duration
	// written is, per Job, the resourceVersion of the last status this controller wrote.
	// Finalizers of counted pods go right after that write, so a Job read from the cache
	// before the write shows up would miss those pods and start replacements: such a
	// stale Job waits.
	writtenMu sync.Mutex
	written   map[string]uint64
	// removals are the finalizer removals made and not yet seen in the pod cache.
	removals *removals
}

// New returns a Job controller fed by factory's Job and Pod informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	jobInf := factory.Batch().V1().Jobs()
	podInf := factory.Core().V1().Pods()
	c := &Controller{
		client: client, jobLister: jobInf.Lister(), podLister: podInf.Lister(),
		synced: []cache.InformerSynced{jobInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "job"}),
		expectations: replicaset.NewExpectations(opts.Clock.Now),
		log:          opts.Logger.With("controller", "job"),
		recorder:     opts.Recorder,
		clock:        opts.Clock,
		backoff:      opts.Backoff,
		written:      map[string]uint64{},
		removals:     newRemovals(),
	}
	if _, err := jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueJob,
		UpdateFunc: func(_, cur any) { c.enqueueJob(cur) },
		DeleteFunc: c.deleteJob,
	}); err != nil {
		return nil, fmt.Errorf("adding Job handler: %w", err)
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				c.podEvent(pod, true, false)
			}
		},
		UpdateFunc: func(_, cur any) {
			if pod, ok := cur.(*corev1.Pod); ok {
				c.podEvent(pod, false, false)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				c.podEvent(pod, false, true)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("adding pod handler: %w", err)
	}
	return c, nil
}

// Run syncs Jobs with workers goroutines until ctx ends, then waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.RunRequeueing(ctx, c.queue, workers, c.synced, c.sync, c.log, "job")
}

func keyOf(obj metav1.Object) string { return obj.GetNamespace() + "/" + obj.GetName() }

func (c *Controller) enqueueJob(obj any) {
	if j, ok := obj.(*batchv1.Job); ok {
		c.queue.Add(keyOf(j))
	}
}

func (c *Controller) deleteJob(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if j, ok := obj.(*batchv1.Job); ok {
		c.expectations.Delete(keyOf(j))
		c.removals.forget(keyOf(j))
		// Its pods may still carry the tracking finalizer: the sync of a missing Job
		// releases them.
		c.queue.Add(keyOf(j))
	}
}

// podEvent requeues the Job that controls pod, telling the expectations what was seen.
func (c *Controller) podEvent(pod *corev1.Pod, added, deleted bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return
	}
	key := pod.Namespace + "/" + ref.Name
	switch {
	case added && pod.DeletionTimestamp == nil:
		c.expectations.CreationObserved(key)
	case deleted || pod.DeletionTimestamp != nil:
		c.expectations.DeletionObserved(key, keyOf(pod))
	}
	if deleted || !hasFinalizer(pod) {
		c.removals.observed(key, pod.UID)
	}
	c.queue.Add(key)
}

// sync reconciles one Job: count terminated pods, decide conditions, create or delete
// pods, write status, then release the counted pods' finalizers. It returns when to look
// again for a deadline or a backoff that ends.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil //nolint:nilerr // a malformed key can never succeed
	}
	job, err := c.jobLister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Delete(key)
		c.forgetWritten(key)
		return 0, c.releaseOrphans(ctx, key, ns, name, nil)
	}
	if err != nil {
		return 0, fmt.Errorf("reading Job %s: %w", key, err)
	}
	if managedElsewhere(job) {
		// spec.managedBy names another controller: it owns the Job's pods and status,
		// as kube-controller-manager's Job controller leaves them.
		return 0, nil
	}
	if !c.expectations.Satisfied(key) {
		return 0, nil // a pod event for our own write will requeue the Job
	}
	if c.stale(key, job) {
		return staleRequeue, nil // the Job's update event requeues it sooner
	}
	pods, err := c.podsOf(job)
	if err != nil {
		return 0, err
	}
	// Pods whose finalizer this controller removed count as released even while the
	// cache still shows the finalizer.
	pods = c.removals.apply(key, pods)
	if isFinished(job) {
		return 0, c.releaseOrphans(ctx, key, ns, name, pods)
	}
	r := c.reconcile(job, pods)
	return r.requeueAfter, c.act(ctx, job, r)
}

// managedElsewhere reports whether job's spec.managedBy names a controller other than
// the built-in one (kubernetes.io/job-controller).
func managedElsewhere(job *batchv1.Job) bool {
	return job.Spec.ManagedBy != nil && *job.Spec.ManagedBy != batchv1.JobControllerName
}

// staleRequeue is when a Job read from a cache behind this controller's own status write
// is looked at again, should its update event not come first.
const staleRequeue = 100 * time.Millisecond

// stale reports whether job, from the cache, predates the last status written for it.
func (c *Controller) stale(key string, job *batchv1.Job) bool {
	rv, err := strconv.ParseUint(job.ResourceVersion, 10, 64)
	if err != nil {
		return false
	}
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	return rv < c.written[key]
}

// wrote records the resourceVersion of a status write.
func (c *Controller) wrote(key string, job *batchv1.Job) {
	rv, err := strconv.ParseUint(job.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	c.written[key] = max(c.written[key], rv)
}

func (c *Controller) forgetWritten(key string) {
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	delete(c.written, key)
}

// podsOf returns the pods job controls.
func (c *Controller) podsOf(job *batchv1.Job) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		c.log.Error("invalid selector", "job", keyOf(job), "err", err)
		return nil, nil
	}
	all, err := c.podLister.Pods(job.Namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("listing pods of Job %s: %w", keyOf(job), err)
	}
	var out []*corev1.Pod
	for _, p := range all {
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.UID == job.UID {
			out = append(out, p)
		}
	}
	return out, nil
}

// releaseOrphans removes the tracking finalizer from pods whose Job is gone or finished:
// nothing will count them any more, and the finalizer would keep them forever.
func (c *Controller) releaseOrphans(ctx context.Context, key, ns, jobName string, pods []*corev1.Pod) error {
	if pods == nil {
		all, err := c.podLister.Pods(ns).List(labels.Everything())
		if err != nil {
			return fmt.Errorf("listing pods: %w", err)
		}
		for _, p := range all {
			if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.Kind == controllerKind.Kind && ref.Name == jobName {
				pods = append(pods, p)
			}
		}
		pods = c.removals.apply(key, pods)
	}
	var todo []*corev1.Pod
	for _, p := range pods {
		if hasFinalizer(p) {
			todo = append(todo, p)
		}
	}
	_, err := c.removeFinalizers(ctx, key, todo)
	return err
}
