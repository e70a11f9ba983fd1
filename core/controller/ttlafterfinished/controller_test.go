package ttlafterfinished

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestSync(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	finished := func(cond batchv1.JobConditionType, ago time.Duration, ttl *int32) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "u"}, Spec: batchv1.JobSpec{TTLSecondsAfterFinished: ttl}}
		if cond != "" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
			if cond == batchv1.JobComplete {
				j.Status.CompletionTime = ptr.To(metav1.NewTime(now.Add(-ago)))
			}
		}
		return j
	}
	for _, tc := range []struct {
		name      string
		job       *batchv1.Job
		wantGone  bool
		wantAfter time.Duration
	}{
		{"complete and expired", finished(batchv1.JobComplete, time.Minute, ptr.To[int32](30)), true, 0},
		{"failed and expired", finished(batchv1.JobFailed, time.Minute, ptr.To[int32](0)), true, 0},
		{"complete, not yet expired", finished(batchv1.JobComplete, 10*time.Second, ptr.To[int32](30)), false, 20 * time.Second},
		{"running", finished("", 0, ptr.To[int32](0)), false, 0},
		{"no ttl", finished(batchv1.JobComplete, time.Hour, nil), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.job)
			factory := informers.NewSharedInformerFactory(client, 0)
			c, err := New(client, factory, testingclock.NewFakePassiveClock(now), slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			_ = factory.Batch().V1().Jobs().Informer().GetIndexer().Add(tc.job)
			after, err := c.sync(context.Background(), "ns/j")
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.BatchV1().Jobs("ns").Get(context.Background(), "j", metav1.GetOptions{})
			if gone := err != nil; gone != tc.wantGone || after != tc.wantAfter {
				t.Errorf("gone=%v after=%v, want gone=%v after=%v", gone, after, tc.wantGone, tc.wantAfter)
			}
		})
	}
}
