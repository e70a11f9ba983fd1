// Command require-labels is a wasmplane validate plugin: objects must carry the labels
// listed in its configuration, and pods may not use ":latest" (or untagged) images.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/jsonview"
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
	// And of the request, only these members: the rest is left out by the host.
	wasmplane.RequestReads("operation", "kind", "object.metadata.labels", "object.spec.containers", "object.spec.initContainers")
	wasmplane.RegisterConfigure(func(req *abi.ConfigureRequest) error { return json.Unmarshal(req.Config, &cfg) })
	// The request is read in place (sdk/go/jsonview): only the operation, the kind, the
	// labels and the images are looked at, and nothing is decoded into Go values.
	validate.RegisterView(func(req jsonview.Value) (abi.ValidateResponse, error) {
		if op := req.Get("operation"); !op.Is("CREATE") && !op.Is("UPDATE") {
			return abi.ValidateResponse{Allowed: true}, nil
		}
		obj := req.Get("object")
		if obj.Kind() != jsonview.Object {
			return abi.ValidateResponse{}, errors.New("object is not a JSON object")
		}
		var problems []string
		labels := obj.At("metadata", "labels")
		for _, l := range cfg.Labels {
			if !labels.Has(l) {
				problems = missingLabel(problems, l)
			}
		}
		if req.At("kind", "kind").Is("Pod") {
			spec := obj.Get("spec")
			for _, list := range [...]string{"initContainers", "containers"} {
				for c := range spec.Get(list).Items() {
					// Bytes aliases the request: an allowed image costs no allocation.
					if image := c.Get("image").Bytes(); latest(image) {
						problems = latestImage(problems, c, image)
					}
				}
			}
		}
		if len(problems) > 0 {
			return deny(problems), nil
		}
		return abi.ValidateResponse{Allowed: true}, nil
	})
}

// The refusals are written by functions of their own, not inlined into the handler: an
// allowing call then runs through a handler of a fifth of the code (in a WebAssembly
// guest with cold caches, what a call costs follows the code it runs through).

//go:noinline
func missingLabel(problems []string, label string) []string {
	return append(problems, fmt.Sprintf("label %q is required", label))
}

//go:noinline
func latestImage(problems []string, c jsonview.Value, image []byte) []string {
	return append(problems, fmt.Sprintf("container %q: image %q must be pinned to a tag other than latest", c.Get("name").String(), image))
}

//go:noinline
func deny(problems []string) abi.ValidateResponse {
	return abi.ValidateResponse{Allowed: false, Code: 403, Reason: "Forbidden", Message: strings.Join(problems, "; ")}
}

// latest tells whether an image reference resolves to the latest tag. It reads the
// bytes once, in one loop: in a WebAssembly guest the calls of bytes.Contains and
// bytes.Cut cost more than the reading.
func latest(image []byte) bool {
	colon := -1 // the first ':' of the last path segment
	for i, c := range image {
		switch c {
		case '/':
			colon = -1
		case ':':
			if colon < 0 {
				colon = i
			}
		case '@':
			// "@sha256:" compared in two parts: the compiler compares constant strings
			// of up to six bytes inline.
			if len(image)-i >= 8 && string(image[i+1:i+4]) == "sha" && string(image[i+4:i+8]) == "256:" {
				return false
			}
		}
	}
	return colon < 0 || string(image[colon+1:]) == "latest"
}

func main() {}
