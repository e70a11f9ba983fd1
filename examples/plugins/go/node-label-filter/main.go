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
	// kept with the node (filter.RegisterNodeVerdict); each pod then reads it back.
	filter.RegisterNodeVerdict(judge)
}

// judge is a node's answer, the same for every pod.
func judge(node *abi.Node) (ok bool, reason string) {
	v, ok := node.Metadata.Labels[cfg.Label]
	if !ok {
		return false, fmt.Sprintf("node lacks label %q", cfg.Label)
	}
	if len(cfg.Values) > 0 && !slices.Contains(cfg.Values, v) {
		return false, fmt.Sprintf("node label %s=%s is not one of %v", cfg.Label, v, cfg.Values)
	}
	return true, ""
}

func main() {}
