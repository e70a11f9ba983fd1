// Command label-score is a wasmplane scheduler score plugin: it prefers nodes by the
// numeric value of a label named in the configuration (0–100; missing or invalid is 0).
package main

import (
	"encoding/json"
	"errors"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/score"
	"github.com/wasmplane/wasmplane/sdk/go/wasmplane"
)

type config struct {
	Label string `json:"label"`
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
	// The score depends on the node alone, so it is computed once per node version and
	// kept with the node (score.RegisterNodeScore); each pod then reads it back.
	score.RegisterNodeScore(func(node *abi.Node) int64 { return labelScore(node.Metadata.Labels[cfg.Label]) })
}

// labelScore turns a label value into a score: its integer value clamped to 0–100.
// The benchmark's native twin (examples/plugins/go/examples_test.go) is the same code.
func labelScore(v string) int64 {
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
		if n > 100 {
			return 100
		}
	}
	return n
}

func main() {}
