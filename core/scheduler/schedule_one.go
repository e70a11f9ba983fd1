package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/metrics"
	"github.com/wasmplane/wasmplane/core/scheduler/queue"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
)

// Kubernetes' constants for the number of nodes to evaluate.
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
	// pluginMetricsSamplePercent of cycles record per-plugin latencies (as Kubernetes).
	pluginMetricsSamplePercent = 10
)

// ErrNoNodesAvailable is returned when the cluster has no nodes at all.
var ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")

// NumFeasibleNodesToFind is how many feasible nodes Filter looks for before stopping:
// all nodes below 100; otherwise percentage (or the adaptive 50 − nodes/125, at least
// 5 %) of the nodes, but at least 100.
func NumFeasibleNodesToFind(percentage *int32, numAllNodes int) int {
	if numAllNodes < minFeasibleNodesToFind {
		return numAllNodes
	}
	pct := int32(0)
	if percentage != nil {
		pct = *percentage
	}
	if pct >= 100 {
		return numAllNodes
	}
	if pct <= 0 {
		pct = int32(50 - numAllNodes/125)
		if pct < minFeasibleNodesPercentageToFind {
			pct = minFeasibleNodesPercentageToFind
		}
	}
	n := numAllNodes * int(pct) / 100
	if n < minFeasibleNodesToFind {
		return minFeasibleNodesToFind
	}
	return n
}

// scheduleOne runs one scheduling cycle and starts the binding cycle; false = stop.
func (s *Scheduler) scheduleOne(ctx context.Context) bool {
	qp := s.queue.Pop(ctx)
	if qp == nil {
		return false
	}
	pod := qp.Pod
	fw := s.profiles[pod.Spec.SchedulerName]
	if fw == nil || pod.DeletionTimestamp != nil || s.cache.IsAssumedPod(pod) {
		s.queue.Done(pod.UID)
		return true
	}
	// The plugin set is fixed for this pod's whole scheduling and binding cycle, so an
	// extension swapped meanwhile never affects it.
	ps := fw.Plugins()
	cycle := s.queue.SchedulingCycle()
	start := time.Now()
	state := framework.NewCycleState()
	state.RecordPluginMetrics = rand.IntN(100) < pluginMetricsSamplePercent

	s.cache.UpdateSnapshot(s.snapshot)
	fw.SetSnapshot(s.snapshot)

	host, err := s.schedulePod(ctx, fw, ps, state, pod)
	if err != nil {
		nominated := ""
		var fitErr *framework.FitError
		if errors.As(err, &fitErr) && ps.HasPostFilterPlugins() {
			res, st := ps.RunPostFilterPlugins(ctx, state, pod, fitErr.Diagnosis.NodeToStatus)
			if st.Code() == framework.Error {
				s.log.Error("PostFilter failed", "pod", klogKey(pod), "err", st.Err())
			} else {
				fitErr.Diagnosis.PostFilterMsg = st.Message()
			}
			if res != nil {
				nominated = res.NominatedNodeName
			}
		}
		s.handleFailure(ctx, fw, qp, err, cycle, start, nominated)
		return true
	}

	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = host
	if err := s.cache.AssumePod(assumed); err != nil {
		s.handleFailure(ctx, fw, qp, fmt.Errorf("assuming pod: %w", err), cycle, start, "")
		return true
	}
	if st := ps.RunReservePluginsReserve(ctx, state, assumed, host); !st.IsSuccess() {
		s.undo(ctx, ps, state, assumed, host)
		s.handleFailure(ctx, fw, qp, statusErr(st, pod, len(s.snapshot.NodeInfoList)), cycle, start, "")
		return true
	}
	if st := ps.RunPermitPlugins(ctx, state, assumed, host); !st.IsSuccess() && !st.IsWait() {
		s.undo(ctx, ps, state, assumed, host)
		s.handleFailure(ctx, fw, qp, statusErr(st, pod, len(s.snapshot.NodeInfoList)), cycle, start, "")
		return true
	}
	s.bindings.Add(1)
	go func() {
		defer s.bindings.Done()
		s.bindingCycle(ctx, fw, ps, state, qp, assumed, host, cycle, start)
	}()
	return true
}

// statusErr turns a Reserve/Permit rejection into a FitError-like message.
func statusErr(st *framework.Status, pod *v1.Pod, numNodes int) error {
	if st.IsRejected() {
		return &rejectedError{st: st}
	}
	return st.Err()
}

// rejectedError is a rejection after Filter (Reserve, Permit): unschedulable, not an error.
type rejectedError struct{ st *framework.Status }

// Error implements error.
func (e *rejectedError) Error() string { return e.st.Message() }

func (s *Scheduler) undo(ctx context.Context, ps *framework.PluginSet, state *framework.CycleState, assumed *v1.Pod, host string) {
	ps.RunReservePluginsUnreserve(ctx, state, assumed, host)
	if err := s.cache.ForgetPod(assumed); err != nil {
		s.log.Error("scheduler cache ForgetPod", "pod", klogKey(assumed), "err", err)
	}
}

