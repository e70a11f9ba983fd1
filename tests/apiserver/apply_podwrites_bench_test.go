package apiserver

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkPodWrite times the writes a node agent and the Job controller make to a pod,
// each of which records managedFields: a status update flipping the pod's readiness (what
// a kubelet sends when a probe changes), and a JSON patch adding or removing a finalizer
// (what the Job controller sends to stop tracking a finished pod). Each op is one
// request; "parallel" runs 32 clients on 32 pods. BENCH_KUBECONFIG points it at another
// server (kube-apiserver) instead of an in-process wasmplane.
func BenchmarkPodWrite(b *testing.B) {
	cs := benchClient(b)
	ctx := context.Background()
	pods := cs.CoreV1().Pods(benchNamespace(b, cs, "bench-pod"))
	const clients = 32
	running := make([]*corev1.Pod, clients)
	for i := range clients {
		p, err := pods.Create(ctx, benchPod(fmt.Sprintf("work-%d", i)), metav1.CreateOptions{FieldManager: "kube-controller-manager"})
		if err != nil {
			b.Fatal(err)
		}
		// Running with its container ready, as a kubelet reports it.
		now := metav1.Now()
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: fmt.Sprintf("10.1.0.%d", i+1),
			PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.1.0.%d", i+1)}}, StartTime: &now, QOSClass: corev1.PodQOSBestEffort,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "work", Image: "sleeper:latest", ImageID: "sha256:0123", ContainerID: "wasi://0123",
				Ready: true, Started: new(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
		if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
			b.Fatal(err)
		}
		running[i] = p
	}
	// flip writes pod i's readiness as the opposite of what it is, from the copy the
	// last write returned (only this client writes the pod).
	flip := func(i int) error {
		p := running[i]
		ready := corev1.ConditionFalse
		if p.Status.Conditions[2].Status == corev1.ConditionFalse {
			ready = corev1.ConditionTrue
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		for _, c := range []int{2, 3} {
			p.Status.Conditions[c].Status, p.Status.Conditions[c].LastTransitionTime = ready, now
		}
		p.Status.ContainerStatuses[0].Ready = ready == corev1.ConditionTrue
		got, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: "kubelet"})
		if err == nil {
			running[i] = got
		}
		return err
	}
	// finalizer adds the Job controller's tracking finalizer when the pod has none and
	// removes it when it has one, with the JSON patch that controller sends.
	const tracking = "batch.kubernetes.io/job-tracking"
	finalizer := func(i int) error {
		p := running[i]
		patch := fmt.Sprintf(`[{"op":"add","path":"/metadata/finalizers","value":[%q]}]`, tracking)
		if len(p.Finalizers) > 0 {
			patch = fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/0","value":%q},{"op":"remove","path":"/metadata/finalizers/0"}]`, tracking)
		}
		got, err := pods.Patch(ctx, p.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{FieldManager: "job-controller"})
		if err == nil {
			running[i] = got
		}
		return err
	}
	for _, kind := range []struct {
		name string
		fn   func(i int) error
	}{{"status-update", flip}, {"finalizer-patch", finalizer}} {
		b.Run(kind.name+"/serial", func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				if err := kind.fn(0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(kind.name+"/parallel", func(b *testing.B) {
			defer reportCPU(b)()
			var next atomic.Int64
			// One goroutine per pod, at most: each writes from the copy its last write
			// returned.
			b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1)-1) % clients
				for pb.Next() {
					if err := kind.fn(i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// benchPod is a Job's pod as the Job controller creates it, bound to a node.
func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{"batch.kubernetes.io/job-name": "work", "job-name": "work", "batch.kubernetes.io/controller-uid": "0123", "controller-uid": "0123"},
		Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "0"}},
		Spec: corev1.PodSpec{NodeName: "node-0", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "work", Image: "sleeper:latest", ImagePullPolicy: corev1.PullIfNotPresent,
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}}
}
