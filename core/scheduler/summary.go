package scheduler

import (
	"slices"
	"strings"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
)

// summaryKey keeps the summary in the cycle state until the binder reads it.
const summaryKey = framework.SummaryKey

// topNodes is how many of the best nodes the summary lists with their per-plugin scores.
const topNodes = 3

// Summary is what one scheduling decision looked like, small enough to ship on a Binding:
// counts and top reasons per Filter plugin, and the best nodes' per-plugin scores — not
// thousands of node rows.
type Summary struct {
	Profile  string                   `json:"profile"`
	Nodes    int                      `json:"nodes"`
	Feasible int                      `json:"feasible"`
	Rejected map[string]RejectSummary `json:"rejected,omitempty"`
	Top      []NodeScore              `json:"top,omitempty"`
	Winner   string                   `json:"winner,omitempty"`
	// Message is a failed attempt's reason as the FailedScheduling event words it
	// ("0/N nodes are available: …"); empty when the pod was bound.
	Message string `json:"message,omitempty"`
}

// RejectSummary is how many nodes one Filter plugin rejected, and its commonest reasons.
type RejectSummary struct {
	Nodes   int      `json:"nodes"`
	Reasons []string `json:"reasons,omitempty"`
}

// NodeScore is one node's total and per-plugin weighted scores.
type NodeScore struct {
	Node   string           `json:"node"`
	Total  int64            `json:"total"`
	Scores map[string]int64 `json:"scores,omitempty"`
}

// Clone implements framework.StateData.
func (s *Summary) Clone() framework.StateData { return s }

// newSummary summarizes a cycle's filtering and scoring.
func newSummary(profile string, all, feasible int, diag framework.Diagnosis, scores []framework.NodePluginScores, winner string) *Summary {
	sum := &Summary{Profile: profile, Nodes: all, Feasible: feasible, Winner: winner}
	if len(diag.NodeToStatus) > 0 {
		type tally struct {
			nodes   int
			reasons map[string]int
		}
		per := map[string]*tally{}
		for _, st := range diag.NodeToStatus {
			p := st.Plugin()
			t := per[p]
			if t == nil {
				t = &tally{reasons: map[string]int{}}
				per[p] = t
			}
			t.nodes++
			t.reasons[st.Message()]++
		}
		sum.Rejected = map[string]RejectSummary{}
		for p, t := range per {
			reasons := make([]string, 0, len(t.reasons))
			for r := range t.reasons {
				reasons = append(reasons, r)
			}
			slices.SortFunc(reasons, func(a, b string) int {
				if t.reasons[a] != t.reasons[b] {
					return t.reasons[b] - t.reasons[a]
				}
				return strings.Compare(a, b)
			})
			sum.Rejected[p] = RejectSummary{Nodes: t.nodes, Reasons: reasons[:min(len(reasons), 3)]}
		}
	}
	// The best few nodes by total score, found without sorting them all.
	best := make([]framework.NodePluginScores, 0, topNodes+1)
	for _, s := range scores {
		i, _ := slices.BinarySearchFunc(best, s, func(a, b framework.NodePluginScores) int {
			return int(b.TotalScore - a.TotalScore)
		})
		if i < topNodes {
			best = slices.Insert(best, i, s)
			if len(best) > topNodes {
				best = best[:topNodes]
			}
		}
	}
	for _, s := range best {
		ns := NodeScore{Node: s.Name, Total: s.TotalScore, Scores: map[string]int64{}}
		for _, p := range s.Scores {
			ns.Scores[p.Name] = p.Score
		}
		sum.Top = append(sum.Top, ns)
	}
	return sum
}
