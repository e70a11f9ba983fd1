package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/simnode"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// change is a readiness change written and not yet seen in an EndpointSlice: at is when
// its status write began, written when it returned, podSeen when the benchmark's own pod
// watch delivered the pod in its new state (each zero until then).
type change struct {
	ready                bool
	at, written, podSeen time.Time
}

// stages splits one change's latency where the benchmark can see it from outside, the
// same for every side: the status write (start → return), the pod's watch delivery
// (return → the benchmark's pod watch has it; the controllers' informers get the same
// event), and the rest (the controller's queue and sync, the slice write and the slice's
// watch delivery). A stage whose end came before its start (an event delivered before
// the write's answer) counts 0.
type stages struct {
	total, write, podWatch, controller time.Duration
}

func stagesOf(ch change, now time.Time) stages {
	st := stages{total: now.Sub(ch.at)}
	written, podSeen := ch.written, ch.podSeen
	if written.IsZero() || written.After(now) {
		written = now
	}
	if podSeen.IsZero() || podSeen.After(now) {
		podSeen = now
	}
	st.write = written.Sub(ch.at)
	if podSeen.After(written) {
		st.podWatch = podSeen.Sub(written)
	}
	// The controller stage starts when both the write answered and the pod event came.
	st.controller = now.Sub(later(written, podSeen))
	return st
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sliceWatch follows the Service's EndpointSlices and times each pending change from
// the start of its status write to the first slice event showing the pod's endpoint in
// the new state.
type sliceWatch struct {
	mu       sync.Mutex
	pending  map[string]change
	state    map[string]bool // pod → ready, as the slices last said
	toReady  []time.Duration
	notReady []time.Duration
	// toReadyAfterWrite times the Ready changes from the return of their status write
	// instead; a slice seen before the write returned counts 0.
	toReadyAfterWrite []time.Duration
	// all holds the stages of every change, both directions.
	all []stages
}

// podObserved notes when the benchmark's pod watch delivers a pending change's pod in
// its new readiness.
func (w *sliceWatch) podObserved(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.pending[p.Name]; ok && ch.ready == ready && ch.podSeen.IsZero() {
		ch.podSeen = now
		w.pending[p.Name] = ch
	}
}

func (w *sliceWatch) observe(obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ep := range s.Endpoints {
		if ep.TargetRef == nil {
			continue
		}
		ready := ep.Conditions.Ready != nil && *ep.Conditions.Ready
		pod := ep.TargetRef.Name
		w.state[pod] = ready
		if ch, ok := w.pending[pod]; ok && ch.ready == ready {
			delete(w.pending, pod)
			w.all = append(w.all, stagesOf(ch, now))
			if ready {
				w.toReady = append(w.toReady, now.Sub(ch.at))
				after := time.Duration(0)
				if !ch.written.IsZero() {
					after = now.Sub(ch.written)
				}
				w.toReadyAfterWrite = append(w.toReadyAfterWrite, after)
			} else {
				w.notReady = append(w.notReady, now.Sub(ch.at))
			}
		}
	}
}

// written notes the return of a change's status write.
func (w *sliceWatch) written(pod string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.pending[pod]; ok {
		ch.written = at
		w.pending[pod] = ch
	}
}

func (w *sliceWatch) readyCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.state {
		if r {
			n++
		}
	}
	return n
}

