// Package defaultpreemption is the DefaultPreemption PostFilter plugin: when a pod fits
// nowhere, find the node where evicting the fewest, least important lower-priority pods
// makes it fit, evict them and nominate the node.
package defaultpreemption

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/wasmplane/wasmplane/core/disruptiontarget"
	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons, as Kubernetes spells them.
const (
	notHelpful = "Preemption is not helpful for scheduling"
	noVictims  = "No preemption victims found for incoming pod"
)

// DefaultPreemption is the plugin.
type DefaultPreemption struct{ h framework.Handle }

// New is the plugin factory.
func New(_ context.Context, _ json.RawMessage, h framework.Handle) (framework.Plugin, error) {
	return &DefaultPreemption{h: h}, nil
}

// Name implements Plugin.
func (*DefaultPreemption) Name() string { return names.DefaultPreemption }

// Candidate is a node and the pods to evict there.
type Candidate struct {
	// Node is the node name.
	Node string
	// Victims are the pods to evict, most important first.
	Victims []*v1.Pod
}

// PostFilter implements PostFilterPlugin.
func (pl *DefaultPreemption) PostFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, filtered framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return nil, framework.NewStatus(framework.Unschedulable, "preemption: not eligible due to preemptionPolicy=Never.")
	}
	nodes := pl.h.SnapshotSharedLister().List()
	if nn := pod.Status.NominatedNodeName; nn != "" {
		// Victims evicted for this pod earlier are still terminating: wait for them.
		if ni, err := pl.h.SnapshotSharedLister().Get(nn); err == nil {
			for _, p := range ni.Pods {
				if p.Pod.DeletionTimestamp != nil && framework.PodPriority(p.Pod) < framework.PodPriority(pod) {
					return nil, framework.NewStatus(framework.Unschedulable, "preemption: not eligible due to a terminating pod on the nominated node.")
				}
			}
		}
	}
	candidates, reasons := pl.FindCandidates(ctx, state, pod, nodes, filtered)
	if len(candidates) == 0 {
		fe := &framework.FitError{NumAllNodes: len(nodes), Diagnosis: framework.Diagnosis{NodeToStatus: reasons}}
		return &framework.PostFilterResult{}, framework.NewStatus(framework.Unschedulable, "preemption: "+fe.Error())
	}
	best := SelectCandidate(candidates)
	for _, v := range best.Victims {
		msg := fmt.Sprintf("%s: preempting to accommodate a higher priority pod", pod.Spec.SchedulerName)
		if err := disruptiontarget.Mark(ctx, pl.h.ClientSet(), v, disruptiontarget.ReasonPreemption, msg, false); err != nil {
			return nil, framework.AsStatus(fmt.Errorf("preempting pod %s/%s: %w", v.Namespace, v.Name, err))
		}
		err := pl.h.ClientSet().CoreV1().Pods(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &v.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, framework.AsStatus(fmt.Errorf("preempting pod %s/%s: %w", v.Namespace, v.Name, err))
		}
		if r := pl.h.EventRecorder(); r != nil {
			r.Eventf(v, pod, v1.EventTypeNormal, "Preempted", "Preempting", "Preempted by pod %v on node %v", pod.UID, best.Node)
		}
	}
	return &framework.PostFilterResult{NominatedNodeName: best.Node}, nil
}

// FindCandidates dry-runs eviction on every node not rejected as unresolvable.
func (pl *DefaultPreemption) FindCandidates(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, filtered framework.NodeToStatus) ([]Candidate, framework.NodeToStatus) {
	reasons := framework.NodeToStatus{}
	var out []Candidate
	ps := state.Plugins()
	for _, ni := range nodes {
		name := ni.Node().Name
		if st, ok := filtered[name]; ok && st.Code() == framework.UnschedulableAndUnresolvable {
			reasons[name] = framework.NewStatus(framework.UnschedulableAndUnresolvable, notHelpful)
			continue
		}
		victims, ok := selectVictimsOnNode(ctx, ps, state, pod, ni)
		if !ok {
			reasons[name] = framework.NewStatus(framework.Unschedulable, noVictims)
			continue
		}
		out = append(out, Candidate{Node: name, Victims: victims})
	}
	return out, reasons
}

// selectVictimsOnNode removes every lower-priority pod, checks the pod then fits, and
// gives back (reprieves) as many of them as possible, most important first.
func selectVictimsOnNode(ctx context.Context, ps *framework.PluginSet, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) ([]*v1.Pod, bool) {
	if ps == nil {
		return nil, false
	}
	trial := ni.Clone()
	prio := framework.PodPriority(pod)
	var potential []*v1.Pod
	for _, p := range ni.Pods {
		if framework.PodPriority(p.Pod) < prio {
			potential = append(potential, p.Pod)
			if err := trial.RemovePod(p.Pod); err != nil {
				return nil, false
			}
		}
	}
	if len(potential) == 0 {
		return nil, false
	}
	fits := func() bool { return ps.RunFilterPlugins(ctx, state.Clone(), pod, trial).IsSuccess() }
	if !fits() {
		return nil, false
	}
	sort.SliceStable(potential, func(i, j int) bool { return moreImportant(potential[i], potential[j]) })
	var victims []*v1.Pod
	for _, p := range potential {
		trial.AddPod(p)
		if !fits() {
			if err := trial.RemovePod(p); err != nil {
				return nil, false
			}
			victims = append(victims, p)
		}
	}
	return victims, len(victims) > 0
}

// moreImportant: higher priority, then the one that started earlier.
func moreImportant(a, b *v1.Pod) bool {
	pa, pb := framework.PodPriority(a), framework.PodPriority(b)
	if pa != pb {
		return pa > pb
	}
	return startTime(a).Before(startTime(b))
}

func startTime(p *v1.Pod) *metav1.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime
	}
	return &p.CreationTimestamp
}

// SelectCandidate applies Kubernetes' criteria in order: lowest highest-victim priority,
// lowest sum of victim priorities, fewest victims, latest start of the highest-priority
// victims, then the first.
func SelectCandidate(cs []Candidate) Candidate {
	if len(cs) == 1 {
		return cs[0]
	}
	keep := cs
	filter := func(score func(Candidate) int64) {
		best := int64(math.MaxInt64)
		var next []Candidate
		for _, c := range keep {
			s := score(c)
			switch {
			case s < best:
				best, next = s, []Candidate{c}
			case s == best:
				next = append(next, c)
			}
		}
		keep = next
	}
	filter(func(c Candidate) int64 { return int64(framework.PodPriority(c.Victims[0])) })
	filter(func(c Candidate) int64 {
		var sum int64
		for _, v := range c.Victims {
			// Shifted so negative priorities still add up sensibly, as Kubernetes does.
			sum += int64(framework.PodPriority(v)) + int64(math.MaxInt32) + 1
		}
		return sum
	})
	filter(func(c Candidate) int64 { return int64(len(c.Victims)) })
	filter(func(c Candidate) int64 { return -startTime(c.Victims[0]).UnixNano() })
	sort.SliceStable(keep, func(i, j int) bool { return strings.Compare(keep[i].Node, keep[j].Node) < 0 })
	return keep[0]
}
