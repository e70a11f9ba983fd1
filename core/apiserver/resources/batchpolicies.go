package resources

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Kubernetes' bounds on a Job's failure and success policies.
const (
	maxPodFailurePolicyRules          = 20
	maxPodFailurePolicyExitCodeValues = 255
	maxPodFailurePolicyConditions     = 20
	maxSuccessPolicyRules             = 20
	maxSucceededIndexesLength         = 64 * 1024
	maxFailedIndexesForIndexedJob     = 100_000
	completionsSoftLimit              = 100_000
	parallelismForHighCompletions     = 10_000
	maxFailedIndexesHighCompletions   = 10_000
)

// defaultJobPolicies applies the defaults of the policy parts of a Job's spec: a pod
// condition pattern without a status means True.
func defaultJobPolicies(spec *batchv1.JobSpec) {
	if spec.PodFailurePolicy == nil {
		return
	}
	for i := range spec.PodFailurePolicy.Rules {
		for j := range spec.PodFailurePolicy.Rules[i].OnPodConditions {
			if p := &spec.PodFailurePolicy.Rules[i].OnPodConditions[j]; p.Status == "" {
				p.Status = corev1.ConditionTrue
			}
		}
	}
}

// validateJobPolicies checks backoffLimitPerIndex, maxFailedIndexes, podFailurePolicy
// and successPolicy as Kubernetes' Job validation does.
func validateJobPolicies(spec *batchv1.JobSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	indexed := ptr.Deref(spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion
	if v := spec.BackoffLimitPerIndex; v != nil {
		if *v < 0 {
			errs = append(errs, field.Invalid(path.Child("backoffLimitPerIndex"), *v, "must be greater than or equal to 0"))
		}
		if !indexed {
			errs = append(errs, field.Invalid(path.Child("backoffLimitPerIndex"), *v, "requires indexed completion mode"))
		}
	}
	if v := spec.MaxFailedIndexes; v != nil {
		p := path.Child("maxFailedIndexes")
		if *v < 0 {
			errs = append(errs, field.Invalid(p, *v, "must be greater than or equal to 0"))
		}
		if spec.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Required(path.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
		}
		switch {
		case !indexed:
			errs = append(errs, field.Invalid(p, *v, "requires indexed completion mode"))
		case spec.Completions != nil && *v > *spec.Completions:
			errs = append(errs, field.Invalid(p, *v, "must be less than or equal to completions"))
		case *v > maxFailedIndexesForIndexedJob:
			errs = append(errs, field.Invalid(p, *v, fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesForIndexedJob)))
		}
	}
	if indexed && spec.BackoffLimitPerIndex != nil && ptr.Deref(spec.Completions, 0) > completionsSoftLimit {
		const why = "when completions are above %d and used with backoff limit per index"
		if spec.MaxFailedIndexes == nil {
			errs = append(errs, field.Required(path.Child("maxFailedIndexes"), fmt.Sprintf("must be specified when completions is above %d", completionsSoftLimit)))
		} else if *spec.MaxFailedIndexes > maxFailedIndexesHighCompletions {
			errs = append(errs, field.Invalid(path.Child("maxFailedIndexes"), *spec.MaxFailedIndexes,
				fmt.Sprintf("must be less than or equal to %d "+why, maxFailedIndexesHighCompletions, completionsSoftLimit)))
		}
		if p := ptr.Deref(spec.Parallelism, 0); p > parallelismForHighCompletions {
			errs = append(errs, field.Invalid(path.Child("parallelism"), p,
				fmt.Sprintf("must be less than or equal to %d "+why, parallelismForHighCompletions, completionsSoftLimit)))
		}
	}
	if spec.PodFailurePolicy != nil {
		errs = append(errs, validatePodFailurePolicy(spec, path.Child("podFailurePolicy"))...)
		if rp := spec.Template.Spec.RestartPolicy; rp == corev1.RestartPolicyOnFailure {
			errs = append(errs, field.Invalid(path.Child("template", "spec", "restartPolicy"), rp,
				fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever)))
		}
		if p := spec.PodReplacementPolicy; p != nil && *p != batchv1.Failed {
			errs = append(errs, field.NotSupported(path.Child("podReplacementPolicy"), *p, []string{string(batchv1.Failed)}))
		}
	}
	if spec.SuccessPolicy != nil {
		if !indexed {
			errs = append(errs, field.Invalid(path.Child("successPolicy"), *spec.SuccessPolicy, "requires indexed completion mode"))
		} else {
			errs = append(errs, validateSuccessPolicy(spec, path.Child("successPolicy"))...)
		}
	}
	return errs
}

