package wasm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmplane/wasmplane/core/storage/unstructuredjson"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// The compact pod document crosses to a guest on every validate call of a plugin that
// asked for it and with every pod the scheduler offers WASM plugins. encoding/json spends
// most of its time there walking reflection data that is cold when a request comes
// (≈ 18 µs per pod on flushed caches); these appenders write the same bytes from plain
// code (TestAppendPodJSON compares them with encoding/json, and FuzzAppendJSONString the
// string escaping).

// CompactPodJSON returns the compact pod document of p (ABI §7.5) as JSON: the bytes
// json.Marshal writes for CompactPod(p).
func CompactPodJSON(p *corev1.Pod) ([]byte, error) {
	return AppendCompactPod(make([]byte, 0, 512), p, nil)
}

// AppendCompactPod appends the compact pod document of p (ABI §7.5), the bytes
// json.Marshal writes for CompactPod(p), reading the Pod itself: a validating plugin's
// first call on a create encodes it with the CPU's caches cold, where each object
// allocated on the way (the abi.Pod, its containers and tolerations, the quantity maps)
// costs a cache miss or more. Only the members keep keeps are written (a nil keep keeps
// them all): of the document, its metadata and its spec, each member kept is written
// whole, as in the whole document.
func AppendCompactPod(dst []byte, p *corev1.Pod, keep *Members) ([]byte, error) {
	dst = append(dst, '{')
	sep := false
	if keep.Keeps("apiVersion") {
		dst, sep = appendMember(dst, sep, "apiVersion"), true
		dst = append(dst, `"v1"`...)
	}
	if keep.Keeps("kind") {
		dst, sep = appendMember(dst, sep, "kind"), true
		dst = append(dst, `"Pod"`...)
	}
	if km, ok := keep.Member("metadata"); ok {
		dst, sep = append(appendMember(dst, sep, "metadata"), '{'), true
		dst = appendCompactMeta(dst, &p.ObjectMeta, km)
		dst = append(dst, '}')
	}
	ks, ok := keep.Member("spec")
	if !ok {
		return append(dst, '}'), nil
	}
	s := &p.Spec
	dst, in := appendSpecHead(appendMember(dst, sep, "spec"), s.NodeName, s.NodeSelector, s.SchedulerName, s.PriorityClassName, s.Priority, ks)
	if ks.Keeps("containers") {
		// CompactPod never leaves containers nil: a pod without any has [].
		dst, in = appendCoreContainers(appendMember(dst, in, "containers"), s.Containers), true
	}
	if len(s.InitContainers) > 0 && ks.Keeps("initContainers") {
		dst, in = appendCoreContainers(appendMember(dst, in, "initContainers"), s.InitContainers), true
	}
	if len(s.Tolerations) > 0 && ks.Keeps("tolerations") {
		dst, in = append(appendMember(dst, in, "tolerations"), '['), true
		for i := range s.Tolerations {
			t := &s.Tolerations[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendToleration(dst, &abi.Toleration{Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: string(t.Effect), TolerationSeconds: t.TolerationSeconds})
		}
		dst = append(dst, ']')
	}
	if s.Affinity != nil && ks.Keeps("affinity") {
		b, err := json.Marshal(s.Affinity)
		if err != nil {
			return nil, fmt.Errorf("encode affinity of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		dst = append(appendMember(dst, in, "affinity"), b...)
	}
	return append(dst, "}}"...), nil
}

// appendCompactMeta writes the members of the compact pod's metadata that keep keeps.
func appendCompactMeta(dst []byte, m *metav1.ObjectMeta, keep *Members) []byte {
	sep := false
	for _, f := range [...]member{{"name", m.Name}, {"namespace", m.Namespace}, {"uid", string(m.UID)}, {"resourceVersion", m.ResourceVersion}} {
		if keep.Keeps(f.name) {
			dst, sep = appendOptString(dst, sep, f.name, f.v)
		}
	}
	if keep.Keeps("labels") {
		dst, sep = appendOptMap(dst, sep, "labels", m.Labels)
	}
	if keep.Keeps("annotations") {
		dst, _ = appendOptMapExcept(dst, sep, "annotations", m.Annotations, lastApplied)
	}
	return dst
}

// AppendObjectMetadata appends the object metadata document of obj (ABI §7.3): its
// apiVersion and kind (gvk when obj carries none, as stored objects do) and, of its
// metadata, the name, generateName, namespace, uid, labels and annotations — each as
// json.Marshal writes it in the whole object, so that a reader of those members sees what
// the whole object has. A policy about names, labels or annotations then gets a request
// of a few hundred bytes whatever the kind, written without encoding the object. Only
// the members keep keeps are written (a nil keep keeps them all), each of them whole. It
// reports false, having made no promise about dst's new bytes, for an object it cannot
// read so (no object metadata, unstructured metadata holding what encoding/json writes
// differently): the caller sends the whole object then.
func AppendObjectMetadata(dst []byte, obj runtime.Object, gvk schema.GroupVersionKind, keep *Members) ([]byte, bool) {
	dst = append(dst, '{')
	sep := false
	if apiVersion, kind := keep.Keeps("apiVersion"), keep.Keeps("kind"); apiVersion || kind {
		if own := obj.GetObjectKind().GroupVersionKind(); !own.Empty() {
			gvk = own
		}
		// Both omitted when empty, as TypeMeta's JSON omits them.
		if apiVersion {
			dst, sep = appendOptString(dst, sep, "apiVersion", gvk.GroupVersion().String())
		}
		if kind {
			dst, sep = appendOptString(dst, sep, "kind", gvk.Kind)
		}
	}
	keepMeta, ok := keep.Member("metadata")
	if !ok {
		return append(dst, '}'), true
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		// Unstructured metadata is written from its map, member by member, so that what
		// the client sent (an empty labels map, say) reaches the plugin as it is stored.
		raw, present := u.Object["metadata"]
		if !present {
			return append(dst, '}'), true
		}
		m, ok := raw.(map[string]any)
		if !ok {
			return dst, false
		}
		dst = append(appendMember(dst, sep, "metadata"), '{')
		sep = false
		for _, k := range objectMetadataMembers() {
			v, found := m[k]
			if !found || !keepMeta.Keeps(k) {
				continue
			}
			if dst, ok = unstructuredjson.Append(appendMember(dst, sep, k), v); !ok {
				return dst, false
			}
			sep = true
		}
		return append(dst, "}}"...), true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return dst, false
	}
	// In ObjectMeta's order, each omitted when empty as its JSON omits it.
	dst, sep = append(appendMember(dst, sep, "metadata"), '{'), false
	for _, k := range objectMetadataMembers() {
		if !keepMeta.Keeps(k) {
			continue
		}
		switch k {
		case "name":
			dst, sep = appendOptString(dst, sep, k, m.GetName())
		case "generateName":
			dst, sep = appendOptString(dst, sep, k, m.GetGenerateName())
		case "namespace":
			dst, sep = appendOptString(dst, sep, k, m.GetNamespace())
		case "uid":
			dst, sep = appendOptString(dst, sep, k, string(m.GetUID()))
		case "labels":
			dst, sep = appendOptMap(dst, sep, k, m.GetLabels())
		case "annotations":
			dst, sep = appendOptMap(dst, sep, k, m.GetAnnotations())
		}
	}
	return append(dst, "}}"...), true
}

// objectMetadataMembers are the members of metadata the object metadata document keeps,
// in ObjectMeta's order: what AppendObjectMetadata writes and what a Rego policy may read
// of it (metadataSuffices).
func objectMetadataMembers() [6]string {
	return [...]string{"name", "generateName", "namespace", "uid", "labels", "annotations"}
}

// appendCoreContainers writes containers as appendContainers writes what containers()
// makes of them.
func appendCoreContainers(dst []byte, cs []corev1.Container) []byte {
	for i := range cs {
		c := &cs[i]
		sep := false
		dst = appendContainerHead(dst, i, c.Name, c.Image)
		dst, sep = appendOptQuantities(dst, sep, "requests", c.Resources.Requests)
		dst, _ = appendOptQuantities(dst, sep, "limits", c.Resources.Limits)
		dst = append(dst, "}}"...)
	}
	return appendListEnd(dst, len(cs))
}

// appendContainerHead writes the i-th container of a list up to its resources' opening
// brace, opening the list before the first.
func appendContainerHead(dst []byte, i int, name, image string) []byte {
	if i == 0 {
		dst = append(dst, '[')
	} else {
		dst = append(dst, ',')
	}
	dst = AppendJSONString(append(dst, `{"name":`...), name)
	if image != "" {
		dst = AppendJSONString(append(dst, `,"image":`...), image)
	}
	return append(dst, `,"resources":{`...)
}

// appendListEnd closes a list of n elements written by appendContainerHead.
func appendListEnd(dst []byte, n int) []byte {
	if n == 0 {
		return append(dst, "[]"...)
	}
	return append(dst, ']')
}

// appendOptQuantities writes an omitempty resource list as the map of strings
// quantities() makes of it.
func appendOptQuantities(dst []byte, sep bool, name string, l corev1.ResourceList) ([]byte, bool) {
	if len(l) == 0 {
		return dst, sep
	}
	var buf [8]corev1.ResourceName
	keys := sortedKeys(buf[:0], l)
	dst = append(appendMember(dst, sep, name), '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		q := l[k]
		dst = append(AppendJSONString(dst, string(k)), ':')
		dst = AppendJSONString(dst, q.String())
	}
	return append(dst, '}'), true
}

// appendOptMapExcept is appendOptMap without the member keyed skip; a map left empty
// is omitted.
func appendOptMapExcept(dst []byte, sep bool, name string, m map[string]string, skip string) ([]byte, bool) {
	if _, ok := m[skip]; !ok {
		return appendOptMap(dst, sep, name, m)
	}
	if len(m) == 1 {
		return dst, sep
	}
	var buf [8]string
	keys := slices.DeleteFunc(sortedKeys(buf[:0], m), func(k string) bool { return k == skip })
	return appendMapMembers(dst, sep, name, keys, m), true
}

// sortedKeys appends m's keys to buf, sorted as encoding/json sorts a map's keys.
func sortedKeys[K ~string, V any](buf []K, m map[K]V) []K {
	for k := range m {
		buf = append(buf, k)
	}
	slices.Sort(buf)
	return buf
}

// AppendPodJSON appends what json.Marshal writes for p.
func AppendPodJSON(dst []byte, p *abi.Pod) []byte {
	dst = append(dst, '{')
	sep := false
	if p.APIVersion != "" {
		dst, sep = appendMember(dst, sep, "apiVersion"), true
		dst = AppendJSONString(dst, p.APIVersion)
	}
	if p.Kind != "" {
		dst, sep = appendMember(dst, sep, "kind"), true
		dst = AppendJSONString(dst, p.Kind)
	}
	dst = appendMeta(appendMember(dst, sep, "metadata"), &p.Metadata)
	dst = appendPodSpec(appendMember(dst, true, "spec"), &p.Spec)
	return append(dst, '}')
}

func appendMeta(dst []byte, m *abi.ObjectMeta) []byte {
	dst, sep := appendOptStrings(append(dst, '{'), false,
		member{"name", m.Name}, member{"namespace", m.Namespace}, member{"uid", m.UID}, member{"resourceVersion", m.ResourceVersion})
	dst, sep = appendOptMap(dst, sep, "labels", m.Labels)
	dst, _ = appendOptMap(dst, sep, "annotations", m.Annotations)
	return append(dst, '}')
}

func appendPodSpec(dst []byte, s *abi.PodSpec) []byte {
	dst, sep := appendSpecHead(dst, s.NodeName, s.NodeSelector, s.SchedulerName, s.PriorityClassName, s.Priority, nil)
	dst = appendContainers(appendMember(dst, sep, "containers"), s.Containers)
	if len(s.InitContainers) > 0 {
		dst = appendContainers(appendMember(dst, true, "initContainers"), s.InitContainers)
	}
	if len(s.Tolerations) > 0 {
		dst = append(appendMember(dst, true, "tolerations"), '[')
		for i := range s.Tolerations {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendToleration(dst, &s.Tolerations[i])
		}
		dst = append(dst, ']')
	}
	if len(s.Affinity) > 0 {
		// CompactPod fills it from json.Marshal: compact, valid and escaped already.
		dst = append(appendMember(dst, true, "affinity"), s.Affinity...)
	}
	return append(dst, '}')
}

// appendSpecHead opens a pod spec and writes its members before the containers.
func appendSpecHead(dst []byte, nodeName string, nodeSelector map[string]string, schedulerName, priorityClassName string, priority *int32, keep *Members) ([]byte, bool) {
	dst = append(dst, '{')
	sep := false
	if keep.Keeps("nodeName") {
		dst, sep = appendOptString(dst, sep, "nodeName", nodeName)
	}
	if keep.Keeps("nodeSelector") {
		dst, sep = appendOptMap(dst, sep, "nodeSelector", nodeSelector)
	}
	if keep.Keeps("schedulerName") {
		dst, sep = appendOptString(dst, sep, "schedulerName", schedulerName)
	}
	if keep.Keeps("priorityClassName") {
		dst, sep = appendOptString(dst, sep, "priorityClassName", priorityClassName)
	}
	if priority != nil && keep.Keeps("priority") {
		dst, sep = appendMember(dst, sep, "priority"), true
		dst = strconv.AppendInt(dst, int64(*priority), 10)
	}
	return dst, sep
}

func appendContainers(dst []byte, cs []abi.Container) []byte {
	if cs == nil {
		return append(dst, "null"...)
	}
	for i := range cs {
		c := &cs[i]
		sep := false
		dst = appendContainerHead(dst, i, c.Name, c.Image)
		dst, sep = appendOptMap(dst, sep, "requests", c.Resources.Requests)
		dst, _ = appendOptMap(dst, sep, "limits", c.Resources.Limits)
		dst = append(dst, "}}"...)
	}
	return appendListEnd(dst, len(cs))
}

func appendToleration(dst []byte, t *abi.Toleration) []byte {
	dst, sep := appendOptStrings(append(dst, '{'), false,
		member{"key", t.Key}, member{"operator", t.Operator}, member{"value", t.Value}, member{"effect", t.Effect})
	if t.TolerationSeconds != nil {
		dst = appendMember(dst, sep, "tolerationSeconds")
		dst = strconv.AppendInt(dst, *t.TolerationSeconds, 10)
	}
	return append(dst, '}')
}

// appendMember writes a member name (ASCII, needing no escapes) and its colon, after a
// comma unless it is the first.
func appendMember(dst []byte, sep bool, name string) []byte {
	if sep {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// appendOptString writes an omitempty string member.
func appendOptString(dst []byte, sep bool, name, v string) ([]byte, bool) {
	if v == "" {
		return dst, sep
	}
	return AppendJSONString(appendMember(dst, sep, name), v), true
}

// member is a string member of an object.
type member struct{ name, v string }

// appendOptStrings writes omitempty string members in order.
func appendOptStrings(dst []byte, sep bool, ms ...member) ([]byte, bool) {
	for _, m := range ms {
		dst, sep = appendOptString(dst, sep, m.name, m.v)
	}
	return dst, sep
}

// appendOptMap writes an omitempty map[string]string member, keys sorted as encoding/json
// sorts them.
func appendOptMap(dst []byte, sep bool, name string, m map[string]string) ([]byte, bool) {
	if len(m) == 0 {
		return dst, sep
	}
	var buf [8]string // most label and selector maps: no allocation
	return appendMapMembers(dst, sep, name, sortedKeys(buf[:0], m), m), true
}

// appendMapMembers writes the member name with m's members keyed keys, in that order.
func appendMapMembers(dst []byte, sep bool, name string, keys []string, m map[string]string) []byte {
	dst = append(appendMember(dst, sep, name), '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(AppendJSONString(dst, k), ':')
		dst = AppendJSONString(dst, m[k])
	}
	return append(dst, '}')
}

// AppendJSONString appends s as encoding/json writes a string: quoted, with <, > and &
// escaped for HTML, U+2028 and U+2029 escaped, and invalid UTF-8 replaced by U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	return unstructuredjson.AppendString(dst, s)
}
