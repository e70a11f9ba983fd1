package job

import (
	"fmt"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// failureVerdict is what a Job's podFailurePolicy says about one failed pod.
type failureVerdict struct {
	// count is false when an Ignore rule matched: the failure counts toward no limit.
	count bool
	// action is the matched rule's action, "" when no rule matched.
	action batchv1.PodFailurePolicyAction
	// failJobMsg is the Job's failure message when a FailJob rule matched.
	failJobMsg string
}

// judgeFailure applies policy's rules, in order, to a failed pod; the first rule that
// matches decides. Without a policy or a match the failure simply counts.
func judgeFailure(policy *batchv1.PodFailurePolicy, p *corev1.Pod) failureVerdict {
	if policy == nil {
		return failureVerdict{count: true}
	}
	for i, rule := range policy.Rules {
		var failJobMsg string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchExitCodes(p, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			failJobMsg = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, p.Namespace, p.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			cond := matchPodConditions(p, rule.OnPodConditions)
			if cond == nil {
				continue
			}
			failJobMsg = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d", p.Namespace, p.Name, cond.Type, rule.Action, i)
		default:
			continue
		}
		switch rule.Action {
		case batchv1.PodFailurePolicyActionIgnore:
			return failureVerdict{action: rule.Action}
		case batchv1.PodFailurePolicyActionFailJob:
			return failureVerdict{count: true, action: rule.Action, failJobMsg: failJobMsg}
		case batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyActionFailIndex:
			return failureVerdict{count: true, action: rule.Action}
		}
		// An action this version does not know matches nothing, as in Kubernetes.
	}
	return failureVerdict{count: true}
}

// matchExitCodes returns the first terminated container (app containers before init
// containers) whose non-zero exit code satisfies req. Exit code 0 never matches: a
// container that succeeded did not cause the failure.
func matchExitCodes(p *corev1.Pod, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range list {
			cs := &list[i]
			term := cs.State.Terminated
			if term == nil || term.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			in := slices.Contains(req.Values, term.ExitCode)
			if (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && in) || (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn && !in) {
				return cs
			}
		}
	}
	return nil
}

// matchPodConditions returns the pod's first condition that one of patterns matches.
func matchPodConditions(p *corev1.Pod, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		for _, pat := range patterns {
			if c.Type == pat.Type && c.Status == pat.Status {
				return c
			}
		}
	}
	return nil
}

// matchSuccessPolicy reports the message of the first successPolicy rule the completed
// indexes satisfy: all of its succeededIndexes, or succeededCount of them (of any
// index when the rule names none).
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completed map[int]bool, completions int) (string, bool) {
	if policy == nil || len(completed) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		met := false
		switch {
		case rule.SucceededIndexes != nil:
			want := parseIndexes(*rule.SucceededIndexes, completions)
			if len(want) == 0 {
				continue // unparsable: validation keeps such rules out
			}
			have := 0
			for ix := range want {
				if completed[ix] {
					have++
				}
			}
			met = have == len(want) || (rule.SucceededCount != nil && have >= int(*rule.SucceededCount))
		case rule.SucceededCount != nil:
			met = len(completed) >= int(*rule.SucceededCount)
		}
		if met {
			return "Matched rules at index " + strconv.Itoa(i), true
		}
	}
	return "", false
}

// indexFailures reads the per-index failure counters Kubernetes writes on the pods of a
// Job with backoffLimitPerIndex: failures that counted and failures an Ignore rule let
// pass.
func indexFailures(p *corev1.Pod) (counted, ignored int32) {
	read := func(key string) int32 {
		n, err := strconv.ParseInt(p.Annotations[key], 10, 32)
		if err != nil || n < 0 {
			return 0
		}
		return int32(n)
	}
	return read(batchv1.JobIndexFailureCountAnnotation), read(batchv1.JobIndexIgnoredFailureCountAnnotation)
}