func (s *Scheduler) bindingCycle(ctx context.Context, fw *framework.Framework, ps *framework.PluginSet, state *framework.CycleState,
	qp *framework.QueuedPodInfo, assumed *v1.Pod, host string, cycle int64, start time.Time) {
	fail := func(err error) {
		s.undo(ctx, ps, state, assumed, host)
		// Freed resources may help other pods, as when a bound pod is deleted.
		s.queue.MoveAllToActiveOrBackoffQueue(queue.EventAssignedPodDelete)
		s.handleFailure(ctx, fw, qp, err, cycle, start, "")
	}
	if st := ps.WaitOnPermit(ctx, assumed); !st.IsSuccess() {
		if st.IsRejected() {
			fail(&rejectedError{st: st})
		} else {
			fail(st.Err())
		}
		return
	}
	select {
	case s.bindSlots <- struct{}{}:
	case <-ctx.Done():
		fail(fmt.Errorf("binding pod: %w", ctx.Err()))
		return
	}
	st := ps.RunPreBindPlugins(ctx, state, assumed, host)
	if st.IsSuccess() {
		st = ps.RunBindPlugins(ctx, state, assumed, host)
	}
	<-s.bindSlots
	if !st.IsSuccess() {
		fail(st.Err())
		return
	}
	if err := s.cache.FinishBinding(assumed); err != nil {
		s.log.Error("scheduler cache FinishBinding", "err", err)
	}
	s.metrics.ObserveAttempt(metrics.Scheduled, fw.Name(), time.Since(start))
	fw.EventRecorder().Eventf(qp.Pod, nil, v1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %v/%v to %v", qp.Pod.Namespace, qp.Pod.Name, host)
	ps.RunPostBindPlugins(ctx, state, assumed, host)
	s.queue.Done(assumed.UID)
}

// schedulePod runs PreFilter, Filter (in parallel, stopping at enough feasible nodes),
// PreScore, Score and picks the best node.
func (s *Scheduler) schedulePod(ctx context.Context, fw *framework.Framework, ps *framework.PluginSet, state *framework.CycleState, pod *v1.Pod) (string, error) {
	all := s.snapshot.NodeInfoList
	if len(all) == 0 {
		return "", ErrNoNodesAvailable
	}
	feasible, diag, err := s.findNodesThatFitPod(ctx, fw, ps, state, pod)
	if err != nil {
		return "", err
	}
	if len(feasible) == 0 {
		return "", &framework.FitError{Pod: pod, NumAllNodes: len(all), Diagnosis: diag}
	}
	if len(feasible) == 1 {
		host := feasible[0].Node().Name
		state.Write(summaryKey, newSummary(fw.ProfileName(), len(all), 1, diag, nil, host))
		return host, nil
	}
	if st := ps.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return "", st.Err()
	}
	scores, st := ps.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return "", st.Err()
	}
	host := selectHost(scores)
	state.Write(summaryKey, newSummary(fw.ProfileName(), len(all), len(feasible), diag, scores, host))
	return host, nil
}

// selectHost returns the highest-scoring node, breaking ties uniformly at random.
func selectHost(scores []framework.NodePluginScores) string {
	best, n := 0, 1
	for i := 1; i < len(scores); i++ {
		switch {
		case scores[i].TotalScore > scores[best].TotalScore:
			best, n = i, 1
		case scores[i].TotalScore == scores[best].TotalScore:
			n++
			if rand.IntN(n) == 0 {
				best = i
			}
		}
	}
	return scores[best].Name
}

func (s *Scheduler) findNodesThatFitPod(ctx context.Context, fw *framework.Framework, ps *framework.PluginSet, state *framework.CycleState, pod *v1.Pod) ([]*framework.NodeInfo, framework.Diagnosis, error) {
	diag := framework.Diagnosis{NodeToStatus: framework.NodeToStatus{}, UnschedulablePlugins: sets.New[string]()}
	all := s.snapshot.NodeInfoList
	pfr, st := ps.RunPreFilterPlugins(ctx, state, pod, all)
	if !st.IsSuccess() {
		if !st.IsRejected() {
			return nil, diag, st.Err()
		}
		diag.PreFilterMsg = st.Message()
		for _, ni := range all {
			diag.NodeToStatus[ni.Node().Name] = st
		}
		diag.UnschedulablePlugins.Insert(st.Plugin())
		return nil, diag, nil
	}
	nodes := all
	if pfr != nil && pfr.NodeNames != nil {
		nodes = make([]*framework.NodeInfo, 0, pfr.NodeNames.Len())
		for name := range pfr.NodeNames {
			if ni, err := s.snapshot.Get(name); err == nil {
				nodes = append(nodes, ni)
			}
		}
	}
	// A nominated node (set by preemption) is tried first, as Kubernetes does.
	if nn := pod.Status.NominatedNodeName; nn != "" {
		if ni, err := s.snapshot.Get(nn); err == nil {
			if st := ps.RunFilterPlugins(ctx, state, pod, ni); st.IsSuccess() {
				return []*framework.NodeInfo{ni}, diag, nil
			}
		}
	}
	feasible, err := s.findNodesThatPassFilters(ctx, fw, ps, state, pod, &diag, nodes)
	return feasible, diag, err
}

