package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"github.com/wasmplane/wasmplane/tests/internal/webhookserver"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkWebhookCreate measures a ConfigMap create with no webhook at all, then with
// one no-op validating webhook (HTTPS on 127.0.0.1) that admits it, on the same server
// in the same run. Reports p50/p99 in microseconds.
func BenchmarkWebhookCreate(b *testing.B) {
	e := newWebhookEnv(b)
	ctx := context.Background()
	ns := e.namespace(b, "bench", nil)
	n := 0
	create := func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			n++
			start := time.Now()
			if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(fmt.Sprintf("cm-%d", n), nil, nil), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		testserver.ReportLatencies(b, lat)
	}
	b.Run("no-webhook", create)
	srv := webhookserver.Start(b, func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return nil })
	e.validating(b, "noop", validatingHook("noop.example.com", srv.ClientConfig("/"), ns))
	until(b, "warmup", func(name string) error {
		_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, webhookConfigMap(name, nil, nil), metav1.CreateOptions{})
		return err
	}, func(error) bool { return srv.Calls() > 0 })
	b.Run("noop-validating-webhook", func(b *testing.B) {
		before := srv.Calls()
		create(b)
		if got := srv.Calls() - before; got != int64(b.N) {
			b.Fatalf("the webhook got %d calls for %d creates", got, b.N)
		}
	})
}