// endpointSlicePhase puts o.epPods pods behind a Service, waits until the slices list
// them all ready, then flips pods' readiness at o.epRate changes per second (each pod
// alternately not ready and ready again, one change in flight per pod) for o.epDuration.
func endpointSlicePhase(ctx context.Context, c *cluster, o options, ns string) ([]figure, error) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if _, err := c.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the Service: %w", err)
	}
	w := &sliceWatch{pending: map[string]change{}, state: map[string]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(c.cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = discoveryv1.LabelServiceName + "=web" }))
	inf := factory.Discovery().V1().EndpointSlices().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: w.observe, UpdateFunc: func(_, obj any) { w.observe(obj) }}); err != nil {
		return nil, fmt.Errorf("watching EndpointSlices: %w", err)
	}
	wctx, stop := context.WithCancel(ctx)
	podInf := informers.NewSharedInformerFactoryWithOptions(c.cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = "app=web" }))
	defer func() { stop(); factory.Shutdown(); podInf.Shutdown() }()
	if _, err := podInf.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { w.podObserved(obj) }}); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	factory.Start(wctx.Done())
	podInf.Start(wctx.Done())

	// The pods are bound to the simulated nodes directly: this phase times the
	// EndpointSlice controller, not the scheduler.
	names := simnode.Names("web", 0, o.epPods)
	for i, name := range names {
		tmpl := template("web", corev1.RestartPolicyAlways)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		pod.Spec.NodeName = simnode.Names("sim", i%max(o.jobNodes, 1), 1)[0]
		if _, err := c.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating pod %s: %w", name, err)
		}
	}
	if err := poll(ctx, func(context.Context) (bool, error) { return w.readyCount() == o.epPods, nil }); err != nil {
		return nil, fmt.Errorf("waiting for %d ready endpoints (have %d): %w", o.epPods, w.readyCount(), err)
	}
	pods := map[string]*corev1.Pod{}
	for _, name := range names {
		p, err := c.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading pod %s: %w", name, err)
		}
		pods[name] = p
	}

	var writes sync.WaitGroup
	var writeMu sync.Mutex
	var writeLat []time.Duration
	errs := make(chan error, 1)
	skipped, next, issued := 0, 0, 0
	// The ticker only wakes the loop; the changes due by the clock are made on each wake,
	// so that a late wake on a busy machine does not lower the rate.
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.epRate))
	began := time.Now()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errs:
			tick.Stop()
			writes.Wait()
			return nil, err
		case <-tick.C:
		}
		el := time.Since(began)
		if el >= o.epDuration {
			break loop
		}
		for ; issued < int(el.Seconds()*o.epRate); issued++ {
			// The next pod with no change in flight; the pods take turns.
			w.mu.Lock()
			name := ""
			for range names {
				cand := names[next%len(names)]
				next++
				if _, busy := w.pending[cand]; !busy {
					name = cand
					break
				}
			}
			if name == "" {
				skipped++
				w.mu.Unlock()
				continue
			}
			ready := !w.state[name]
			w.pending[name] = change{ready: ready, at: time.Now()}
			w.mu.Unlock()
			pod := pods[name]
			writes.Go(func() {
				start := time.Now()
				err := setReady(ctx, c.cs, pod, ready)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				done := time.Now()
				w.written(name, done)
				writeMu.Lock()
				writeLat = append(writeLat, done.Sub(start))
				writeMu.Unlock()
			})
		}
	}
	tick.Stop()
	writes.Wait()
	// Let the last changes arrive.
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.pending) == 0, nil
	})
	if err != nil {
		w.mu.Lock()
		n := len(w.pending)
		w.mu.Unlock()
		return nil, fmt.Errorf("%d readiness changes never reached an EndpointSlice: %w", n, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// A change due while every pod still has one in flight is not made: the rate held is
	// then lower than asked, and the figures say so.
	fmt.Fprintf(os.Stderr, "  %d changes due in %v, %d made: %d to ready, %d to not ready\n", issued, o.epDuration, issued-skipped, len(w.toReady), len(w.notReady))
	ms := func(v float64) string { return fmt.Sprintf("%.1f ms", v) }
	rate := fmt.Sprintf("%.0f changes/s", o.epRate)
	return append([]figure{
		{name: fmt.Sprintf("EndpointSlice, pod → Ready, p50 (%s)", rate), value: pct(w.toReady, 50), format: ms},
		{name: fmt.Sprintf("EndpointSlice, pod → Ready, p99 (%s)", rate), value: pct(w.toReady, 99), format: ms},
		{name: fmt.Sprintf("EndpointSlice, pod → Ready, p99 after the status write returned (%s)", rate), value: pct(w.toReadyAfterWrite, 99), format: ms},
		{name: fmt.Sprintf("EndpointSlice, pod → not Ready, p99 (%s)", rate), value: pct(w.notReady, 99), format: ms},
		{name: fmt.Sprintf("pod status write (part of the above), p99 (%s)", rate), value: pct(writeLat, 99), format: ms},
		{name: fmt.Sprintf("changes not made: every pod had one in flight (%s)", rate), value: float64(skipped), format: func(v float64) string { return fmt.Sprintf("%.0f", v) }},
	}, stageFigures(w.all, rate, ms)...), nil
}

// stageFigures are each stage's p50 and p99 over all changes (both directions), and
// each stage's mean over the slowest 1 % of changes: where the tail's time went.
func stageFigures(all []stages, rate string, ms func(float64) string) []figure {
	if len(all) == 0 {
		return nil
	}
	parts := []struct {
		name string
		of   func(stages) time.Duration
	}{
		{"1 status write", func(s stages) time.Duration { return s.write }},
		{"2 pod watch delivery", func(s stages) time.Duration { return s.podWatch }},
		{"3 controller, slice write, slice watch", func(s stages) time.Duration { return s.controller }},
	}
	byTotal := slices.Clone(all)
	slices.SortFunc(byTotal, func(a, b stages) int { return int(b.total - a.total) })
	tail := byTotal[:max(1, len(byTotal)/100)]
	var out []figure
	for _, p := range parts {
		d := make([]time.Duration, len(all))
		for i, s := range all {
			d[i] = p.of(s)
		}
		var sum time.Duration
		for _, s := range tail {
			sum += p.of(s)
		}
		out = append(out,
			figure{name: fmt.Sprintf("stage %s, p50 (%s)", p.name, rate), value: pct(d, 50), format: ms},
			figure{name: fmt.Sprintf("stage %s, p99 (%s)", p.name, rate), value: pct(d, 99), format: ms},
			figure{name: fmt.Sprintf("stage %s, mean over the slowest 1 %% of changes (%s)", p.name, rate),
				value: float64((sum / time.Duration(len(tail))).Microseconds()) / 1000, format: ms})
	}
	return out
}

// setReady writes a pod's readiness as its kubelet would; pods holds the latest copy,
// which only this write changes.
func setReady(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, ready bool) error {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	now := metav1.Now()
	simnode.SetCondition(pod, corev1.PodReady, st, now)
	simnode.SetCondition(pod, corev1.ContainersReady, st, now)
	for i := range pod.Status.ContainerStatuses {
		pod.Status.ContainerStatuses[i].Ready = ready
	}
	for {
		got, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err == nil {
			*pod = *got
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("updating the readiness of %s: %w", pod.Name, err)
		}
		fresh, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("re-reading %s: %w", pod.Name, err)
		}
		fresh.Status.Conditions, fresh.Status.ContainerStatuses = pod.Status.Conditions, pod.Status.ContainerStatuses
		*pod = *fresh
	}
}

// pct is the p-th percentile of d in milliseconds.
func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*p/100)].Microseconds()) / 1000
}
