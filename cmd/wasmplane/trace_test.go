package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/trace"
)

// TestPrintTraceOfAPendingPod checks how a pod that was never bound reads: the scheduler's
// folded attempts with the profile, the rejecting Filter plugin and its count.
func TestPrintTraceOfAPendingPod(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := &resources.PodTrace{Recorded: true, Steps: []trace.Step{
		{Time: t0, Component: "storage", Step: "create", Result: "stored"},
		{Time: t0.Add(10 * time.Millisecond), Duration: time.Millisecond, Component: "scheduler", Step: "schedule", Result: "unschedulable",
			Detail: `{"profile":"default-scheduler","nodes":3,"feasible":0,"rejected":{"NodeAffinity":{"nodes":3,"reasons":["node(s) didn't match Pod's node affinity/selector"]}},` +
				`"message":"0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}`,
			Count: 4, Last: t0.Add(12 * time.Second)},
		{Time: t0.Add(20 * time.Millisecond), Component: "scheduler", Step: "schedule", Result: "unschedulable",
			Detail: `{"profile":"default-scheduler","nodes":0,"feasible":0,"message":"no nodes available to schedule pods"}`},
	}}
	var b bytes.Buffer
	if err := printTrace(&b, tr); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"profile default-scheduler: 0/3 nodes feasible; NodeAffinity rejected 3 (node(s) didn't match Pod's node affinity/selector); 4 attempts, the last at +12s",
		"profile default-scheduler: 0/0 nodes feasible; no nodes available to schedule pods",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
