package examples_test

import (
	"context"
	"encoding/json"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmplane/wasmplane/plugins/wasm"
)

// nativeLabelScore is label-score's logic as a native Go scheduler plugin would run it,
// on Node objects already in memory.
func nativeLabelScore(nodes []*corev1.Node, label string, scores []int64) []int64 {
	scores = scores[:0]
	for _, n := range nodes {
		v := n.Labels[label]
		var s int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				s = 0
				break
			}
			s = s*10 + int64(c-'0')
			if s > 100 {
				s = 100
				break
			}
		}
		scores = append(scores, s)
	}
	return scores
}

// cpuLoop runs op as the benchmark loop and reports the process CPU time per op
// (cpu-ns/op) beside the wall time, which on a shared machine measures its load too.
func cpuLoop(b *testing.B, op func()) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0 := cpu()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpu()-c0)/float64(b.N), "cpu-ns/op")
}

func benchNodes(n int) []*corev1.Node {
	nodes := make([]*corev1.Node, n)
	for i := range nodes {
		nodes[i] = node(i, map[string]string{
			"example.com/priority":        strconv.Itoa(i % 120),
			"kubernetes.io/hostname":      "node-" + strconv.Itoa(i),
			"kubernetes.io/os":            "linux",
			"kubernetes.io/arch":          "amd64",
			"topology.kubernetes.io/zone": "zone-" + strconv.Itoa(i%3),
		})
	}
	return nodes
}

// BenchmarkScore5000 scores 5,000 nodes for one pod: the Go-SDK WASM plugin through the
// host (steady state: node documents cached and already in the instance's node table)
// against the same logic as a native function.
func BenchmarkScore5000(b *testing.B) {
	nodes := benchNodes(5000)
	b.Run("native", func(b *testing.B) {
		scores := make([]int64, 0, len(nodes))
		cpuLoop(b, func() { scores = nativeLabelScore(nodes, "example.com/priority", scores) })
	})
	r := runtime(b)
	// The first call decodes 5,000 node documents in the guest; give it time.
	limits := wasm.Limits{Instances: 1, Timeout: time.Minute}
	p, err := pluginWith(b, r, "label-score", `{"label":"example.com/priority"}`, limits)
	if err != nil {
		b.Fatal(err)
	}
	cache := wasm.NewNodeCache()
	in := &wasm.SchedulingInput{Pod: []byte(podJSON), Nodes: docs(b, cache, nodes)}
	// Warm up: the first call defines every node in the instance's node table.
	if _, err := p.Score(context.Background(), in); err != nil {
		b.Fatal(err)
	}
	b.Run("wasm", func(b *testing.B) {
		cpuLoop(b, func() {
			if _, err := p.Score(context.Background(), in); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("wasm-cold-table", func(b *testing.B) {
		// Every call on a fresh plugin instance: all 5,000 documents cross and are decoded.
		for b.Loop() {
			b.StopTimer()
			q, err := pluginWith(b, r, "label-score", `{"label":"example.com/priority"}`, limits)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := q.Score(context.Background(), in); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = q.Close(context.Background())
			b.StartTimer()
		}
	})
}

// schedulingPod is a pod as the scheduler meets it (defaulted and admitted: service
// account volume, default tolerations, priority) under a new name each time, as the
// scheduler sends it: the compact pod document (ABI §7.5).
func schedulingPod(i int) []byte {
	grace, prio := int64(30), int32(0)
	secs := int64(300)
	p := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + strconv.Itoa(i), Namespace: "bench", UID: types.UID("uid-" + strconv.Itoa(i)),
			ResourceVersion: strconv.Itoa(1000 + i), CreationTimestamp: metav1.Now(), Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: "TCP"}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")}},
				VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: "File", ImagePullPolicy: "IfNotPresent"}},
			RestartPolicy: "Always", TerminationGracePeriodSeconds: &grace, DNSPolicy: "ClusterFirst",
			ServiceAccountName: "default", SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: "default-scheduler",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs},
				{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs}},
			Priority: &prio,
			Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSGuaranteed},
	}
	c, err := wasm.CompactPod(&p)
	if err != nil {
		panic(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkFilterBlock64 is one guest call of the scheduler's Filter walk: node-label-
// filter over a block of 64 of 5,000 nodes (the block moving as the walk does, node
// table warm), with the same pod every call and with a new pod every call (the pod of
// each scheduling cycle is new to the guest), against the native logic over 64 nodes.
func BenchmarkFilterBlock64(b *testing.B) {
	nodes := benchNodes(5000)
	for _, n := range nodes {
		n.Labels["disk"] = "ssd"
	}
	b.Run("native", func(b *testing.B) {
		i := 0
		cpuLoop(b, func() {
			for _, n := range nodes[i : i+64] {
				if _, ok := n.Labels["disk"]; !ok {
					b.Fatal("rejected")
				}
			}
			i = (i + 64) % (len(nodes) - 64)
		})
	})
	r := runtime(b)
	p, err := pluginWith(b, r, "node-label-filter", `{"label":"disk"}`, wasm.Limits{Instances: 1, Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	cache := wasm.NewNodeCache()
	all := docs(b, cache, nodes)
	size := 64
	call := func(pod []byte, i int) {
		in := &wasm.SchedulingInput{Pod: pod, Nodes: all[i : i+size], ClusterNodes: len(all)}
		if _, err := p.Filter(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i+64 <= len(all); i += 64 { // warm the node table
		call(schedulingPod(0), i)
	}
	b.Run("wasm-same-pod-1-node", func(b *testing.B) {
		size = 1
		defer func() { size = 64 }()
		pod, i := schedulingPod(0), 0
		cpuLoop(b, func() {
			call(pod, i)
			i = (i + 64) % (len(all) - 64)
		})
	})
	b.Run("wasm-tiny-pod-1-node", func(b *testing.B) {
		size = 1
		defer func() { size = 64 }()
		i := 0
		cpuLoop(b, func() {
			call([]byte(podJSON), i)
			i = (i + 64) % (len(all) - 64)
		})
	})
	for _, fresh := range []bool{false, true} {
		name := map[bool]string{false: "wasm-same-pod", true: "wasm-new-pod"}[fresh]
		b.Run(name, func(b *testing.B) {
			pods := make([][]byte, 64)
			for k := range pods {
				pods[k] = schedulingPod(k)
			}
			i, k := 0, 0
			cpuLoop(b, func() {
				pod := pods[0]
				if fresh {
					pod, k = pods[k], (k+1)%len(pods)
				}
				call(pod, i)
				i = (i + 64) % (len(all) - 64)
			})
		})
	}
}
