// Command node-label-filter is a wasmplane scheduler filter plugin: a pod fits only on
// nodes that carry the label named in the configuration (with one of the listed values,
// when values are given).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/filter"
	"github.com/wasmplane/wasmplane/sdk/go/wasmplane"
)

type config struct {
	Label  string   `json:"label"`
	Values []string `json:"values"`
}

var cfg config

func init() {
	wasmplane.RegisterConfigure(func(req *abi.ConfigureRequest) error {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return err
		}
		if cfg.Label == "" {
			return errors.New("config.label is required")
		}
		return nil
	})
	// The decision depends on the node alone, so it is made once per node version and
	// kept with the node (filter.RegisterPrepared); each pod then reads it back.
	filter.RegisterPrepared(judge, func(_ *abi.Pod, _ *abi.Node, v verdict) (bool, string) { return v.ok, v.reason })
}

// verdict is a node's answer, the same for every pod.
type verdict struct {
	ok     bool
	reason string
}

func judge(node *abi.Node) verdict {
	v, ok := node.Metadata.Labels[cfg.Label]
	if !ok {
		return verdict{reason: fmt.Sprintf("node lacks label %q", cfg.Label)}
	}
	if len(cfg.Values) > 0 && !slices.Contains(cfg.Values, v) {
		return verdict{reason: fmt.Sprintf("node label %s=%s is not one of %v", cfg.Label, v, cfg.Values)}
	}
	return verdict{ok: true}
}

func main() {}