func (s *Scheduler) findNodesThatPassFilters(ctx context.Context, fw *framework.Framework, ps *framework.PluginSet, state *framework.CycleState,
	pod *v1.Pod, diag *framework.Diagnosis, nodes []*framework.NodeInfo) ([]*framework.NodeInfo, error) {
	num := len(nodes)
	if num == 0 {
		return nil, nil
	}
	pct := fw.PercentageOfNodesToScore()
	if pct == nil {
		pct = s.percentage
	}
	toFind := NumFeasibleNodesToFind(pct, num)
	feasible := make([]*framework.NodeInfo, toFind)
	start := s.nextStartNodeIndex % num
	if !ps.HasFilterPlugins() {
		for i := range feasible {
			feasible[i] = nodes[(start+i)%num]
		}
		s.nextStartNodeIndex = (start + toFind) % num
		return feasible, nil
	}
	feasible, statuses, err := ps.FindFeasible(ctx, state, pod, nodes, start, toFind)
	if err != nil {
		return nil, err
	}
	processed := len(feasible)
	for i, st := range statuses {
		if st == nil {
			continue
		}
		processed++
		diag.NodeToStatus[nodes[(start+i)%num].Node().Name] = st
		diag.UnschedulablePlugins.Insert(st.Plugin())
	}
	s.nextStartNodeIndex = (start + processed) % num
	return feasible, nil
}

// handleFailure records the attempt, puts the pod back in the queue, emits a
// FailedScheduling event and writes PodScheduled=False (reason Unschedulable or
// SchedulerError) through pods/status.
func (s *Scheduler) handleFailure(ctx context.Context, fw *framework.Framework, qp *framework.QueuedPodInfo, err error, cycle int64, start time.Time, nominated string) {
	var fitErr *framework.FitError
	var rej *rejectedError
	unschedulable := errors.As(err, &fitErr) || errors.As(err, &rej) || errors.Is(err, ErrNoNodesAvailable)
	reason, result := v1.PodReasonSchedulerError, metrics.SchedulingError
	if unschedulable {
		reason, result = v1.PodReasonUnschedulable, metrics.Unschedulable
	}
	s.metrics.ObserveAttempt(result, fw.Name(), time.Since(start))
	pod := qp.Pod
	if fitErr != nil {
		qp.UnschedulablePlugins = fitErr.Diagnosis.UnschedulablePlugins
	}
	latest, getErr := s.podLister.Pods(pod.Namespace).Get(pod.Name)
	if getErr != nil || latest.UID != pod.UID {
		s.queue.Done(pod.UID)
		return
	}
	if latest.Spec.NodeName != "" {
		// Bound meanwhile (e.g. by another scheduler): nothing to retry.
		s.queue.Done(pod.UID)
		return
	}
	qp.PodInfo = framework.NewPodInfo(latest)
	s.queue.AddUnschedulableIfNotPresent(qp, cycle, !unschedulable)
	msg := err.Error()
	s.log.Debug("unable to schedule pod", "pod", klogKey(pod), "reason", reason, "err", msg)
	fw.EventRecorder().Eventf(latest, nil, v1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", msg)
	cond := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: reason, Message: msg}
	traced := "error"
	if unschedulable {
		traced = "unschedulable"
	}
	s.bindings.Add(1)
	go func() {
		defer s.bindings.Done()
		s.reportAttempt(ctx, latest, fw.ProfileName(), traced, start, err)
		if err := s.updatePodStatus(ctx, latest, cond, nominated); err != nil && ctx.Err() == nil {
			s.log.Error("updating pod condition", "pod", klogKey(pod), "err", err)
		}
	}()
}

// updatePodStatus sets the PodScheduled condition (and nominatedNodeName) unless already so.
func (s *Scheduler) updatePodStatus(ctx context.Context, pod *v1.Pod, cond v1.PodCondition, nominated string) error {
	if same(pod, cond, nominated) {
		return nil
	}
	cur := pod.DeepCopy()
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, err := s.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.UID != pod.UID || fresh.Spec.NodeName != "" {
				return nil
			}
			cur = fresh
		}
		first = false
		if same(cur, cond, nominated) {
			return nil
		}
		setCondition(cur, cond)
		if nominated != "" {
			cur.Status.NominatedNodeName = nominated
		}
		_, err := s.client.CoreV1().Pods(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating status of pod %s: %w", klogKey(pod), err)
	}
	return nil
}

func same(pod *v1.Pod, cond v1.PodCondition, nominated string) bool {
	if nominated != "" && pod.Status.NominatedNodeName != nominated {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == cond.Type {
			return c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message
		}
	}
	return false
}

func setCondition(pod *v1.Pod, cond v1.PodCondition) {
	now := metav1.Now()
	cond.LastProbeTime = now
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != cond.Type {
			continue
		}
		if c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		} else {
			cond.LastTransitionTime = now
		}
		*c = cond
		return
	}
	cond.LastTransitionTime = now
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
}

func klogKey(p *v1.Pod) string { return p.Namespace + "/" + p.Name }
