package podautoscaler

import (
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// tolerances bound the usage ratios, around 1, that do not change the replica count.
type tolerances struct{ down, up float64 }

func (t tolerances) within(ratio float64) bool {
	return 1-t.down <= ratio && ratio <= 1+t.up
}

// calculator computes replica proposals from pods and their metrics as Kubernetes'
// ReplicaCalculator does.
type calculator struct {
	now time.Time
	// cpuInitialization is how long after a pod's start its CPU samples may still be
	// those of its start-up (Kubernetes' 5 min).
	cpuInitialization time.Duration
	// initialReadiness is how long after a pod's start a not-ready pod is taken as still
	// starting rather than failing (Kubernetes' 30 s).
	initialReadiness time.Duration
	tol              tolerances
}

// usageTarget is one of the two ways a resource target is expressed.
type usageTarget struct {
	// utilization, when positive, is a percentage of the pods' requests; otherwise
	// averageValue (in thousandths) is the target per pod.
	utilization  int32
	averageValue int64
}

// proposal is what one metric proposes.
type proposal struct {
	replicas int32
	// utilization is the pods' current usage as a percentage of their requests (only for
	// a utilization target).
	utilization int32
	// average is the pods' mean usage, in thousandths.
	average int64
}

// resourceReplicas proposes a replica count for a resource target: pods being deleted or
// failed are ignored; pending pods, and for CPU pods not yet ready or still starting, are
// unready; pods without a sample are missing. The ratio of usage to target over the
// ready pods decides, unless within the tolerance; unready pods then count as using
// nothing when scaling up, missing pods as using nothing when scaling up and their whole
// request (or the target, if higher) when scaling down, and a change of direction that
// this causes cancels the scaling.
func (c calculator) resourceReplicas(current int32, target usageTarget, resource corev1.ResourceName, container string,
	pods []*corev1.Pod, metrics map[string]podMetric) (proposal, error) {
	if len(pods) == 0 {
		return proposal{}, errors.New("no pods returned by selector while calculating replica count")
	}
	ready, unready, missing, ignored := c.groupPods(pods, metrics, resource)
	for name := range ignored.Union(unready) {
		delete(metrics, name)
	}
	if len(metrics) == 0 {
		return proposal{}, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	var requests map[string]int64
	if target.utilization > 0 {
		var err error
		if requests, err = podRequests(pods, container, resource); err != nil {
			return proposal{}, err
		}
	}
	ratioOf := func(m map[string]podMetric) (float64, proposal, error) {
		if target.utilization > 0 {
			return utilizationRatio(m, requests, target.utilization)
		}
		var sum int64
		for _, pm := range m {
			sum += pm.value
		}
		avg := sum / int64(len(m))
		return float64(avg) / float64(target.averageValue), proposal{average: avg}, nil
	}
	ratio, p, err := ratioOf(metrics)
	if err != nil {
		return proposal{}, err
	}
	scaleUpWithUnready := len(unready) > 0 && ratio > 1
	if !scaleUpWithUnready && len(missing) == 0 {
		if c.tol.within(ratio) {
			p.replicas = current
		} else {
			p.replicas = int32(math.Ceil(ratio * float64(ready)))
		}
		return p, nil
	}
	for name := range missing {
		var v int64
		if ratio < 1 {
			if target.utilization > 0 {
				v = requests[name] * int64(max(100, target.utilization)) / 100
			} else {
				v = target.averageValue
			}
		}
		metrics[name] = podMetric{value: v}
	}
	if scaleUpWithUnready {
		for name := range unready {
			metrics[name] = podMetric{}
		}
	}
	newRatio, _, err := ratioOf(metrics)
	if err != nil {
		return proposal{}, err
	}
	p.replicas = current
	if c.tol.within(newRatio) || (ratio < 1 && newRatio > 1) || (ratio > 1 && newRatio < 1) {
		return p, nil
	}
	n := int32(math.Ceil(newRatio * float64(len(metrics))))
	if (newRatio < 1 && n > current) || (newRatio > 1 && n < current) {
		return p, nil
	}
	p.replicas = n
	return p, nil
}

// utilizationRatio is the pods' usage over their requests, against target percent.
func utilizationRatio(metrics map[string]podMetric, requests map[string]int64, target int32) (float64, proposal, error) {
	var usage, requested, n int64
	for name, m := range metrics {
		r, ok := requests[name]
		if !ok {
			continue
		}
		usage += m.value
		requested += r
		n++
	}
	if requested == 0 {
		return 0, proposal{}, errors.New("no metrics returned matched known pods")
	}
	util := int32(usage * 100 / requested)
	return float64(util) / float64(target), proposal{utilization: util, average: usage / n}, nil
}

// groupPods sorts pods as Kubernetes' groupPods does; ready is a count, the rest are
// names.
func (c calculator) groupPods(pods []*corev1.Pod, metrics map[string]podMetric, resource corev1.ResourceName) (ready int, unready, missing, ignored sets.Set[string]) {
	unready, missing, ignored = sets.New[string](), sets.New[string](), sets.New[string]()
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
			ignored.Insert(pod.Name)
			continue
		}
		if pod.Status.Phase == corev1.PodPending {
			unready.Insert(pod.Name)
			continue
		}
		m, ok := metrics[pod.Name]
		if !ok {
			missing.Insert(pod.Name)
			continue
		}
		if resource == corev1.ResourceCPU && c.cpuUnready(pod, m) {
			unready.Insert(pod.Name)
			continue
		}
		ready++
	}
	return ready, unready, missing, ignored
}

// cpuUnready tells whether a pod's CPU sample is not to be trusted: the pod is not
// ready, or, early in its life, the sample may predate its readiness; later, only a pod
// that never became ready is.
func (c calculator) cpuUnready(pod *corev1.Pod, m podMetric) bool {
	var cond *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			cond = &pod.Status.Conditions[i]
			break
		}
	}
	if cond == nil || pod.Status.StartTime == nil {
		return true
	}
	start := pod.Status.StartTime.Time
	if start.Add(c.cpuInitialization).After(c.now) {
		return cond.Status == corev1.ConditionFalse || m.timestamp.Before(cond.LastTransitionTime.Add(m.window))
	}
	return cond.Status == corev1.ConditionFalse && start.Add(c.initialReadiness).After(cond.LastTransitionTime.Time)
}

// podRequests sums each pod's requests of resource over its containers (and sidecars),
// or the one named container's; a container without the request is an error.
func podRequests(pods []*corev1.Pod, container string, resource corev1.ResourceName) (map[string]int64, error) {
	out := make(map[string]int64, len(pods))
	for _, pod := range pods {
		var sum int64
		add := func(c *corev1.Container) error {
			if container != "" && c.Name != container {
				return nil
			}
			q, ok := c.Resources.Requests[resource]
			if !ok {
				return fmt.Errorf("missing request for %s in container %s of Pod %s", resource, c.Name, pod.Name)
			}
			sum += q.MilliValue()
			return nil
		}
		for i := range pod.Spec.Containers {
			if err := add(&pod.Spec.Containers[i]); err != nil {
				return nil, err
			}
		}
		for i := range pod.Spec.InitContainers {
			ic := &pod.Spec.InitContainers[i]
			if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				if err := add(ic); err != nil {
					return nil, err
				}
			}
		}
		out[pod.Name] = sum
	}
	return out, nil
}
