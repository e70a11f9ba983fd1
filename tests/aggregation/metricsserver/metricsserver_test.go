//go:build metricsserver

// Package metricsserver runs the real metrics-server (sigs.k8s.io/metrics-server, built
// from the Go module proxy by tests/aggregation/metricsserver/run) as an aggregated API
// server of wasmplane, as a user installing it would: its APIService takes
// v1beta1.metrics.k8s.io over, it authenticates wasmplane's front proxy and delegates
// authorization back, and it scrapes the kubelet's /metrics/resource.
//
// It needs a build of metrics-server, so it is not part of `go test ./...`; run it with
// `tests/aggregation/metricsserver/run`.
package metricsserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/ptr"
)

func TestMetricsServer(t *testing.T) {
	bin := os.Getenv("METRICS_SERVER")
	if bin == "" {
		t.Fatal("METRICS_SERVER must name a metrics-server binary (tests/aggregation/metricsserver/run builds one)")
	}
	srv := testserver.Start(t)
	testserver.StartWASINode(t, srv, nil)
	ctx := context.Background()
	cs := srv.Clientset(t, true)
	port := testserver.FreePort(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kubeconfig := srv.KubeconfigPath()
	cmd := exec.CommandContext(ctx, bin, "--secure-port", fmt.Sprint(port), "--bind-address", "127.0.0.1",
		"--cert-dir", t.TempDir(), "--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig,
		"--authorization-kubeconfig", kubeconfig, "--kubelet-insecure-tls", "--kubelet-preferred-address-types", "InternalIP", "--kubelet-use-node-status-port",
		"--metric-resolution", "15s")
	logFile, err := os.Create(filepath.Join(t.TempDir(), "metrics-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("metrics-server log:\n%s", b)
		}
	}()

	if _, err := cs.CoreV1().Services("kube-system").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server", Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agg, err := aggregatorclient.NewForConfig(srv.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	spec := apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1", GroupPriorityMinimum: 100, VersionPriority: 100,
		InsecureSkipTLSVerify: true, Service: &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server", Port: ptr.To(int32(port))}}
	// The API server may serve metrics.k8s.io itself: metrics-server's manifest then
	// updates the local APIService, which from then on is the admin's.
	apiServices := agg.ApiregistrationV1().APIServices()
	cur, err := apiServices.Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = apiServices.Create(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"}, Spec: spec}, metav1.CreateOptions{})
	case err == nil:
		cur.Spec = spec
		_, err = apiServices.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		as, err := apiServices.Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range as.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				t.Logf("Available=%s %s %s", c.Status, c.Reason, c.Message)
				return c.Status == apiregistrationv1.ConditionTrue && c.Reason == "Passed", nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("metrics-server's APIService never became available: %v", err)
	}

	// What kubectl top nodes reads, served by metrics-server from the kubelet's scrape.
	mc, err := metricsclient.NewForConfig(srv.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		nodes, err := mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("node metrics: %v", err)
			return false, nil
		}
		for _, n := range nodes.Items {
			t.Logf("node %s: cpu %s memory %s (window %s)", n.Name, n.Usage.Cpu(), n.Usage.Memory(), n.Window.Duration)
		}
		return len(nodes.Items) > 0 && !nodes.Items[0].Usage.Memory().IsZero(), nil
	})
	if err != nil {
		t.Fatalf("no node metrics through metrics-server: %v", err)
	}
}
