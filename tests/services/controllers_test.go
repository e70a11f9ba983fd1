package services_test

import (
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/rootcacertpublisher"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/utils/ptr"
)

// web is a pod template of toolbox sleeping, with a port named http and a readiness
// probe that passes when ready.
func web(ready bool) corev1.PodTemplateSpec {
	code := "1"
	if ready {
		code = "0"
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []corev1.Container{{
			Name: "c", Image: "toolbox:latest", Args: []string{"sleep", "1h"}, ImagePullPolicy: corev1.PullIfNotPresent,
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"toolbox", "exit", code}}},
				PeriodSeconds: 1, TimeoutSeconds: 5},
		}}}}
}

func TestEndpointsFollowReadyPods(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	s := testserver.Start(t)
	cs := s.Clientset(t, false)
	ctx := context.Background()
	testserver.StartWASINode(t, s, modules, "toolbox")
	svc, err := cs.CoreV1().Services("default").Create(ctx, service("web", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: web(true)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A pod the Service selects whose readiness probe fails.
	unready := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unready"}, Spec: web(false).Spec}
	unready.Labels = map[string]string{"app": "web"}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, unready, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Wait for the Deployment's two pods to be Ready and the odd one Running.
	var readyPods []corev1.Pod
	var unreadyPod corev1.Pod
	waitfor.Condition(t, 120*time.Second, "two ready pods and one running unready", func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err
		}
		readyPods = nil
		running := false
		for _, p := range list.Items {
			if p.Name == "unready" {
				unreadyPod, running = p, p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
				continue
			}
			if endpointsliceutil.IsPodReady(&p) && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				readyPods = append(readyPods, p)
			}
		}
		return len(readyPods) == 2 && running, nil
	})
	want := func(pods ...corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Status.PodIP+"/"+p.Name+"/"+p.Spec.NodeName)
		}
		slices.Sort(out)
		return out
	}
	wantReady, wantUnready := want(readyPods...), want(unreadyPod)

	waitfor.Condition(t, 30*time.Second, "Endpoints listing the ready pods", func(ctx context.Context) (bool, error) {
		ep, err := cs.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if len(ep.Subsets) != 1 || len(ep.Subsets[0].Ports) != 1 {
			return false, nil
		}
		p := ep.Subsets[0].Ports[0]
		if p.Name != "http" || p.Port != 8080 || p.Protocol != corev1.ProtocolTCP {
			t.Fatalf("port %+v, want http 8080/TCP (the named targetPort)", p)
		}
		got := func(as []corev1.EndpointAddress) []string {
			var out []string
			for _, a := range as {
				if a.TargetRef == nil || a.TargetRef.Kind != "Pod" || a.NodeName == nil {
					return nil
				}
				out = append(out, a.IP+"/"+a.TargetRef.Name+"/"+*a.NodeName)
			}
			slices.Sort(out)
			return out
		}
		return slices.Equal(got(ep.Subsets[0].Addresses), wantReady) && slices.Equal(got(ep.Subsets[0].NotReadyAddresses), wantUnready) &&
			ep.Labels["endpoints.kubernetes.io/managed-by"] == "endpoint-controller", nil
	})

	waitfor.Condition(t, 30*time.Second, "an EndpointSlice listing the pods", func(ctx context.Context) (bool, error) {
		list, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return false, err
		}
		if len(list.Items) != 1 {
			return false, nil
		}
		sl := list.Items[0]
		if sl.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" || sl.AddressType != discoveryv1.AddressTypeIPv4 ||
			len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].UID != svc.UID {
			t.Fatalf("slice %+v", sl.ObjectMeta)
		}
		if len(sl.Ports) != 1 || *sl.Ports[0].Name != "http" || *sl.Ports[0].Port != 8080 {
			return false, nil
		}
		var ready, unready []string
		for _, e := range sl.Endpoints {
			if e.TargetRef == nil || e.NodeName == nil || e.Conditions.Ready == nil || e.Conditions.Serving == nil || e.Conditions.Terminating == nil {
				return false, nil
			}
			k := e.Addresses[0] + "/" + e.TargetRef.Name + "/" + *e.NodeName
			if *e.Conditions.Ready {
				ready = append(ready, k)
			} else {
				unready = append(unready, k)
			}
		}
		slices.Sort(ready)
		slices.Sort(unready)
		return slices.Equal(ready, wantReady) && slices.Equal(unready, wantUnready), nil
	})

	// publishNotReadyAddresses lists every pod as ready.
	svc, err = cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.PublishNotReadyAddresses = true
	if _, err := cs.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Condition(t, 30*time.Second, "every pod ready with publishNotReadyAddresses", func(ctx context.Context) (bool, error) {
		ep, err := cs.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 3 && len(ep.Subsets[0].NotReadyAddresses) == 0, nil
	})

	// The Endpoints and slices go with the Service.
	if err := cs.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Condition(t, 30*time.Second, "Endpoints and EndpointSlices deleted with the Service", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		list, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		return err == nil && len(list.Items) == 0, err
	})
}

func TestRootCAPublished(t *testing.T) {
	s := testserver.Start(t)
	cs := s.Clientset(t, false)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	published := func(ns string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			return cm.Data["ca.crt"] == string(s.CA()) && len(cm.Data) == 1 &&
				strings.HasPrefix(cm.Annotations["kubernetes.io/description"], "Contains a CA bundle"), nil
		}
	}
	for _, ns := range []string{"default", "kube-system", "fresh"} {
		waitfor.Condition(t, 30*time.Second, "kube-root-ca.crt in "+ns, published(ns))
	}
	if err := cs.CoreV1().ConfigMaps("fresh").Delete(ctx, rootcacertpublisher.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Condition(t, 30*time.Second, "kube-root-ca.crt recreated", published("fresh"))
	cm, err := cs.CoreV1().ConfigMaps("fresh").Get(ctx, rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["ca.crt"] = "tampered"
	if _, err := cs.CoreV1().ConfigMaps("fresh").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Condition(t, 30*time.Second, "kube-root-ca.crt restored", published("fresh"))
}
