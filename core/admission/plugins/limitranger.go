package plugins

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/quota"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// LimitRangerAnnotation records which defaults LimitRanger applied to a pod.
const LimitRangerAnnotation = "kubernetes.io/limit-ranger"

// LimitRanger is Kubernetes' LimitRanger plugin for pods: containers get the
// LimitRange's default requests and limits, then every Container and Pod item's min, max
// and maxLimitRequestRatio are enforced. As in Kubernetes, pod updates are not checked
// (container resources are immutable through a plain update).
type LimitRanger struct {
	// Ranges lists a namespace's LimitRanges.
	Ranges LimitRangeLister
}

// Name implements admission.Mutator and admission.Validator.
func (*LimitRanger) Name() string { return "LimitRanger" }

func (l *LimitRanger) ranges(ctx context.Context, a *admission.Attributes) ([]corev1.LimitRange, error) {
	if !isPod(a) || a.Operation != admission.Create {
		return nil, nil
	}
	items, err := l.Ranges.ListLimitRanges(ctx, a.Namespace)
	if err != nil {
		return nil, forbidden(a, fmt.Errorf("unable to %s %v at this time because there was an error enforcing limit ranges", a.Operation, a.Resource))
	}
	return items, nil
}

// Admit applies the Container defaults of every LimitRange in the namespace.
func (l *LimitRanger) Admit(ctx context.Context, a *admission.Attributes) error {
	items, err := l.ranges(ctx, a)
	if err != nil || len(items) == 0 {
		return err
	}
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	for i := range items {
		applyLimitRangeDefaults(&items[i], pod)
	}
	return nil
}

// Validate enforces min, max and maxLimitRequestRatio.
func (l *LimitRanger) Validate(ctx context.Context, a *admission.Attributes) error {
	items, err := l.ranges(ctx, a)
	if err != nil || len(items) == 0 {
		return err
	}
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	for i := range items {
		if err := validatePodLimits(&items[i], pod); err != nil {
			return forbidden(a, err)
		}
	}
	return nil
}

// applyLimitRangeDefaults merges the Container item defaults into every container that
// does not set them, and records what it set in the limit-ranger annotation.
func applyLimitRangeDefaults(lr *corev1.LimitRange, pod *corev1.Pod) {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for k, v := range item.DefaultRequest {
			requests[k] = v.DeepCopy()
		}
		for k, v := range item.Default {
			limits[k] = v.DeepCopy()
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return
	}
	var notes []string
	merge := func(c *corev1.Container, kind string) {
		var setReq, setLim []string
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		for k, v := range limits {
			if _, ok := c.Resources.Limits[k]; !ok {
				c.Resources.Limits[k] = v.DeepCopy()
				setLim = append(setLim, string(k))
			}
		}
		for k, v := range requests {
			if _, ok := c.Resources.Requests[k]; !ok {
				c.Resources.Requests[k] = v.DeepCopy()
				setReq = append(setReq, string(k))
			}
		}
		if len(setReq) > 0 {
			sort.Strings(setReq)
			notes = append(notes, strings.Join(setReq, ", ")+fmt.Sprintf(" request for %s %s", kind, c.Name))
		}
		if len(setLim) > 0 {
			sort.Strings(setLim)
			notes = append(notes, strings.Join(setLim, ", ")+fmt.Sprintf(" limit for %s %s", kind, c.Name))
		}
	}
	for i := range pod.Spec.Containers {
		merge(&pod.Spec.Containers[i], "container")
	}
	for i := range pod.Spec.InitContainers {
		merge(&pod.Spec.InitContainers[i], "init container")
	}
	if len(notes) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[LimitRangerAnnotation] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
	}
}

// validatePodLimits is Kubernetes' PodValidateLimitFunc.
func validatePodLimits(lr *corev1.LimitRange, pod *corev1.Pod) error {
	var errs []error
	check := func(item corev1.LimitRangeItem, requests, limits corev1.ResourceList) {
		t := string(item.Type)
		for _, k := range sortedNames(item.Min) {
			if err := minConstraint(t, k, item.Min[corev1.ResourceName(k)], requests, limits); err != nil {
				errs = append(errs, err)
			}
		}
		for _, k := range sortedNames(item.Max) {
			if err := maxConstraint(t, k, item.Max[corev1.ResourceName(k)], requests, limits); err != nil {
				errs = append(errs, err)
			}
		}
		for _, k := range sortedNames(item.MaxLimitRequestRatio) {
			if err := ratioConstraint(t, k, item.MaxLimitRequestRatio[corev1.ResourceName(k)], requests, limits); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, item := range lr.Spec.Limits {
		switch item.Type {
		case corev1.LimitTypeContainer:
			for _, c := range pod.Spec.Containers {
				check(item, c.Resources.Requests, c.Resources.Limits)
			}
			for _, c := range pod.Spec.InitContainers {
				check(item, c.Resources.Requests, c.Resources.Limits)
			}
		case corev1.LimitTypePod:
			check(item, quota.PodRequests(pod), quota.PodLimits(pod))
		}
	}
	return utilerrors.NewAggregate(errs)
}

func sortedNames(l corev1.ResourceList) []string {
	out := make([]string, 0, len(l))
	for k := range l {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// comparable returns request, limit and enforced at milli precision when that cannot
// overflow, else at unit precision.
func comparable(req, lim, enforced resource.Quantity) (int64, int64, int64) {
	r, l, e := req.Value(), lim.Value(), enforced.Value()
	if r <= resource.MaxMilliValue && l <= resource.MaxMilliValue && e <= resource.MaxMilliValue {
		return req.MilliValue(), lim.MilliValue(), enforced.MilliValue()
	}
	return r, l, e
}

func minConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[corev1.ResourceName(name)]
	lim, hasLim := limits[corev1.ResourceName(name)]
	r, l, e := comparable(req, lim, enforced)
	switch {
	case !hasReq:
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", name, limitType, enforced.String())
	case r < e:
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", name, limitType, enforced.String(), req.String())
	case hasLim && l < e:
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", name, limitType, enforced.String(), lim.String())
	}
	return nil
}

func maxConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[corev1.ResourceName(name)]
	lim, hasLim := limits[corev1.ResourceName(name)]
	r, l, e := comparable(req, lim, enforced)
	switch {
	case !hasLim:
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", name, limitType, enforced.String())
	case l > e:
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", name, limitType, enforced.String(), lim.String())
	case hasReq && r > e:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, limitType, enforced.String(), req.String())
	}
	return nil
}

func ratioConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[corev1.ResourceName(name)]
	lim, hasLim := limits[corev1.ResourceName(name)]
	r, l, _ := comparable(req, lim, enforced)
	if !hasReq || r == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, limitType, enforced.String())
	}
	if !hasLim || l == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, limitType, enforced.String())
	}
	observed := float64(l) / float64(r)
	display := observed
	bound := float64(enforced.Value())
	if enforced.Value() <= resource.MaxMilliValue {
		observed *= 1000
		bound = float64(enforced.MilliValue())
	}
	if observed > bound {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, limitType, enforced.String(), display)
	}
	return nil
}
