package wasm

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

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
	c, err := CompactPod(p)
	if err != nil {
		return nil, err
	}
	return AppendPodJSON(make([]byte, 0, 512), c), nil
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
	dst = append(dst, '{')
	sep := false
	dst, sep = appendOptString(dst, sep, "nodeName", s.NodeName)
	dst, sep = appendOptMap(dst, sep, "nodeSelector", s.NodeSelector)
	dst, sep = appendOptString(dst, sep, "schedulerName", s.SchedulerName)
	dst, sep = appendOptString(dst, sep, "priorityClassName", s.PriorityClassName)
	if s.Priority != nil {
		dst, sep = appendMember(dst, sep, "priority"), true
		dst = strconv.AppendInt(dst, int64(*s.Priority), 10)
	}
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

func appendContainers(dst []byte, cs []abi.Container) []byte {
	if cs == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i := range cs {
		if i > 0 {
			dst = append(dst, ',')
		}
		c := &cs[i]
		dst = AppendJSONString(append(dst, `{"name":`...), c.Name)
		if c.Image != "" {
			dst = AppendJSONString(append(dst, `,"image":`...), c.Image)
		}
		dst = append(dst, `,"resources":{`...)
		sep := false
		dst, sep = appendOptMap(dst, sep, "requests", c.Resources.Requests)
		dst, _ = appendOptMap(dst, sep, "limits", c.Resources.Limits)
		dst = append(dst, "}}"...)
	}
	return append(dst, ']')
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
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(appendMember(dst, sep, name), '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(AppendJSONString(dst, k), ':')
		dst = AppendJSONString(dst, m[k])
	}
	return append(dst, '}'), true
}

// AppendJSONString appends s as encoding/json writes a string: quoted, with <, > and &
// escaped for HTML, U+2028 and U+2029 escaped, and invalid UTF-8 replaced by U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	return unstructuredjson.AppendString(dst, s)
}
