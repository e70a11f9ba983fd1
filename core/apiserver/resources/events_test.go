package resources

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// TestEventConversion: an events.k8s.io/v1 Event survives the trip through its core/v1
// storage form, and its core fields are the ones Kubernetes maps it to.
func TestEventConversion(t *testing.T) {
	at := metav1.NewMicroTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in := &eventsv1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns", Labels: map[string]string{"a": "b"}},
		EventTime:  at, Series: &eventsv1.EventSeries{Count: 3, LastObservedTime: at},
		ReportingController: "example.com/ctl", ReportingInstance: "ctl-1", Action: "Do", Reason: "Test", Type: "Normal", Note: "hello",
		Regarding:        corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "ns"},
		Related:          &corev1.ObjectReference{Kind: "Node", Name: "n"},
		DeprecatedSource: corev1.EventSource{Component: "kubelet", Host: "h"}, DeprecatedCount: 2}
	core := coreEventOf(in)
	if core.Message != "hello" || core.InvolvedObject.Name != "p" || core.Source.Component != "kubelet" || core.Count != 2 ||
		core.Series == nil || core.Series.Count != 3 || core.ReportingController != "example.com/ctl" {
		t.Fatalf("core form: %+v", core)
	}
	if back := eventOf(core); !apiequality.Semantic.DeepEqual(back, in) {
		t.Errorf("round trip changed the event:\n got %+v\nwant %+v", back, in)
	}

	for _, tc := range []struct {
		name      string
		component string
		want      string
	}{
		{name: "source from the reporter", want: "example.com/ctl"},
		{name: "an own source wins", component: "kubelet", want: "kubelet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := core.DeepCopy()
			e.Source.Component = tc.component
			_, f, err := coreEventAttrs(e)
			if err != nil || !fields.SelectorFromSet(fields.Set{"source": tc.want}).Matches(f) {
				t.Errorf("fields %v (%v), want source=%s", f, err, tc.want)
			}
		})
	}
}
