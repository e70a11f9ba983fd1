package resources

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/filters"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// maxDisruptedPods bounds a budget's record of evictions the disruption controller has
// not yet seen (Kubernetes' MaxDisruptedPodSize).
const maxDisruptedPods = 2000

// evictionViolation is Kubernetes' message for an eviction a budget refuses.
const evictionViolation = "Cannot evict pod as it would violate the pod's disruption budget."

// AddEviction gives the pods resource in defs its eviction subresource: a delete that
// honours the PodDisruptionBudget covering the pod. stores reaches the budgets' storage.
func AddEviction(defs []Definition, stores func(schema.GroupResource) *registry.Store) {
	appendSubresource(defs, corev1.Resource("pods"), func(s *endpoints.Scope) endpoints.Subresource {
		return endpoints.Subresource{Name: "eviction", Kind: policyv1.SchemeGroupVersion.WithKind("Eviction"),
			Handlers: map[string]endpoints.HandlerFunc{http.MethodPost: evictionHandler(s, stores)}}
	})
}

func evictionHandler(s *endpoints.Scope, stores func(schema.GroupResource) *registry.Store) endpoints.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		s.Custom(w, req, http.StatusCreated, func(ctx context.Context, body func(into runtime.Object) error) (runtime.Object, error) {
			ev := &policyv1.Eviction{}
			if err := body(ev); err != nil {
				return nil, err
			}
			if ev.Name != "" && ev.Name != r.Name {
				return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
			}
			if ev.Namespace != "" && ev.Namespace != r.Namespace {
				return nil, apierrors.NewBadRequest("namespace in URL does not match namespace in Eviction object")
			}
			wopts := s.WriteOptionsFor(req, r)
			e := &evictor{pods: s.Store, pdbs: stores(policyv1.Resource("poddisruptionbudgets")), dryRun: wopts.DryRun}
			if e.pdbs == nil {
				return nil, apierrors.NewInternalError(fmt.Errorf("poddisruptionbudgets are not served"))
			}
			if err := admitEviction(ctx, wopts, r, ev); err != nil {
				return nil, err
			}
			if err := e.evict(ctx, r.Namespace, r.Name, ev.DeleteOptions); err != nil {
				return nil, err
			}
			return &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}, nil
		})
	}
}

// admitEviction runs the admission chain on the eviction as Kubernetes does: a create of
// pods/eviction whose object is the Eviction.
func admitEviction(ctx context.Context, o registry.WriteOptions, r endpoints.Request, ev *policyv1.Eviction) error {
	if o.Admission == nil {
		return nil
	}
	a := &admission.Attributes{Kind: policyv1.SchemeGroupVersion.WithKind("Eviction"), Resource: corev1.SchemeGroupVersion.WithResource("pods"),
		Subresource: "eviction", Namespace: r.Namespace, Name: r.Name, Operation: admission.Create, Object: ev, DryRun: o.DryRun}
	if u, ok := filters.UserFrom(ctx); ok {
		a.User = admission.UserInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	}
	if err := o.Admission.Admit(ctx, a); err != nil {
		return err
	}
	return o.Admission.Validate(ctx, a)
}

// evictor carries one eviction.
type evictor struct {
	pods, pdbs *registry.Store
	dryRun     bool
}

func (e *evictor) evict(ctx context.Context, ns, name string, opts *metav1.DeleteOptions) error {
	obj, err := e.pods.Get(ctx, ns, name, nil)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	} else {
		opts = opts.DeepCopy()
	}
	// A pod that is not running, or already going, costs no budget.
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodPending {
		return e.delete(ctx, pod, opts, false)
	}
	pdb, err := e.budgetOf(ctx, pod)
	if err != nil {
		return err
	}
	if pdb == nil {
		return e.delete(ctx, pod, opts, false)
	}
	// An unready pod adds nothing to the budget's healthy count; the budget's policy says
	// whether it may go without spending a disruption.
	if !podIsReady(pod) {
		policy := policyv1.IfHealthyBudget
		if pdb.Spec.UnhealthyPodEvictionPolicy != nil {
			policy = *pdb.Spec.UnhealthyPodEvictionPolicy
		}
		if policy == policyv1.AlwaysAllow || (pdb.Status.DesiredHealthy > 0 && pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy) {
			return e.delete(ctx, pod, opts, true)
		}
	}
	if err := e.spend(ctx, pdb, pod.Name); err != nil {
		return err
	}
	return e.delete(ctx, pod, opts, false)
}

