package wasm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// termination selects how a call's deadline stops a guest. Only benchmarks pick another
// mode than the default, to measure what each costs.
type termination int

const (
	// termCheckpoint instruments modules (instrument.go) so that they return into the
	// host's checkpoint at least once per fuelQuantum function entries and loop headers.
	termCheckpoint termination = iota
	// termWazero uses wazero's WithCloseOnContextDone: a goroutine per call and a call
	// out to Go at every loop header.
	termWazero
	// termNone cannot stop a runaway guest; it exists to measure the others against.
	termNone
)

// errUnknownInstance stops guest code that reaches a checkpoint of an instance the host
// no longer knows (closed under it); it cannot happen while the host holds the instance.
var errUnknownInstance = errors.New("checkpoint of an instance the host does not know")

// arm starts a call of in that must end by deadline or when ctx is done. The call's
// checkpoints, which run on the call's own goroutine, read this.
func (in *instance) arm(ctx context.Context, deadline time.Time) {
	in.armed, in.deadline, in.ctx, in.fired = true, deadline, ctx, nil
}

// disarm ends the call.
func (in *instance) disarm() {
	in.armed, in.ctx = false, nil
}

// hostCheckpoint implements wasmplane.checkpoint, which instrumented code calls when its
// fuel runs out. Running it puts the goroutine in Go code, where the scheduler can preempt
// it and a garbage collection can stop it; it yields the P so that other goroutines get
// their turn, refills the fuel, and ends the call (by panicking, which wazero turns into
// the call's error) when its deadline has passed or its caller gave up.
func (r *Runtime) hostCheckpoint(ctx context.Context, mod api.Module, _ []uint64) {
	v, ok := r.instances.Load(mod.Name())
	if !ok {
		panic(errUnknownInstance)
	}
	v.(*instance).checkpoint(mod)
}

func (in *instance) checkpoint(mod api.Module) {
	if in.fuel == nil {
		g, ok := mod.ExportedGlobal(fuelExport).(api.MutableGlobal)
		if !ok {
			panic(errUnknownInstance)
		}
		in.fuel = g
	}
	in.fuel.Set(fuelQuantum)
	if !in.armed {
		return
	}
	switch {
	case !time.Now().Before(in.deadline):
		in.fired = context.DeadlineExceeded
	case in.ctx.Err() != nil:
		in.fired = context.Cause(in.ctx)
	default:
		runtime.Gosched()
		return
	}
	panic(in.fired)
}

// InstantiateCheckpoint gives rt the host function that modules rewritten by Instrument
// import, for runtimes other than the plugin host's (the kubelet's WASI runtime): it
// refills the guest's fuel, calls yield with the context of the guest's call (nil means
// runtime.Gosched), and ends the guest with sys.ExitCodeContextCanceled once that
// context is done or yield fails. The guest's goroutine thus comes back into Go (where
// the scheduler and the garbage collector can stop it, and yield can make it wait its
// turn) at least every fuelQuantum function entries and loop iterations, whether it
// loops or only recurses.
func InstantiateCheckpoint(ctx context.Context, rt wazero.Runtime, yield func(context.Context) error) error {
	_, err := rt.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, _ []uint64) {
			if g, ok := mod.ExportedGlobal(fuelExport).(api.MutableGlobal); ok {
				g.Set(fuelQuantum)
			}
			if ctx.Err() != nil {
				panic(sys.NewExitError(sys.ExitCodeContextCanceled))
			}
			if yield == nil {
				runtime.Gosched()
			} else if yield(ctx) != nil {
				panic(sys.NewExitError(sys.ExitCodeContextCanceled))
			}
		}), nil, nil).
		Export(checkpointImport).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("wasm: instantiate the checkpoint: %w", err)
	}
	return nil
}
