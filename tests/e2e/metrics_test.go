// The metrics tests check resource metrics end to end: the API server's scraper
// reading the built-in WASI node's kubelet, metrics.k8s.io/v1beta1 through client-go's
// metrics clientset, and the real `kubectl top`.

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

func pod(name string, labels map[string]string, command ...string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels}, Spec: corev1.PodSpec{
		NodeName: "node-1", Containers: []corev1.Container{{Name: "main", Image: "toolbox:latest", Command: command, ImagePullPolicy: corev1.PullIfNotPresent}}}}
}

// TestResourceMetrics runs a pod spinning on the CPU and an idle one on a WASI node, and
// reads their usage as an autoscaler and kubectl top do.
func TestResourceMetrics(t *testing.T) {
	s := testserver.StartAPI(t, func(c *server.Config) { c.MetricsResolution = time.Second })
	testserver.StartWASINode(t, s, modules, "toolbox")
	cs := s.Clientset(t, false)
	mc, err := metricsclient.NewForConfig(s.Config(false))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, p := range []*corev1.Pod{
		pod("burner", map[string]string{"app": "burn"}, "sh", "-c", "while true; do true; done"),
		pod("idler", map[string]string{"app": "idle"}, "top"),
	} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll := func(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	byName := map[string]metricsv1beta1.PodMetrics{}
	poll(60*time.Second, "both pods' metrics", func(ctx context.Context) (bool, error) {
		list, err := mc.MetricsV1beta1().PodMetricses("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, m := range list.Items {
			byName[m.Name] = m
		}
		b, ok := byName["burner"]
		_, ok2 := byName["idler"]
		// Wait for a window in which the burner ran the whole time.
		return ok && ok2 && b.Containers[0].Usage.Cpu().MilliValue() >= 100, nil
	})
	burn, idle := byName["burner"], byName["idler"]
	bc, ic := burn.Containers[0].Usage.Cpu(), idle.Containers[0].Usage.Cpu()
	t.Logf("burner: cpu %s memory %s window %v; idler: cpu %s memory %s", bc, burn.Containers[0].Usage.Memory(), burn.Window.Duration, ic, idle.Containers[0].Usage.Memory())
	if bc.Cmp(*ic) <= 0 {
		t.Errorf("burner's CPU %s is not above the idler's %s", bc, ic)
	}
	if burn.Labels["app"] != "burn" || burn.Timestamp.IsZero() || burn.Window.Duration <= 0 || burn.Window.Duration > 5*time.Second {
		t.Errorf("burner's metrics: labels %v timestamp %v window %v", burn.Labels, burn.Timestamp, burn.Window)
	}
	if m := burn.Containers[0].Usage.Memory(); m.Value() <= 0 {
		t.Errorf("burner's memory %s, want > 0", m)
	}
	// Get, label and field selectors, as the autoscaler and kubectl top ask.
	if got, err := mc.MetricsV1beta1().PodMetricses("default").Get(ctx, "idler", metav1.GetOptions{}); err != nil || got.Name != "idler" || len(got.Containers) != 1 {
		t.Errorf("get idler: %v %+v", err, got)
	}
	if _, err := mc.MetricsV1beta1().PodMetricses("default").Get(ctx, "nosuch", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of a missing pod: %v, want NotFound", err)
	}
	if list, err := mc.MetricsV1beta1().PodMetricses("default").List(ctx, metav1.ListOptions{LabelSelector: "app=burn"}); err != nil || len(list.Items) != 1 || list.Items[0].Name != "burner" {
		t.Errorf("list app=burn: %v %+v", err, list)
	}
	if list, err := mc.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=idler"}); err != nil || len(list.Items) != 1 || list.Items[0].Name != "idler" {
		t.Errorf("list metadata.name=idler in all namespaces: %v %+v", err, list)
	}
	if _, err := mc.MetricsV1beta1().PodMetricses("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("list with an unsupported field selector: %v, want BadRequest", err)
	}
	if list, err := mc.MetricsV1beta1().PodMetricses("kube-system").List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("list in kube-system: %v %+v", err, list)
	}
	// Read-only: writes are 405.
	if err := mc.MetricsV1beta1().RESTClient().Post().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods").
		Body([]byte(`{"apiVersion":"metrics.k8s.io/v1beta1","kind":"PodMetrics","metadata":{"name":"x"}}`)).Do(ctx).Error(); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("create: %v, want MethodNotSupported", err)
	}
	if err := mc.MetricsV1beta1().RESTClient().Delete().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes/node-1").Do(ctx).Error(); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("delete: %v, want MethodNotSupported", err)
	}
	node, err := mc.MetricsV1beta1().NodeMetricses().Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Usage.Cpu().MilliValue() <= 0 || node.Usage.Memory().Value() <= 0 || node.Window.Duration <= 0 {
		t.Errorf("node metrics: %+v", node)
	}
	// Discovery and the local APIService, as for every group the server serves.
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("metrics.k8s.io/v1beta1"); err != nil {
		t.Errorf("discovery: %v", err)
	}
	poll(20*time.Second, "the APIService v1beta1.metrics.k8s.io", func(ctx context.Context) (bool, error) {
		raw, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io").DoRaw(ctx)
		return err == nil && strings.Contains(string(raw), `"reason":"Local"`), nil
	})
	// An APIService naming a Service (metrics-server's manifest applied over the local
	// one) hands the group to that server, here one that does not exist: unavailable,
	// requests 503. Deleting it brings the local one back.
	ac, err := aggregator.NewForConfig(s.Config(false))
	if err != nil {
		t.Fatal(err)
	}
	as, err := ac.ApiregistrationV1().APIServices().Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	as.Spec.Service = &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"}
	as.Spec.InsecureSkipTLSVerify = true
	if _, err := ac.ApiregistrationV1().APIServices().Update(ctx, as, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(20*time.Second, "the APIService handed to metrics-server", func(ctx context.Context) (bool, error) {
		as, err := ac.ApiregistrationV1().APIServices().Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
		if err != nil || as.Spec.Service == nil {
			return false, err
		}
		for _, c := range as.Status.Conditions {
			if c.Type == apiregistrationv1.Available && c.Reason == "ServiceNotFound" {
				_, err := mc.MetricsV1beta1().PodMetricses("default").Get(ctx, "burner", metav1.GetOptions{})
				return apierrors.IsServiceUnavailable(err), nil
			}
		}
		return false, nil
	})
	if err := ac.ApiregistrationV1().APIServices().Delete(ctx, "v1beta1.metrics.k8s.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(20*time.Second, "metrics served locally again", func(ctx context.Context) (bool, error) {
		_, err := mc.MetricsV1beta1().PodMetricses("default").Get(ctx, "burner", metav1.GetOptions{})
		return err == nil, nil
	})
	// kubectl top.
	out := s.MustKubectl(t, kubectlBin, "default", "", "top", "pods")
	t.Logf("kubectl top pods:\n%s", out)
	if !strings.Contains(out, "CPU(cores)") || !strings.Contains(out, "burner") || !strings.Contains(out, "idler") {
		t.Errorf("kubectl top pods printed:\n%s", out)
	}
	out = s.MustKubectl(t, kubectlBin, "default", "", "top", "nodes")
	t.Logf("kubectl top nodes:\n%s", out)
	if !strings.Contains(out, "MEMORY(bytes)") || !strings.Contains(out, "node-1") {
		t.Errorf("kubectl top nodes printed:\n%s", out)
	}
}
