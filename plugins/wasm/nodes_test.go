package wasm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// packedRequest is a packed request taken apart (ABI §7.7).
type packedRequest struct {
	slots  []uint32
	reset  bool
	forget []uint32
	define []uint32
}

func parsePacked(t *testing.T, b []byte) packedRequest {
	t.Helper()
	if string(b[:4]) != abi.PackedMagic {
		t.Fatalf("request starts with %q", b[:4])
	}
	n := int(binary.LittleEndian.Uint32(b[4:]))
	var r packedRequest
	for i := range n {
		r.slots = append(r.slots, binary.LittleEndian.Uint32(b[abi.PackedHeader+4*i:]))
	}
	var obj struct {
		Pod    json.RawMessage `json:"pod"`
		Reset  bool            `json:"reset"`
		Forget []uint32        `json:"forget"`
		Define []struct {
			Key  uint32   `json:"key"`
			Node abi.Node `json:"node"`
		} `json:"define"`
		Nodes json.RawMessage `json:"nodes"`
	}
	if err := json.Unmarshal(b[abi.PackedHeader+4*n:], &obj); err != nil {
		t.Fatalf("JSON part: %v", err)
	}
	if obj.Nodes != nil || len(obj.Pod) == 0 {
		t.Fatalf("JSON part has nodes %s, pod %s", obj.Nodes, obj.Pod)
	}
	r.reset, r.forget = obj.Reset, obj.Forget
	for _, d := range obj.Define {
		r.define = append(r.define, d.Key)
	}
	return r
}

// TestPackedSlots checks the host's slot plan: dense slots, a changed node's new
// document in its old slot, nothing committed by a call that fails, and a reset that
// starts over from slot 0.
func TestPackedSlots(t *testing.T) {
	cache := NewNodeCache()
	node := func(name, rv string) *NodeDocument {
		d, err := cache.Document(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), ResourceVersion: rv}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	in := &instance{set: &instanceSet{flags: abi.ConfigureResponse{NodeTable: true, Packed: true}}, table: newNodeTable(true)}
	call := func(commit bool, nodes ...*NodeDocument) packedRequest {
		t.Helper()
		b, err := buildScheduling(in, &SchedulingInput{Pod: []byte(`{}`), Nodes: nodes, ClusterNodes: 4})
		if err != nil {
			t.Fatal(err)
		}
		r := parsePacked(t, b)
		if commit {
			in.table.commit()
		}
		return r
	}
	a, b, c := node("a", "1"), node("b", "1"), node("c", "1")
	want := func(got packedRequest, w packedRequest) {
		t.Helper()
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("got %+v, want %+v", got, w)
		}
	}
	want(call(true, a, b, c), packedRequest{slots: []uint32{0, 1, 2}, define: []uint32{0, 1, 2}})
	want(call(true, c, a), packedRequest{slots: []uint32{2, 0}})
	b2, d := node("b", "2"), node("d", "1")
	// A failed call (not committed) changes nothing: the next one plans the same.
	want(call(false, d, b2), packedRequest{slots: []uint32{3, 1}, forget: []uint32{1}, define: []uint32{3, 1}})
	want(call(true, d, b2), packedRequest{slots: []uint32{3, 1}, forget: []uint32{1}, define: []uint32{3, 1}})
	want(call(true, a, b2, c, d), packedRequest{slots: []uint32{0, 1, 2, 3}})
	// Past the bound (2×4+1024 slots handed out) the table starts over.
	in.table.next = 2000
	want(call(true, d, a), packedRequest{slots: []uint32{0, 1}, reset: true, define: []uint32{0, 1}})
	want(call(true, a, d, c), packedRequest{slots: []uint32{1, 0, 2}, define: []uint32{2}})
	held := 0
	for _, h := range in.table.held {
		if h.key != 0 {
			held++
		}
	}
	if in.table.next != 3 || held != 3 {
		t.Fatalf("table after reset: next %d, %d documents", in.table.next, held)
	}
}

