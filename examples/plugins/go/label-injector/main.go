// Command label-injector is a wasmplane mutate plugin: it adds labels to every object
// and a toleration to every pod, both taken from its configuration.
package main

import (
	"encoding/json"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/mutate"
	"github.com/wasmplane/wasmplane/sdk/go/wasmplane"
)

type config struct {
	Labels     map[string]string `json:"labels"`
	Toleration *abi.Toleration   `json:"toleration"`
}

var cfg config

type object struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Tolerations []abi.Toleration `json:"tolerations"`
	} `json:"spec"`
}

func init() {
	wasmplane.RegisterConfigure(func(req *abi.ConfigureRequest) error { return json.Unmarshal(req.Config, &cfg) })
	mutate.Register(func(req *abi.AdmissionRequest) (abi.MutateResponse, error) {
		if req.Operation != "CREATE" && req.Operation != "UPDATE" {
			return abi.MutateResponse{Allowed: true}, nil
		}
		var obj object
		if err := json.Unmarshal(req.Object, &obj); err != nil {
			return abi.MutateResponse{}, err
		}
		var patch []abi.PatchOperation
		add := func(path string, v any) {
			b, _ := json.Marshal(v)
			patch = append(patch, abi.PatchOperation{Op: "add", Path: path, Value: b})
		}
		if obj.Metadata.Labels == nil && len(cfg.Labels) > 0 {
			add("/metadata/labels", map[string]string{})
		}
		for k, v := range cfg.Labels {
			if obj.Metadata.Labels[k] != v {
				add("/metadata/labels/"+escape(k), v)
			}
		}
		if cfg.Toleration != nil && req.Kind.Kind == "Pod" && !has(obj.Spec.Tolerations, *cfg.Toleration) {
			if obj.Spec.Tolerations == nil {
				add("/spec/tolerations", []abi.Toleration{*cfg.Toleration})
			} else {
				add("/spec/tolerations/-", *cfg.Toleration)
			}
		}
		return abi.MutateResponse{Allowed: true, Patch: patch}, nil
	})
}

func has(ts []abi.Toleration, t abi.Toleration) bool {
	for _, x := range ts {
		if x.Key == t.Key && x.Operator == t.Operator && x.Value == t.Value && x.Effect == t.Effect {
			return true
		}
	}
	return false
}

// escape encodes a JSON Pointer reference token (RFC 6901).
func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

func main() {}
