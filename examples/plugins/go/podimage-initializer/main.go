// Command podimage-initializer is the seed's podimage.example.com initializer as a
// wasmplane initialize plugin: it rewrites every container image of a new pod to pull
// from the mirror registry named in its configuration.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/initialize"
	"github.com/wasmplane/wasmplane/sdk/go/wasmplane"
)

type config struct {
	Mirror string `json:"mirror"`
}

var cfg config

type pod struct {
	Spec struct {
		Containers     []abi.Container `json:"containers"`
		InitContainers []abi.Container `json:"initContainers"`
	} `json:"spec"`
}

func init() {
	wasmplane.RegisterConfigure(func(req *abi.ConfigureRequest) error {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return err
		}
		cfg.Mirror = strings.TrimSuffix(cfg.Mirror, "/")
		if cfg.Mirror == "" {
			return errors.New("config.mirror is required")
		}
		return nil
	})
	initialize.Register(func(req *abi.InitializeRequest) (abi.InitializeResponse, error) {
		if req.Kind.Kind != "Pod" {
			return abi.InitializeResponse{}, nil
		}
		var p pod
		if err := json.Unmarshal(req.Object, &p); err != nil {
			return abi.InitializeResponse{}, err
		}
		var patch []abi.PatchOperation
		for _, f := range []struct {
			field string
			cs    []abi.Container
		}{{"initContainers", p.Spec.InitContainers}, {"containers", p.Spec.Containers}} {
			for i, c := range f.cs {
				if img := mirror(cfg.Mirror, c.Image); img != c.Image {
					v, _ := json.Marshal(img)
					patch = append(patch, abi.PatchOperation{Op: "replace", Path: fmt.Sprintf("/spec/%s/%d/image", f.field, i), Value: v})
				}
			}
		}
		return abi.InitializeResponse{Patch: patch}, nil
	})
}

// mirror rewrites an image reference to pull from the mirror registry: "nginx:1.27"
// becomes "<mirror>/library/nginx:1.27", "quay.io/x/y" becomes "<mirror>/x/y".
func mirror(registry, image string) string {
	if image == "" || strings.HasPrefix(image, registry+"/") {
		return image
	}
	first, rest, ok := strings.Cut(image, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return registry + "/" + rest
	}
	if !ok {
		return registry + "/library/" + image
	}
	return registry + "/" + image
}

func main() {}
