package admission_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkPodCreateQuota measures pod create latency through the whole built-in
// admission chain in a namespace without a quota and in one with a pods + compute quota
// (which costs a quota status write per create). Reports p50/p99 in microseconds.
func BenchmarkPodCreateQuota(b *testing.B) {
	s := testserver.StartAPI(b)
	cs := s.Clientset(b, false)
	ctx := context.Background()
	for _, withQuota := range []bool{false, true} {
		name := "no-quota"
		if withQuota {
			name = "quota"
		}
		b.Run(name, func(b *testing.B) {
			ns := builtinNamespace(b, cs)
			if withQuota {
				hard := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1000000"), corev1.ResourceRequestsCPU: resource.MustParse("100000")}
				q, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"},
					Spec: corev1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{})
				if err != nil {
					b.Fatal(err)
				}
				// No controller runs here: fill the status as it would.
				q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0"), corev1.ResourceRequestsCPU: resource.MustParse("0")}}
				if _, err := cs.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := simplePod(fmt.Sprintf("p-%d", i))
				p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
				start := time.Now()
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			testserver.ReportLatencies(b, lat)
			if withQuota {
				q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if u := q.Status.Used[corev1.ResourcePods]; u.Value() != int64(b.N) {
					b.Fatalf("quota used pods = %s after %d creates", u.String(), b.N)
				}
			}
		})
	}
}
