package wasi

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// TestContainerCPUIsTheGuestsThreadTime runs a spinning guest and checks that its CPU
// usage is cumulative, grows while it spins, never exceeds the wall time it ran (one
// thread), and that its pod's usage is the sum of its containers'.
func TestContainerCPUIsTheGuestsThreadTime(t *testing.T) {
	if !cpuAccounting {
		t.Skip("no per-thread CPU clock on this platform")
	}
	e := newEnv(t)
	p := filepath.Join(t.TempDir(), "spin.wasm")
	if err := os.WriteFile(p, wasmtest.WATSource(t, spinLoop), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Images().ImportFile(ctxT(t), p, "spin"); err != nil {
		t.Fatal(err)
	}
	sb := e.runSandbox(t, "burner", nil)
	id := e.createContainer(t, sb, "spin", ctrOpts{image: "spin"})
	usage := func() uint64 {
		resp, err := e.rt.ContainerStats(ctxT(t), &runtimeapi.ContainerStatsRequest{ContainerId: id})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Stats.GetCpu().GetUsageCoreNanoSeconds().GetValue()
	}
	if u := usage(); u != 0 {
		t.Fatalf("created (not started) container: usage %d, want 0", u)
	}
	started := time.Now()
	e.start(t, id)
	var first uint64
	waitFor(t, 10*time.Second, "the spinner to use CPU", func() bool { first = usage(); return first > 0 })
	waitFor(t, 20*time.Second, "the spinner's usage to grow by 50ms", func() bool { return usage() > first+uint64(50*time.Millisecond) })
	if u, wall := usage(), time.Since(started); time.Duration(u) > wall {
		t.Errorf("usage %v exceeds the %v the guest has run", time.Duration(u), wall)
	}
	resp, err := e.rt.PodSandboxStats(ctxT(t), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
	if err != nil {
		t.Fatal(err)
	}
	pod := resp.Stats.GetLinux()
	var sum uint64
	for _, c := range pod.GetContainers() {
		sum += c.GetCpu().GetUsageCoreNanoSeconds().GetValue()
	}
	if got := pod.GetCpu().GetUsageCoreNanoSeconds().GetValue(); got != sum || got == 0 {
		t.Errorf("pod usage %d, want the containers' sum %d (> 0)", got, sum)
	}
}
