package plugins

import (
	"context"
	"fmt"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
)

// PriorityClassLister reads PriorityClasses.
type PriorityClassLister interface {
	// GetPriorityClass returns one class; a NotFound error when it is missing.
	GetPriorityClass(ctx context.Context, name string) (*schedulingv1.PriorityClass, error)
	// ListPriorityClasses returns every class; fresh reads storage instead of the cache,
	// which may not yet hold a class created an instant ago.
	ListPriorityClasses(ctx context.Context, fresh bool) ([]schedulingv1.PriorityClass, error)
}

// Priority is Kubernetes' Priority plugin: a pod's spec.priority and preemptionPolicy come
// from its PriorityClass (or the global default), and at most one class is the default.
type Priority struct {
	// Classes reads PriorityClasses.
	Classes PriorityClassLister
}

// Name implements admission.Mutator and admission.Validator.
func (*Priority) Name() string { return "Priority" }

// Admit resolves the priority of a new pod and keeps it on updates.
func (p *Priority) Admit(ctx context.Context, a *admission.Attributes) error {
	if !isPod(a) {
		return nil
	}
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	switch a.Operation {
	case admission.Update:
		// Set on create; an update that leaves it out keeps it (validation forbids changes).
		if old, ok := a.OldObject.(*corev1.Pod); ok {
			if pod.Spec.Priority == nil && old.Spec.Priority != nil {
				pod.Spec.Priority = old.Spec.Priority
			}
			if pod.Spec.PreemptionPolicy == nil && old.Spec.PreemptionPolicy != nil {
				pod.Spec.PreemptionPolicy = old.Spec.PreemptionPolicy
			}
		}
		return nil
	case admission.Create:
	default:
		return nil
	}
	name, value, policy, err := p.establish(ctx, a, pod.Spec.PriorityClassName)
	if err != nil {
		return err
	}
	pod.Spec.PriorityClassName = name
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return forbidden(a, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, value))
	}
	pod.Spec.Priority = ptr.To(value)
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return forbidden(a, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, *policy))
		}
		pod.Spec.PreemptionPolicy = ptr.To(*policy)
	}
	return nil
}

// Validate allows only one globalDefault PriorityClass.
func (p *Priority) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Resource.GroupResource() != schedulingv1.Resource("priorityclasses") || a.Subresource != "" ||
		(a.Operation != admission.Create && a.Operation != admission.Update) {
		return nil
	}
	pc, ok := a.Object.(*schedulingv1.PriorityClass)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind PriorityClass but was unable to be converted")
	}
	if !pc.GlobalDefault {
		return nil
	}
	// Fresh: a default made just before must be seen, or two defaults could be stored.
	def, err := p.defaultClass(ctx, true)
	if err != nil {
		return fmt.Errorf("failed to get default priority class: %w", err)
	}
	if def != nil && (a.Operation == admission.Create || def.Name != pc.Name) {
		return forbidden(a, fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name))
	}
	return nil
}

// establish returns the class name, value and preemption policy for a pod naming class
// ("" = the global default, or priority 0 when there is none).
func (p *Priority) establish(ctx context.Context, a *admission.Attributes, class string) (string, int32, *corev1.PreemptionPolicy, error) {
	if class == "" {
		def, err := p.defaultClass(ctx, false)
		if err != nil {
			return "", 0, nil, fmt.Errorf("error occurred while retrieving default priority class: %w", err)
		}
		if def == nil {
			return "", 0, ptr.To(corev1.PreemptLowerPriority), nil
		}
		return def.Name, def.Value, def.PreemptionPolicy, nil
	}
	pc, err := p.Classes.GetPriorityClass(ctx, class)
	if apierrors.IsNotFound(err) {
		return "", 0, nil, forbidden(a, fmt.Errorf("no PriorityClass with name %v was found", class))
	}
	if err != nil {
		return "", 0, nil, fmt.Errorf("failed to resolve PriorityClass with name %s: %w", class, err)
	}
	return class, pc.Value, pc.PreemptionPolicy, nil
}

// defaultClass returns the globalDefault class; if a race left several, the lowest value
// wins, as in Kubernetes.
func (p *Priority) defaultClass(ctx context.Context, fresh bool) (*schedulingv1.PriorityClass, error) {
	list, err := p.Classes.ListPriorityClasses(ctx, fresh)
	if err != nil {
		return nil, err
	}
	var def *schedulingv1.PriorityClass
	for i := range list {
		if list[i].GlobalDefault && (def == nil || list[i].Value < def.Value) {
			def = &list[i]
		}
	}
	return def, nil
}
