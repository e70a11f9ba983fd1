package wasi

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// Spinning WASI commands: one loops forever, the other never loops but recurses
// exponentially (only function entries can stop it).
const (
	spinLoop = `(module (memory (export "memory") 1)
		(func (export "_start") (loop $l (br $l))))`
	spinRecurse = `(module (memory (export "memory") 1)
		(func $fib (param $n i32) (result i32)
			(if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
				(then (local.get $n))
				(else (i32.add
					(call $fib (i32.sub (local.get $n) (i32.const 1)))
					(call $fib (i32.sub (local.get $n) (i32.const 2)))))))
		(func (export "_start") (drop (call $fib (i32.const 90)))))`
)

// TestSpinningContainersDoNotStarveTheRuntime starts 4 × GOMAXPROCS containers that
// spin forever (half looping, half recursing) and checks that the CRI server keeps
// answering meanwhile — every ListContainers and ContainerStatus within a second (before
// the fuel checks a recursing container froze the test) — that every container gets CPU
// time although the gate runs fewer at once, and that StopContainer stops every one of
// them within 5 s. The spinners share the CPU with the server, as a
// container's processes share a node's; the figures, beside the same calls with no
// container running, are logged.
func TestSpinningContainersDoNotStarveTheRuntime(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	for name, src := range map[string]string{"spin-loop": spinLoop, "spin-recurse": spinRecurse} {
		p := filepath.Join(dir, name+".wasm")
		if err := os.WriteFile(p, wasmtest.WATSource(t, src), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.Images().ImportFile(ctxT(t), p, name); err != nil {
			t.Fatal(err)
		}
	}
	sb := e.runSandbox(t, "spinners", nil)
	n := 4 * runtime.GOMAXPROCS(0)
	var ids []string
	for i := range n {
		image := []string{"spin-loop", "spin-recurse"}[i%2]
		ids = append(ids, e.createContainer(t, sb, image+"-"+strconv.Itoa(i), ctrOpts{image: image}))
	}
	// poll calls ListContainers and ContainerStatus 20 times each and returns their times.
	poll := func() []time.Duration {
		var took []time.Duration
		for range 20 {
			for _, call := range []func() error{
				func() error {
					_, err := e.rt.ListContainers(ctxT(t), &runtimeapi.ListContainersRequest{})
					return err
				},
				func() error {
					_, err := e.rt.ContainerStatus(ctxT(t), &runtimeapi.ContainerStatusRequest{ContainerId: ids[len(ids)-1]})
					return err
				},
			} {
				start := time.Now()
				if err := call(); err != nil {
					t.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			time.Sleep(10 * time.Millisecond)
		}
		slices.Sort(took)
		return took
	}
	idle := poll()
	for _, id := range ids {
		e.start(t, id)
	}
	busy := poll()
	worst := busy[len(busy)-1]
	for _, id := range ids {
		if st := e.status(t, id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("%s: state %v (%s), want running", id, st.State, st.Message)
		}
	}
	if worst > time.Second {
		t.Errorf("a CRI call took %v with %d spinning containers", worst, n)
	}
	// The gate lets fewer guests run at once than there are containers: each must still
	// get its turns.
	if cpuAccounting {
		for _, id := range ids {
			err := wait.PollUntilContextTimeout(ctxT(t), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				r, err := e.rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
				if err != nil {
					return false, err
				}
				return r.GetStats().GetCpu().GetUsageCoreNanoSeconds().GetValue() > 0, nil
			})
			if err != nil {
				t.Errorf("%s never ran: %v", id, err)
			}
		}
	}
	// Stop them all at once.
	start := time.Now()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.rt.StopContainer(ctxT(t), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	stopped := time.Since(start)
	for _, id := range ids {
		if st := e.status(t, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Errorf("%s after StopContainer: state %v", id, st.State)
		}
	}
	if stopped > 5*time.Second {
		t.Errorf("stopping %d spinning containers took %v", n, stopped)
	}
	t.Logf("CRI calls with no container running: median %v, slowest %v; with %d spinning: median %v, slowest %v; all stopped in %v",
		idle[len(idle)/2], idle[len(idle)-1], n, busy[len(busy)/2], worst, stopped)
}
