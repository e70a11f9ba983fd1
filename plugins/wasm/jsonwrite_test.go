package wasm

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// trickyStrings exercise every escaping rule of encoding/json.
var trickyStrings = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "\b\f\n\r\t\x00\x01\x1f\x7f",
	"ünïcödé ✓ 日本語", "\u2028 line and \u2029 paragraph separators", "bad utf8 \xff\xfe end", "\xc3", "truncated \xe2\x82",
	"emoji 🙂 and surrogate-range text", "kubernetes.io/hostname", "a=b,c!=d",
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range trickyStrings {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("%q:\n got %s\nwant %s", s, got, want)
		}
	}
}

// FuzzAppendJSONString: whatever the string, the bytes are encoding/json's.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
		}
	})
}

func TestAppendPodJSON(t *testing.T) {
	secs, prio, zero := int64(300), int32(-7), int64(0)
	cases := map[string]*abi.Pod{
		"empty":               {},
		"nil and empty lists": {Spec: abi.PodSpec{Containers: []abi.Container{}, InitContainers: []abi.Container{}, Tolerations: []abi.Toleration{}}},
		"empty maps":          {Metadata: abi.ObjectMeta{Labels: map[string]string{}}, Spec: abi.PodSpec{NodeSelector: map[string]string{}}},
		"full": {
			APIVersion: "v1", Kind: "Pod",
			Metadata: abi.ObjectMeta{Name: "web-0", Namespace: "shop", UID: "u-1", ResourceVersion: "42",
				Labels: map[string]string{"z": "last", "app": "web", "a<b": "x&y"}, Annotations: map[string]string{"note": "line\nbreak"}},
			Spec: abi.PodSpec{
				NodeName: "n1", NodeSelector: map[string]string{"disk": "ssd", "zone": "a"}, SchedulerName: "default-scheduler",
				PriorityClassName: "high", Priority: &prio,
				Containers: []abi.Container{
					{Name: "web", Image: "nginx:1.27", Resources: abi.ResourceRequirements{Requests: map[string]string{"memory": "64Mi", "cpu": "250m"}, Limits: map[string]string{"cpu": "1"}}},
					{Name: "sidecar"},
				},
				InitContainers: []abi.Container{{Name: "init", Image: "busybox"}},
				Tolerations: []abi.Toleration{
					{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs},
					{Key: "dedicated", Operator: "Equal", Value: "gpu", Effect: "NoSchedule"},
					{Operator: "Exists", TolerationSeconds: &zero},
				},
				Affinity: json.RawMessage(`{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}}}`),
			},
		},
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendPodJSON(nil, p); string(got) != string(want) {
				t.Fatalf("\n got %s\nwant %s", got, want)
			}
		})
	}
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 2000 {
			p := randomPod(rng)
			want, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendPodJSON(nil, p); string(got) != string(want) {
				t.Fatalf("\n got %s\nwant %s", got, want)
			}
		}
	})
}

// randomPod fills each field of a compact pod or leaves it empty, at random, with strings
// drawn from trickyStrings and random bytes.
func randomPod(rng *rand.Rand) *abi.Pod {
	str := func() string {
		if rng.IntN(4) == 0 {
			return ""
		}
		if rng.IntN(3) == 0 {
			b := make([]byte, rng.IntN(12))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			return string(b)
		}
		return trickyStrings[rng.IntN(len(trickyStrings))]
	}
	strMap := func() map[string]string {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return map[string]string{}
		}
		m := map[string]string{}
		for range 1 + rng.IntN(4) {
			m[str()] = str()
		}
		return m
	}
	containers := func() []abi.Container {
		if rng.IntN(4) == 0 {
			return nil
		}
		cs := make([]abi.Container, rng.IntN(3))
		for i := range cs {
			cs[i] = abi.Container{Name: str(), Image: str(), Resources: abi.ResourceRequirements{Requests: strMap(), Limits: strMap()}}
		}
		return cs
	}
	p := &abi.Pod{APIVersion: str(), Kind: str(),
		Metadata: abi.ObjectMeta{Name: str(), Namespace: str(), UID: str(), ResourceVersion: str(), Labels: strMap(), Annotations: strMap()},
		Spec: abi.PodSpec{NodeName: str(), NodeSelector: strMap(), SchedulerName: str(), PriorityClassName: str(),
			Containers: containers(), InitContainers: containers()}}
	if rng.IntN(2) == 0 {
		v := rng.Int32() - 1<<30
		p.Spec.Priority = &v
	}
	for range rng.IntN(3) {
		t := abi.Toleration{Key: str(), Operator: str(), Value: str(), Effect: str()}
		if rng.IntN(2) == 0 {
			v := rng.Int64() - 1<<62
			t.TolerationSeconds = &v
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, t)
	}
	if rng.IntN(2) == 0 {
		b, _ := json.Marshal(map[string]string{str(): str()})
		p.Spec.Affinity = b
	}
	return p
}

