package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// BenchmarkScaleDeployment0To5000 scales a Deployment from 0 to 5,000 replicas with no
// kubelet and measures the time until all pods exist (the Deployment reports 5,000
// replicas). The controllers use server.ControllerQPS/ControllerBurst.
func BenchmarkScaleDeployment0To5000(b *testing.B) {
	const n = 5000
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		inst, err := server.Start(context.Background(), server.Config{DataDir: b.TempDir(), Port: 0, Logger: testserver.Logger()})
		if err != nil {
			b.Fatal(err)
		}
		cfg := inst.RESTConfig()
		cfg.QPS = -1
		client := testserver.NewClientset(b, cfg)
		ctx := context.Background()
		d := newDeployment("bench", 0, "img:1")
		if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		sc, err := client.AppsV1().Deployments("default").GetScale(ctx, "bench", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		sc.Spec.Replicas = n
		b.StartTimer()
		start := time.Now()
		if _, err := client.AppsV1().Deployments("default").UpdateScale(ctx, "bench", sc, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			cur, err := client.AppsV1().Deployments("default").Get(ctx, "bench", metav1.GetOptions{})
			return err == nil && cur.Status.Replicas == n, nil
		})
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil || len(pods.Items) < n {
			b.Fatalf("pods listed = %d (%v)", len(pods.Items), err)
		}
		total += elapsed
		b.Logf("0 -> %d pods in %v: %.0f pods/s (controller client QPS %d, burst %d)", n, elapsed.Round(time.Millisecond),
			float64(n)/elapsed.Seconds(), server.ControllerQPS, server.ControllerBurst)
		inst.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "pods/s")
	b.ReportMetric(total.Seconds()/float64(b.N), "s/5000pods")
}
