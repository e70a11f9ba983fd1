package disruptiontarget

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestMark(t *testing.T) {
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	marked := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: ReasonTaint}
	for _, tc := range []struct {
		name      string
		existing  []corev1.PodCondition
		reason    string
		failed    bool
		wantPatch bool
		wantPhase corev1.PodPhase
	}{
		{"adds the condition, keeps the others", []corev1.PodCondition{ready}, ReasonPreemption, false, true, corev1.PodRunning},
		{"already marked for the same reason", []corev1.PodCondition{ready, marked}, ReasonTaint, false, false, corev1.PodRunning},
		{"marked for another reason is replaced", []corev1.PodCondition{marked}, ReasonPreemption, false, true, corev1.PodRunning},
		{"failed also sets the phase", []corev1.PodCondition{ready}, ReasonPodGC, true, true, corev1.PodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: tc.existing}}
			client := fake.NewSimpleClientset(pod) //nolint:staticcheck // NewClientset cannot strategic-merge-patch without apply configurations
			if err := Mark(context.Background(), client, pod, tc.reason, "why", tc.failed); err != nil {
				t.Fatal(err)
			}
			patched := false
			for _, a := range client.Actions() {
				patched = patched || (a.GetVerb() == "patch" && a.GetSubresource() == "status")
			}
			if patched != tc.wantPatch {
				t.Fatalf("patched = %v, want %v", patched, tc.wantPatch)
			}
			got, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", got.Status.Phase, tc.wantPhase)
			}
			var dt *corev1.PodCondition
			for i, c := range got.Status.Conditions {
				if c.Type == corev1.DisruptionTarget {
					dt = &got.Status.Conditions[i]
				}
			}
			if dt == nil || dt.Status != corev1.ConditionTrue || dt.Reason != tc.reason {
				t.Errorf("DisruptionTarget = %+v, want True with reason %s", dt, tc.reason)
			}
			if len(got.Status.Conditions) != len(tc.existing)+map[bool]int{true: 1, false: 0}[!hasType(tc.existing, corev1.DisruptionTarget)] {
				t.Errorf("conditions %+v: another condition lost or duplicated", got.Status.Conditions)
			}
		})
	}
	t.Run("a pod already gone", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "ns"}}
		if err := Mark(context.Background(), fake.NewSimpleClientset(), pod, ReasonPodGC, "why", true); err != nil { //nolint:staticcheck // as above
			t.Fatalf("Mark of a deleted pod: %v", err)
		}
	})
}

func hasType(cs []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range cs {
		if c.Type == t {
			return true
		}
	}
	return false
}
