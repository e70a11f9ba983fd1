// Command require-labels is a wasmplane validate plugin: objects must carry the labels
// listed in its configuration, and pods may not use ":latest" (or untagged) images.
package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/validate"
	"github.com/wasmplane/wasmplane/sdk/go/wasmplane"
)

type config struct {
	Labels []string `json:"labels"`
}

var cfg config

type object struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Containers     []abi.Container `json:"containers"`
		InitContainers []abi.Container `json:"initContainers"`
	} `json:"spec"`
}

func init() {
	wasmplane.RegisterConfigure(func(req *abi.ConfigureRequest) error { return json.Unmarshal(req.Config, &cfg) })
	validate.Register(func(req *abi.AdmissionRequest) (abi.ValidateResponse, error) {
		if req.Operation != "CREATE" && req.Operation != "UPDATE" {
			return abi.ValidateResponse{Allowed: true}, nil
		}
		var obj object
		if err := json.Unmarshal(req.Object, &obj); err != nil {
			return abi.ValidateResponse{}, err
		}
		var problems []string
		for _, l := range cfg.Labels {
			if _, ok := obj.Metadata.Labels[l]; !ok {
				problems = append(problems, fmt.Sprintf("label %q is required", l))
			}
		}
		if req.Kind.Kind == "Pod" {
			for _, c := range append(obj.Spec.InitContainers, obj.Spec.Containers...) {
				if latest(c.Image) {
					problems = append(problems, fmt.Sprintf("container %q: image %q must be pinned to a tag other than latest", c.Name, c.Image))
				}
			}
		}
		if len(problems) > 0 {
			return abi.ValidateResponse{Allowed: false, Code: 403, Reason: "Forbidden", Message: strings.Join(problems, "; ")}, nil
		}
		return abi.ValidateResponse{Allowed: true}, nil
	})
}

// latest tells whether an image reference resolves to the latest tag.
func latest(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return false
	}
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(name, ":")
	return !ok || tag == "latest"
}

func main() {}