// TestDecodePackedAnswers checks the packed score and filter answers.
func TestDecodePackedAnswers(t *testing.T) {
	hdr := func(n uint32) []byte { return binary.LittleEndian.AppendUint32([]byte(abi.PackedMagic), n) }
	sc := hdr(3)
	for _, v := range []int64{7, -1, 100} {
		sc = binary.LittleEndian.AppendUint64(sc, uint64(v))
	}
	if got, err := decodeScores(sc, 3, nil); err != nil || !reflect.DeepEqual(got, []int64{7, -1, 100}) {
		t.Fatalf("scores: %v, %v", got, err)
	}
	if _, err := decodeScores(sc, 2, nil); err == nil {
		t.Fatal("3 scores accepted for 2 nodes")
	}
	if _, err := decodeScores(sc[:len(sc)-1], 3, nil); err == nil {
		t.Fatal("a truncated answer was accepted")
	}
	f := append(hdr(3), 1, 0, 1)
	r, err := decodeFilter(f, 3)
	if err != nil || !reflect.DeepEqual(r.Pass, []bool{true, false, true}) || r.Reasons != nil {
		t.Fatalf("filter: %+v, %v", r, err)
	}
	r, err = decodeFilter(append(f, `{"1":"no \"gpu\""}`...), 3)
	if err != nil || !reflect.DeepEqual(r.Reasons, []string{"", `no "gpu"`, ""}) {
		t.Fatalf("filter reasons: %+v, %v", r, err)
	}
	for _, bad := range [][]byte{append(hdr(3), 1, 2, 1), append(f, `{"3":"x"}`...), append(f, `{"-1":"x"}`...), f[:9], hdr(3)[:6]} {
		if _, err := decodeFilter(bad, 3); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}
	// A packed guest may still answer in JSON, e.g. with the error envelope.
	var g guestError
	if _, err := decodeScores([]byte(`{"error":"boom"}`), 3, nil); !errors.As(err, &g) {
		t.Fatalf("error envelope: %v", err)
	}
}

// TestNodeCacheIndexes: each node has a dense index that its later documents keep and
// that a deleted node gives back, so an instance's packed table can be an array.
func TestNodeCacheIndexes(t *testing.T) {
	cache := NewNodeCache()
	doc := func(name, rv string) *NodeDocument {
		t.Helper()
		d, err := cache.Document(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), ResourceVersion: rv}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	steps := []struct {
		name, rv string
		forget   string // node to delete before this step
		want     int
	}{
		{name: "a", rv: "1", want: 0},
		{name: "b", rv: "1", want: 1},
		{name: "a", rv: "2", want: 0}, // a changed: new document, same index
		{name: "c", rv: "1", forget: "b", want: 1},
		{name: "d", rv: "1", want: 2},
	}
	for _, s := range steps {
		if s.forget != "" {
			cache.Forget(types.UID(s.forget))
		}
		if got := doc(s.name, s.rv).idx; got != s.want {
			t.Errorf("%s@%s: index %d, want %d", s.name, s.rv, got, s.want)
		}
	}
}

// TestCompactPod: the compact pod keeps what abi.Pod declares, in the Pod's JSON shape,
// drops kubectl's last-applied copy without touching the pod, and reads back into the
// same abi.Pod a guest would decode from the whole Pod.
func TestCompactPod(t *testing.T) {
	secs, prio := int64(300), int32(7)
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "9",
			Labels:        map[string]string{"app": "web"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"big":true}`, "team": "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{
			NodeName: "n1", NodeSelector: map[string]string{"disk": "ssd"}, SchedulerName: "s", PriorityClassName: "high", Priority: &prio,
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers: []corev1.Container{{Name: "c", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a"}}}}}}}},
			Volumes: []corev1.Volume{{Name: "v"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	cases := []struct {
		name  string
		pod   *corev1.Pod
		check func(t *testing.T, c *abi.Pod, b []byte)
	}{
		{"full", full, func(t *testing.T, c *abi.Pod, b []byte) {
			var fromFull abi.Pod
			fb, _ := json.Marshal(full)
			if err := json.Unmarshal(fb, &fromFull); err != nil {
				t.Fatal(err)
			}
			delete(fromFull.Metadata.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
			fromFull.APIVersion, fromFull.Kind = "v1", "Pod"
			var back abi.Pod
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, fromFull) {
				t.Errorf("compact pod reads back as\n%+v\nthe whole pod as\n%+v", back, fromFull)
			}
			for _, gone := range []string{"managedFields", "volumes", "status", "last-applied", "ports"} {
				if json.Valid(b) && contains(b, gone) {
					t.Errorf("compact pod keeps %q: %s", gone, b)
				}
			}
			if _, ok := full.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; !ok {
				t.Error("CompactPod removed the annotation from the pod itself")
			}
		}},
		{"bare", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, func(t *testing.T, c *abi.Pod, b []byte) {
			if want := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"},"spec":{"containers":[]}}`; string(b) != want {
				t.Errorf("bare pod %s, want %s", b, want)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CompactPod(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c, b)
		})
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
