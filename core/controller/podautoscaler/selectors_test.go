package podautoscaler

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestSelectorsControlling(t *testing.T) {
	pod := func(ns, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app + "-1", Labels: map[string]string{"app": app}}}
	}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	for _, tc := range []struct {
		name  string
		setup func(s *selectors)
		pods  []*corev1.Pod
		want  []string
	}{
		{name: "registered but not reconciled selects nothing",
			setup: func(s *selectors) { s.register("a", "h1") },
			pods:  []*corev1.Pod{pod("a", "web")}},
		{name: "one HPA", setup: func(s *selectors) { s.register("a", "h1"); s.put("a", "h1", web) },
			pods: []*corev1.Pod{pod("a", "web")}, want: []string{"a/h1"}},
		{name: "two HPAs on the same pods",
			setup: func(s *selectors) {
				s.register("a", "h2")
				s.put("a", "h2", web)
				s.register("a", "h1")
				s.put("a", "h1", labels.Everything())
			},
			pods: []*corev1.Pod{pod("a", "web")}, want: []string{"a/h1", "a/h2"}},
		{name: "same selector in another namespace does not count",
			setup: func(s *selectors) {
				s.register("a", "h1")
				s.put("a", "h1", web)
				s.register("b", "h1")
				s.put("b", "h1", web)
			},
			pods: []*corev1.Pod{pod("a", "web")}, want: []string{"a/h1"}},
		{name: "a forgotten HPA is not put back",
			setup: func(s *selectors) {
				s.register("a", "h1")
				s.put("a", "h1", web)
				s.register("a", "h2")
				s.forget("a/h2")
				s.put("a", "h2", web)
			},
			pods: []*corev1.Pod{pod("a", "web")}, want: []string{"a/h1"}},
		{name: "no pods, no HPAs", setup: func(s *selectors) { s.register("a", "h1"); s.put("a", "h1", web) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSelectors()
			tc.setup(s)
			if got := s.controlling(tc.pods); !slices.Equal(got, tc.want) {
				t.Errorf("controlling = %v, want %v", got, tc.want)
			}
		})
	}
}