// TestCompactPodJSON: the document is json.Marshal(CompactPod(pod)).
func TestCompactPodJSON(t *testing.T) {
	pod := benchPod()
	c, err := CompactPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(c)
	got, err := CompactPodJSON(pod)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) || !utf8.Valid(got) || !strings.HasPrefix(string(got), `{"apiVersion":"v1","kind":"Pod"`) {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}

func BenchmarkCompactPodJSON(b *testing.B) {
	pod := benchPod()
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			c, _ := CompactPod(pod)
			_, _ = json.Marshal(c)
		}
	})
	b.Run("appenders", func(b *testing.B) {
		for b.Loop() {
			_, _ = CompactPodJSON(pod)
		}
	})
}

// benchPod is a pod as the API server holds it after defaulting and built-in admission.
func benchPod() *corev1.Pod {
	secs, prio := int64(300), int32(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", UID: "0f6c1e34-9b5b-4c2e-8d7e-5d7f3e2a1b00",
			Labels: map[string]string{"app": "web", "team": "a"}, Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
		Spec: corev1.PodSpec{
			SchedulerName: "default-scheduler", Priority: &prio, ServiceAccountName: "default",
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
			},
		},
	}
}

// TestAppendCompactPod: written from the Pod itself, the document is still
// json.Marshal(CompactPod(pod)), whatever the pod holds.
func TestAppendCompactPod(t *testing.T) {
	many := map[string]string{}
	for i := range 20 { // more keys than the appenders sort without allocating
		many[strings.Repeat("k", 20-i)+trickyStrings[i%len(trickyStrings)]] = trickyStrings[(i+3)%len(trickyStrings)]
	}
	prio, secs := int32(-3), int64(0)
	cases := map[string]func(p *corev1.Pod){
		"as the server holds it": func(*corev1.Pod) {},
		"no containers":          func(p *corev1.Pod) { p.Spec.Containers = nil },
		"only the last-applied annotation": func(p *corev1.Pod) {
			p.Annotations = map[string]string{lastApplied: "{}"}
		},
		"last-applied among others": func(p *corev1.Pod) {
			p.Annotations = map[string]string{lastApplied: "{}", "z": "1", "a": "<&>", "m": "\u2028"}
		},
		"many labels and annotations": func(p *corev1.Pod) { p.Labels, p.Annotations = many, many },
		"tricky strings everywhere": func(p *corev1.Pod) {
			p.Name, p.Namespace, p.UID, p.ResourceVersion = trickyStrings[3], trickyStrings[4], "u\x00", trickyStrings[7]
			p.Spec.NodeName, p.Spec.SchedulerName, p.Spec.PriorityClassName = trickyStrings[5], trickyStrings[6], trickyStrings[8]
			p.Spec.NodeSelector = map[string]string{trickyStrings[9]: trickyStrings[10], "": ""}
			p.Spec.Containers[0].Name, p.Spec.Containers[0].Image = trickyStrings[2], ""
		},
		"everything else": func(p *corev1.Pod) {
			p.Spec.Priority = &prio
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1.5"), "example.com/gpu": resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			}})
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists, TolerationSeconds: &secs},
				corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
		},
		"empty affinity": func(p *corev1.Pod) { p.Spec.Affinity = &corev1.Affinity{} },
		"empty pod":      func(p *corev1.Pod) { *p = corev1.Pod{} },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			pod := benchPod()
			change(pod)
			c, err := CompactPod(pod)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendCompactPod([]byte("prefix"), pod, nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix"+string(want) {
				t.Fatalf("\n got %s\nwant prefix%s", got, want)
			}
		})
	}
}
