package guest

import (
	"encoding/json"
	"strconv"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// Plugins read a few members of the object of an admission request (labels, containers);
// decoding them with encoding/json cost a Go guest about 300 µs per pod. DecodeMeta and
// DecodePod read them by hand, with the fallback rules of nodedec.go.

func resetObjStrs() {
	if len(objStrs.m) >= maxAdmInterned {
		clear(objStrs.m)
	}
}

// DecodeMeta decodes the metadata of an object into m, as encoding/json decodes
// {"metadata": …} into a struct with an abi.ObjectMeta field of that name.
func DecodeMeta(b []byte, m *abi.ObjectMeta) error {
	resetObjStrs()
	r := reader{b: b, in: &objStrs}
	err := r.object(func(key []byte) error {
		if string(key) == "metadata" {
			return r.meta(m)
		}
		return r.unknown(key, "metadata")
	})
	if err == nil {
		r.space()
		if r.i != len(b) {
			err = errFallback
		}
	}
	if err != nil {
		var v struct {
			Metadata abi.ObjectMeta `json:"metadata"`
		}
		*m = abi.ObjectMeta{}
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*m = v.Metadata
	}
	return nil
}

// DecodePod decodes p as encoding/json decodes a Pod into abi.Pod.
func DecodePod(b []byte, p *abi.Pod) error {
	resetObjStrs()
	r := reader{b: b, in: &objStrs}
	err := r.object(func(key []byte) (err error) {
		switch string(key) {
		case "apiVersion":
			p.APIVersion, err = r.str()
		case "kind":
			p.Kind, err = r.str()
		case "metadata":
			err = r.meta(&p.Metadata)
		case "spec":
			err = r.podSpec(&p.Spec)
		default:
			err = r.unknown(key, "apiVersion", "kind", "metadata", "spec")
		}
		return err
	})
	if err == nil {
		r.space()
		if r.i != len(b) {
			err = errFallback
		}
	}
	if err != nil {
		*p = abi.Pod{}
		return json.Unmarshal(b, p)
	}
	return nil
}

var podSpecNames = []string{"nodeName", "nodeSelector", "schedulerName", "priorityClassName", "priority", "containers", "initContainers", "tolerations", "affinity"}

func (r *reader) podSpec(s *abi.PodSpec) error {
	return r.object(func(key []byte) (err error) {
		switch string(key) {
		case "nodeName":
			s.NodeName, err = r.str()
		case "nodeSelector":
			err = r.stringMap(&s.NodeSelector)
		case "schedulerName":
			s.SchedulerName, err = r.str()
		case "priorityClassName":
			s.PriorityClassName, err = r.str()
		case "priority":
			if r.isNull() {
				s.Priority = nil
				return nil
			}
			var n int64
			if n, err = r.integer(9); err == nil {
				v := int32(n)
				s.Priority = &v
			}
		case "containers":
			err = r.containers(&s.Containers)
		case "initContainers":
			err = r.containers(&s.InitContainers)
		case "tolerations":
			err = r.tolerations(&s.Tolerations)
		case "affinity":
			s.Affinity, err = r.raw()
		default:
			err = r.unknown(key, podSpecNames...)
		}
		return err
	})
}

// integer reads a plain decimal integer of at most digits digits (so it fits the field
// it is read for); other numbers are left to encoding/json.
func (r *reader) integer(digits int) (int64, error) {
	r.space()
	start := r.i
	j := start
	if j < len(r.b) && r.b[j] == '-' {
		j++
	}
	d := j
	for j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9' {
		j++
	}
	if j == d || j-d > digits || (r.b[d] == '0' && j-d > 1) {
		return 0, errFallback
	}
	if j < len(r.b) && (r.b[j] == '.' || r.b[j] == 'e' || r.b[j] == 'E') {
		return 0, errFallback
	}
	n, err := strconv.ParseInt(string(r.b[start:j]), 10, 64)
	if err != nil {
		return 0, errFallback
	}
	r.i = j
	return n, nil
}

func (r *reader) containers(dst *[]abi.Container) error {
	if r.isNull() {
		*dst = nil
		return nil
	}
	if r.next() != '[' {
		return errFallback
	}
	cs := (*dst)[:0]
	if cs == nil {
		cs = []abi.Container{}
	}
	err := r.array(func() error {
		var c abi.Container
		err := r.object(func(key []byte) (err error) {
			switch string(key) {
			case "name":
				c.Name, err = r.str()
			case "image":
				c.Image, err = r.str()
			case "resources":
				err = r.object(func(key []byte) (err error) {
					switch string(key) {
					case "requests":
						err = r.stringMap(&c.Resources.Requests)
					case "limits":
						err = r.stringMap(&c.Resources.Limits)
					default:
						err = r.unknown(key, "requests", "limits")
					}
					return err
				})
			default:
				err = r.unknown(key, "name", "image", "resources")
			}
			return err
		})
		cs = append(cs, c)
		return err
	})
	*dst = cs
	return err
}

func (r *reader) tolerations(dst *[]abi.Toleration) error {
	if r.isNull() {
		*dst = nil
		return nil
	}
	if r.next() != '[' {
		return errFallback
	}
	ts := (*dst)[:0]
	if ts == nil {
		ts = []abi.Toleration{}
	}
	err := r.array(func() error {
		var t abi.Toleration
		err := r.object(func(key []byte) (err error) {
			switch string(key) {
			case "key":
				t.Key, err = r.str()
			case "operator":
				t.Operator, err = r.str()
			case "value":
				t.Value, err = r.str()
			case "effect":
				t.Effect, err = r.str()
			case "tolerationSeconds":
				if r.isNull() {
					t.TolerationSeconds = nil
					return nil
				}
				var n int64
				if n, err = r.integer(18); err == nil {
					t.TolerationSeconds = &n
				}
			default:
				err = r.unknown(key, "key", "operator", "value", "effect", "tolerationSeconds")
			}
			return err
		})
		ts = append(ts, t)
		return err
	})
	*dst = ts
	return err
}
