// Command strategy-score is a wasmplane scheduler score plugin with two placement
// strategies chosen by its configuration: {"strategy":"spread"} prefers the node whose
// CPU is least requested, {"strategy":"binpack"} the most requested one. Applying the
// plugin object with the other strategy switches the scheduler's behaviour live.
package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/score"
	"github.com/wasmplane/wasmplane/sdk/go/wasmplane"
)

type config struct {
	Strategy string `json:"strategy"`
}

var cfg config

func init() {
	// The scores depend on what already runs on each node: ask the host for it.
	wasmplane.RequestRequested()
	wasmplane.RegisterConfigure(func(req *abi.ConfigureRequest) error {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return err
		}
		switch cfg.Strategy {
		case "spread", "binpack":
			return nil
		}
		return fmt.Errorf(`config.strategy must be "spread" or "binpack", not %q`, cfg.Strategy)
	})
	score.Register(func(req *abi.SchedulingRequest) ([]int64, error) {
		scores := make([]int64, len(req.Nodes))
		for i, n := range req.Nodes {
			var used int64
			if i < len(req.Requested) {
				used = req.Requested[i]["cpu"]
			}
			scores[i] = strategyScore(cfg.Strategy, used, milliCPU(n.Status.Allocatable["cpu"]))
		}
		return scores, nil
	})
}

// strategyScore is the native twin's arithmetic (examples/scheduling/native).
func strategyScore(mode string, requested, allocatable int64) int64 {
	if allocatable <= 0 {
		return 0
	}
	used := min(requested*100/allocatable, 100)
	if mode == "binpack" {
		return used
	}
	return 100 - used
}

// milliCPU parses a CPU quantity as the API serializes it ("4", "3800m", "1.5"); anything
// else counts as 0.
func milliCPU(q string) int64 {
	if m, ok := strings.CutSuffix(q, "m"); ok {
		v, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return 0
		}
		return v
	}
	v, err := strconv.ParseFloat(q, 64)
	if err != nil {
		return 0
	}
	return int64(v * 1000)
}

func main() {}
