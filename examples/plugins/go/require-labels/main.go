// Command require-labels is a wasmplane validate plugin: objects must carry the labels
// listed in its configuration, and pods may not use ":latest" (or untagged) images.
package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/objects"
	"github.com/wasmplane/wasmplane/sdk/go/validate"
	"github.com/wasmplane/wasmplane/sdk/go/wasmplane"
)

type config struct {
	Labels []string `json:"labels"`
}

var cfg config

func init() {
	// Only labels and container images are read: the compact pod document (ABI §7.5)
	// has them, and costs the server and this plugin a fraction of a whole Pod.
	wasmplane.RequestCompactPods()
	wasmplane.RegisterConfigure(func(req *abi.ConfigureRequest) error { return json.Unmarshal(req.Config, &cfg) })
	validate.Register(func(req *abi.AdmissionRequest) (abi.ValidateResponse, error) {
		if req.Operation != "CREATE" && req.Operation != "UPDATE" {
			return abi.ValidateResponse{Allowed: true}, nil
		}
		// The objects package reads metadata and pods several times faster than
		// encoding/json does in a WebAssembly guest, with the same result.
		var labels map[string]string
		var containers []abi.Container
		if req.Kind.Kind == "Pod" {
			pod, err := objects.Pod(req.Object)
			if err != nil {
				return abi.ValidateResponse{}, err
			}
			labels, containers = pod.Metadata.Labels, append(pod.Spec.InitContainers, pod.Spec.Containers...)
		} else {
			meta, err := objects.Meta(req.Object)
			if err != nil {
				return abi.ValidateResponse{}, err
			}
			labels = meta.Labels
		}
		var problems []string
		for _, l := range cfg.Labels {
			if _, ok := labels[l]; !ok {
				problems = append(problems, fmt.Sprintf("label %q is required", l))
			}
		}
		if req.Kind.Kind == "Pod" {
			for _, c := range containers {
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
