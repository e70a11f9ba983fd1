package podautoscaler

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// selectors remembers the pod selector of each HPA's target, as kube-controller-manager's
// HPA selector map does, so that pods scaled by more than one HPA are found: such HPAs
// would fight, and none of them scales (ScalingActive False, AmbiguousSelector).
type selectors struct {
	mu sync.Mutex
	// byHPA maps an HPA's namespace/name to its target's selector; an HPA known but not
	// yet reconciled selects nothing.
	byHPA map[string]nsSelector
}

type nsSelector struct {
	namespace string
	selector  labels.Selector
}

func newSelectors() *selectors { return &selectors{byHPA: map[string]nsSelector{}} }

// register notes an HPA seen by the informer, selecting nothing until its target's
// selector is known.
func (s *selectors) register(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + name
	if _, ok := s.byHPA[key]; !ok {
		s.byHPA[key] = nsSelector{namespace: namespace, selector: labels.Nothing()}
	}
}

// put records the selector of a registered HPA's target; a deleted HPA stays forgotten.
func (s *selectors) put(namespace, name string, sel labels.Selector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + name
	if _, ok := s.byHPA[key]; ok {
		s.byHPA[key] = nsSelector{namespace: namespace, selector: sel}
	}
}

func (s *selectors) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byHPA, key)
}

// controlling returns, sorted, the HPAs (namespace/name) whose selector picks at least
// one of pods.
func (s *selectors) controlling(pods []*corev1.Pod) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hpas []string
	for key, ns := range s.byHPA {
		for _, p := range pods {
			if p.Namespace == ns.namespace && ns.selector.Matches(labels.Set(p.Labels)) {
				hpas = append(hpas, key)
				break
			}
		}
	}
	slices.Sort(hpas)
	return hpas
}
