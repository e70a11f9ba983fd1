package scheduler

import (
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/noderesources"
)

// strategyOf returns the scoring strategy of a profile's NodeResourcesFit.
func strategyOf(t *testing.T, s *Scheduler, profile string) string {
	t.Helper()
	f, ok := s.Profile(profile).Plugins().Plugin(names.NodeResourcesFit).(*noderesources.Fit)
	if !ok {
		t.Fatalf("profile %s has no NodeResourcesFit", profile)
	}
	return f.Strategy()
}