func validatePodFailurePolicy(spec *batchv1.JobSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := path.Child("rules")
	if n := len(spec.PodFailurePolicy.Rules); n > maxPodFailurePolicyRules {
		errs = append(errs, field.TooMany(rulesPath, n, maxPodFailurePolicyRules))
	}
	containers := map[string]bool{}
	for _, cs := range [][]corev1.Container{spec.Template.Spec.Containers, spec.Template.Spec.InitContainers} {
		for _, c := range cs {
			containers[c.Name] = true
		}
	}
	actions := []string{string(batchv1.PodFailurePolicyActionCount), string(batchv1.PodFailurePolicyActionFailIndex),
		string(batchv1.PodFailurePolicyActionFailJob), string(batchv1.PodFailurePolicyActionIgnore)}
	for i, rule := range spec.PodFailurePolicy.Rules {
		rp := rulesPath.Index(i)
		ap := rp.Child("action")
		switch {
		case rule.Action == "":
			errs = append(errs, field.Required(ap, fmt.Sprintf("valid values: %q", actions)))
		case rule.Action == batchv1.PodFailurePolicyActionFailIndex:
			if spec.BackoffLimitPerIndex == nil {
				errs = append(errs, field.Invalid(ap, rule.Action, "requires the backoffLimitPerIndex to be set"))
			}
		case !slices.Contains(actions, string(rule.Action)):
			errs = append(errs, field.NotSupported(ap, rule.Action, actions))
		}
		if rule.OnExitCodes != nil {
			errs = append(errs, validateOnExitCodes(rule.OnExitCodes, rp.Child("onExitCodes"), containers)...)
		}
		if len(rule.OnPodConditions) > 0 {
			errs = append(errs, validateOnPodConditions(rule.OnPodConditions, rp.Child("onPodConditions"))...)
		}
		switch {
		case rule.OnExitCodes != nil && len(rule.OnPodConditions) > 0:
			errs = append(errs, field.Invalid(rp, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
		case rule.OnExitCodes == nil && len(rule.OnPodConditions) == 0:
			errs = append(errs, field.Invalid(rp, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
		}
	}
	return errs
}

func validateOnExitCodes(req *batchv1.PodFailurePolicyOnExitCodesRequirement, path *field.Path, containers map[string]bool) field.ErrorList {
	var errs field.ErrorList
	ops := []string{string(batchv1.PodFailurePolicyOnExitCodesOpIn), string(batchv1.PodFailurePolicyOnExitCodesOpNotIn)}
	if req.Operator == "" {
		errs = append(errs, field.Required(path.Child("operator"), fmt.Sprintf("valid values: %q", ops)))
	} else if !slices.Contains(ops, string(req.Operator)) {
		errs = append(errs, field.NotSupported(path.Child("operator"), req.Operator, ops))
	}
	if req.ContainerName != nil && !containers[*req.ContainerName] {
		errs = append(errs, field.Invalid(path.Child("containerName"), *req.ContainerName, "must be one of the container or initContainer names in the pod template"))
	}
	vp := path.Child("values")
	if len(req.Values) == 0 {
		errs = append(errs, field.Invalid(vp, req.Values, "at least one value is required"))
	} else if len(req.Values) > maxPodFailurePolicyExitCodeValues {
		errs = append(errs, field.TooMany(vp, len(req.Values), maxPodFailurePolicyExitCodeValues))
	}
	seen := map[int32]bool{}
	for j, v := range req.Values {
		if req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0 {
			errs = append(errs, field.Invalid(vp.Index(j), v, "must not be 0 for the In operator"))
		}
		if seen[v] {
			errs = append(errs, field.Duplicate(vp.Index(j), v))
		}
		seen[v] = true
	}
	if !slices.IsSorted(req.Values) {
		errs = append(errs, field.Invalid(vp, req.Values, "must be ordered"))
	}
	return errs
}

func validateOnPodConditions(patterns []batchv1.PodFailurePolicyOnPodConditionsPattern, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(patterns) > maxPodFailurePolicyConditions {
		errs = append(errs, field.TooMany(path, len(patterns), maxPodFailurePolicyConditions))
	}
	statuses := []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
	for j, p := range patterns {
		pp := path.Index(j)
		errs = append(errs, metav1validation.ValidateLabelName(string(p.Type), pp.Child("type"))...)
		if p.Status == "" {
			errs = append(errs, field.Required(pp.Child("status"), fmt.Sprintf("valid values: %q", statuses)))
		} else if !slices.Contains(statuses, string(p.Status)) {
			errs = append(errs, field.NotSupported(pp.Child("status"), p.Status, statuses))
		}
	}
	return errs
}

func validateSuccessPolicy(spec *batchv1.JobSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := path.Child("rules")
	rules := spec.SuccessPolicy.Rules
	if len(rules) == 0 {
		errs = append(errs, field.Required(rulesPath, "at least one rules must be specified when the successPolicy is specified"))
	} else if len(rules) > maxSuccessPolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxSuccessPolicyRules))
	}
	completions := ptr.Deref(spec.Completions, 0)
	for i, rule := range rules {
		rp := rulesPath.Index(i)
		if rule.SucceededCount == nil && rule.SucceededIndexes == nil {
			errs = append(errs, field.Required(rp, "at least one of succeededCount or succeededIndexes must be specified"))
		}
		var total int32
		if s := rule.SucceededIndexes; s != nil {
			ip := rp.Child("succeededIndexes")
			if len(*s) > maxSucceededIndexesLength {
				errs = append(errs, field.TooLong(ip, *s, maxSucceededIndexesLength))
			}
			var err error
			if total, err = countIndexes(*s, completions); err != nil {
				errs = append(errs, field.Invalid(ip, *s, "error parsing succeededIndexes: "+err.Error()))
			}
		}
		if c := rule.SucceededCount; c != nil {
			cp := rp.Child("succeededCount")
			if *c < 0 {
				errs = append(errs, field.Invalid(cp, *c, "must be greater than or equal to 0"))
			}
			if *c > completions {
				errs = append(errs, field.Invalid(cp, *c, fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
			}
			if rule.SucceededIndexes != nil && *c > total {
				errs = append(errs, field.Invalid(cp, *c, fmt.Sprintf("must be less than or equal to %d (the number of indexes in the specified succeededIndexes field)", total)))
			}
		}
	}
	return errs
}

// countIndexes checks an index interval list ("1,3-5") is well formed, ascending,
// without overlaps and below completions, and returns how many indexes it names.
func countIndexes(s string, completions int32) (int32, error) {
	if s == "" {
		return 0, nil
	}
	var total int32
	prev := int64(-1)
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.ParseInt(lo, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("cannot convert string to integer for index: %q", lo)
		}
		last := first
		if isRange {
			if last, err = strconv.ParseInt(hi, 10, 32); err != nil {
				return 0, fmt.Errorf("cannot convert string to integer for index: %q", hi)
			}
		}
		switch {
		case last < first:
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", first, last)
		case first <= prev:
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", prev, first)
		case last >= int64(completions):
			return 0, fmt.Errorf("too large: %d", last)
		}
		prev = last
		total += int32(last - first + 1)
	}
	return total, nil
}
