package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// PodMetricsLister is where the controller reads pods' resource usage: metrics.k8s.io
// in a cluster (NewMetricsAPILister), anything else in tests.
type PodMetricsLister interface {
	// ListPodMetrics returns the usage of the pods in namespace whose labels match
	// selector; pods without a sample are simply absent.
	ListPodMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]PodUsage, error)
}

// PodUsage is one pod's sample, as a PodMetrics of metrics.k8s.io/v1beta1 carries it.
type PodUsage struct {
	// Name is the pod's name.
	Name string
	// Timestamp is when the sample was taken (the end of Window).
	Timestamp time.Time
	// Window is the span the usage was averaged over.
	Window time.Duration
	// Containers holds each container's usage (cpu, memory).
	Containers []ContainerUsage
}

// ContainerUsage is one container's usage within a PodUsage.
type ContainerUsage struct {
	// Name is the container's name.
	Name string
	// Usage is the container's use of each resource.
	Usage corev1.ResourceList
}

// NewMetricsAPILister reads metrics.k8s.io/v1beta1 PodMetrics through client.
func NewMetricsAPILister(client metricsclient.Interface) PodMetricsLister {
	return metricsAPI{client: client}
}

type metricsAPI struct{ client metricsclient.Interface }

// ListPodMetrics lists PodMetrics by the selector.
func (m metricsAPI) ListPodMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]PodUsage, error) {
	list, err := m.client.MetricsV1beta1().PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("listing PodMetrics in %s: %w", namespace, err)
	}
	out := make([]PodUsage, 0, len(list.Items))
	for _, pm := range list.Items {
		u := PodUsage{Name: pm.Name, Timestamp: pm.Timestamp.Time, Window: pm.Window.Duration, Containers: make([]ContainerUsage, 0, len(pm.Containers))}
		for _, c := range pm.Containers {
			u.Containers = append(u.Containers, ContainerUsage{Name: c.Name, Usage: c.Usage})
		}
		out = append(out, u)
	}
	return out, nil
}

// podMetric is one pod's usage of one resource, in thousandths of the unit (millicores,
// millibytes), as Kubernetes' metrics client reports it.
type podMetric struct {
	value     int64
	timestamp time.Time
	window    time.Duration
}

// resourceMetrics reads the usage of resource by the pods selector picks: the sum over a
// pod's containers (a pod with a container lacking the resource is left out), or the one
// named container's (its lacking the resource is an error). The messages are Kubernetes'.
func resourceMetrics(ctx context.Context, lister PodMetricsLister, namespace string, selector labels.Selector,
	resource corev1.ResourceName, container string) (map[string]podMetric, time.Time, error) {
	usages, err := lister.ListPodMetrics(ctx, namespace, selector)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)
	}
	if len(usages) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from resource metrics API")
	}
	out := make(map[string]podMetric, len(usages))
	for _, u := range usages {
		var sum int64
		found, complete := false, true
		for _, c := range u.Containers {
			if container != "" && c.Name != container {
				continue
			}
			q, ok := c.Usage[resource]
			if !ok {
				if container != "" {
					return nil, time.Time{}, fmt.Errorf("failed to get container metrics: missing resource metric %s for container %s in pod %s/%s", resource, c.Name, namespace, u.Name)
				}
				complete = false
				break
			}
			found = true
			sum += q.MilliValue()
		}
		if !complete || (container != "" && !found) {
			continue
		}
		out[u.Name] = podMetric{value: sum, timestamp: u.Timestamp, window: u.Window}
	}
	return out, usages[0].Timestamp, nil
}

// resourceQuantity is a usage in thousandths as a quantity.
func resourceQuantity(milli int64) *resource.Quantity {
	return resource.NewMilliQuantity(milli, resource.DecimalSI)
}