// budgetOf is the one budget whose selector matches pod; several are an error, as in
// Kubernetes.
func (e *evictor) budgetOf(ctx context.Context, pod *corev1.Pod) (*policyv1.PodDisruptionBudget, error) {
	obj, err := e.pdbs.List(ctx, pod.Namespace, &metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var match []policyv1.PodDisruptionBudget
	for _, b := range obj.(*policyv1.PodDisruptionBudgetList).Items {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil {
			continue
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			match = append(match, b)
		}
	}
	switch len(match) {
	case 0:
		return nil, nil
	case 1:
		return &match[0], nil
	default:
		return nil, apierrors.NewInternalError(fmt.Errorf("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))
	}
}

// spend takes one disruption from the budget and records the pod as disrupted, so that
// the controller does not count it healthy before it is gone.
func (e *evictor) spend(ctx context.Context, pdb *policyv1.PodDisruptionBudget, podName string) error {
	check := func(b *policyv1.PodDisruptionBudget) error {
		if b.Status.ObservedGeneration < b.Generation {
			return tooManyEvictions(fmt.Sprintf("The disruption budget %s is still being processed by the server.", b.Name))
		}
		if b.Status.DisruptionsAllowed < 0 {
			return apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), b.Name, fmt.Errorf("pdb disruptions allowed is negative"))
		}
		if len(b.Status.DisruptedPods) > maxDisruptedPods {
			return apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), b.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
		}
		if b.Status.DisruptionsAllowed == 0 {
			return tooManyEvictions(fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", b.Name, b.Status.DesiredHealthy, b.Status.CurrentHealthy))
		}
		return nil
	}
	if e.dryRun {
		return check(pdb)
	}
	_, _, err := e.pdbs.Update(ctx, pdb.Namespace, pdb.Name, func(_ context.Context, existing runtime.Object) (runtime.Object, error) {
		if existing == nil {
			return nil, apierrors.NewNotFound(policyv1.Resource("poddisruptionbudgets"), pdb.Name)
		}
		b := existing.DeepCopyObject().(*policyv1.PodDisruptionBudget)
		if err := check(b); err != nil {
			return nil, err
		}
		b.Status.DisruptionsAllowed--
		if b.Status.DisruptionsAllowed == 0 {
			meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: policyv1.DisruptionAllowedCondition,
				Status: metav1.ConditionFalse, Reason: policyv1.InsufficientPodsReason, ObservedGeneration: b.Status.ObservedGeneration})
		}
		if b.Status.DisruptedPods == nil {
			b.Status.DisruptedPods = map[string]metav1.Time{}
		}
		b.Status.DisruptedPods[podName] = metav1.NewTime(time.Now())
		return b, nil
	}, registry.UpdateOptions{WriteOptions: registry.WriteOptions{Subresource: "status"}, Strategy: e.pdbs.Resource.StatusStrategy, AllowUnconditional: true})
	return err
}

func (e *evictor) delete(ctx context.Context, pod *corev1.Pod, opts *metav1.DeleteOptions, onlyThisVersion bool) error {
	if onlyThisVersion {
		// The pod was judged on this version: if it changed (became ready), judge again.
		rv := pod.ResourceVersion
		if opts.Preconditions == nil {
			opts.Preconditions = &metav1.Preconditions{}
		}
		opts.Preconditions.ResourceVersion = &rv
	}
	if e.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	} else if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		rv, err := e.markDisrupted(ctx, pod, opts.Preconditions)
		if err != nil {
			return err
		}
		if opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil {
			// The condition is our own write: the pod was judged on the version before it.
			opts.Preconditions.ResourceVersion = &rv
		}
	}
	_, _, err := e.pods.Delete(ctx, pod.Namespace, pod.Name, opts, registry.WriteOptions{DryRun: e.dryRun})
	return err
}

// markDisrupted adds the DisruptionTarget condition Kubernetes writes on a pod it is
// about to evict (a Job's podFailurePolicy may match it), on the stored version the
// preconditions allow; it returns the new resourceVersion.
func (e *evictor) markDisrupted(ctx context.Context, pod *corev1.Pod, pre *metav1.Preconditions) (string, error) {
	status := e.pods.Resource.StatusStrategy
	if status == nil {
		return pod.ResourceVersion, nil
	}
	obj, _, err := e.pods.Update(ctx, pod.Namespace, pod.Name, func(_ context.Context, existing runtime.Object) (runtime.Object, error) {
		cur, ok := existing.(*corev1.Pod)
		if !ok {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
		}
		if pre != nil && ((pre.UID != nil && *pre.UID != cur.UID) || (pre.ResourceVersion != nil && *pre.ResourceVersion != cur.ResourceVersion)) {
			return nil, apierrors.NewConflict(corev1.Resource("pods"), pod.Name, fmt.Errorf("the pod changed since it was judged for eviction"))
		}
		cur = cur.DeepCopy()
		cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.Now()}
		replaced := false
		for i := range cur.Status.Conditions {
			if c := &cur.Status.Conditions[i]; c.Type == corev1.DisruptionTarget {
				if c.Status == cond.Status {
					cond.LastTransitionTime = c.LastTransitionTime
				}
				*c, replaced = cond, true
			}
		}
		if !replaced {
			cur.Status.Conditions = append(cur.Status.Conditions, cond)
		}
		return cur, nil
	}, e.pods.UpdateOptionsFor(registry.WriteOptions{}, status))
	if err != nil {
		return "", fmt.Errorf("marking pod %s/%s as a disruption target: %w", pod.Namespace, pod.Name, err)
	}
	return obj.(*corev1.Pod).ResourceVersion, nil
}

func tooManyEvictions(cause string) error {
	err := apierrors.NewTooManyRequests(evictionViolation, 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	return err
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
