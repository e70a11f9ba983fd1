package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

const (
	maxLogMessage  = 4096
	maxLogsPerCall = 64
	inputAlign     = 4096
)

// instance is one instantiated module. It is used by one call at a time.
type instance struct {
	set   *instanceSet
	name  string
	mod   api.Module
	mem   *limitedMemory
	alloc api.Function
	free  api.Function
	hooks [numHooks]api.Function
	stack [2]uint64

	inPtr, inCap uint32

	hook    string // hook being called, for logs
	logs    int
	dropped int
	lastMem int

	// table is the host's view of the guest's node table (ABI §7.6).
	table *nodeTable
	// reqBuf is reused to build requests.
	reqBuf []byte
	// shaped says the request of the call under way was written in the shape the
	// module reads (RequestForm.Members): an OPA policy's host need not project it.
	shaped bool

	// fuel is the global instrument added, which the guest counts down to its next
	// checkpoint (checkpoint.go); nil until the first checkpoint.
	fuel api.MutableGlobal
	// The call in flight, as its checkpoints see it: they run on the call's goroutine.
	armed    bool
	deadline time.Time
	ctx      context.Context
	// fired is why a checkpoint ended the last call, or nil.
	fired error

	// opa is set for a Rego policy (opa.go): its calls go through OPA's ABI.
	opa *opaInstance
}

// newInstance instantiates, starts, version-checks and configures one instance.
func (s *instanceSet) newInstance(ctx context.Context) (_ *instance, err error) {
	p := s.p
	r := p.r
	e := s.mod.e
	in := &instance{
		set:  s,
		name: p.label + "#" + strconv.FormatUint(r.seq.Add(1), 10),
		mem:  newGuestMemory(p.limits.MemoryBytes),
	}
	ctx, cancel := context.WithTimeout(ctx, p.limits.InitTimeout)
	defer cancel()
	ictx := experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(_, _ uint64) experimental.LinearMemory { return in.mem }))
	cfg := wazero.NewModuleConfig().
		WithName(in.name).
		WithStartFunctions(). // _initialize is called below, under our own error handling
		WithStdout(&lineWriter{in: in, level: slog.LevelDebug, stream: "stdout"}).
		WithStderr(&lineWriter{in: in, level: slog.LevelWarn, stream: "stderr"})
	r.instances.Store(in.name, in)
	defer func() {
		if err != nil {
			in.close(context.WithoutCancel(ctx))
		}
	}()
	in.hook = "instantiate"
	// Armed from here: a start function runs during instantiation.
	deadline, _ := ctx.Deadline()
	in.arm(ctx, deadline)
	mod, err := r.rt.InstantiateModule(ictx, e.compiled, cfg)
	if err != nil {
		in.disarm()
		return nil, in.classify(ctx, err)
	}
	in.mod = mod
	if e.opa {
		in.hook = "opa_init"
		err := in.initOPA(ctx)
		in.disarm()
		if err != nil {
			return nil, err
		}
		validate, _ := hookOf(abi.HookValidate)
		in.hooks[validate] = mod.ExportedFunction("opa_eval")
		in.lastMem = in.mem.size()
		p.r.metrics.instanceAdded(p, in.lastMem)
		return in, nil
	}
	var res []uint64
	if e.hasInit {
		in.hook = abi.ExportInitialize
		_, err = mod.ExportedFunction(abi.ExportInitialize).Call(ctx)
		if err != nil {
			err = in.classify(ctx, fmt.Errorf("_initialize: %w", err))
		}
	}
	if err == nil {
		in.hook = abi.ExportVersion
		res, err = mod.ExportedFunction(abi.ExportVersion).Call(ctx)
		if err != nil {
			err = in.classify(ctx, fmt.Errorf("%s: %w", abi.ExportVersion, err))
		}
	}
	in.disarm()
	if err != nil {
		return nil, err
	}
	if v := int32(res[0]); v != abi.Version {
		return nil, &Error{Plugin: p.label, Kind: ErrABIVersion, Err: fmt.Errorf("abi: module speaks wasmplane ABI version %d; this host speaks %d", v, abi.Version)}
	}
	in.alloc = mod.ExportedFunction(abi.ExportAlloc)
	if e.hasFree {
		in.free = mod.ExportedFunction(abi.ExportFree)
	}
	for i, h := range abi.Hooks {
		if e.hooks[i] {
			in.hooks[i] = mod.ExportedFunction(h)
		}
	}
	if e.hooks.has(abi.HookConfigure) {
		var resp abi.ConfigureResponse
		req, err := encodeJSON(abi.ConfigureRequest{Plugin: abi.PluginRef{Name: p.cfg.Name, Namespace: p.cfg.Namespace}, Config: p.config})
		if err != nil {
			return nil, &Error{Plugin: p.label, Hook: abi.HookConfigure, Kind: ErrInvalidModule, Err: err}
		}
		err = in.call(ctx, deadline, abi.HookConfigure, req, func(out []byte) error { return decodeResponse(out, &resp) })
		if err != nil {
			var guest *Error
			if errors.As(err, &guest) && guest.Kind == ErrGuest {
				return nil, &Error{Plugin: p.label, Hook: abi.HookConfigure, Kind: ErrConfigRejected, Err: guest.Err}
			}
			return nil, err
		}
		reads, err := declaredReads(resp.Reads)
		if err != nil {
			return nil, &Error{Plugin: p.label, Hook: abi.HookConfigure, Kind: ErrInvalidModule, Err: fmt.Errorf("configure answer: %w", err)}
		}
		in.setFlags(resp, reads)
	}
	in.lastMem = in.mem.size()
	p.r.metrics.instanceAdded(p, in.lastMem)
	return in, nil
}

func (in *instance) setFlags(resp abi.ConfigureResponse, reads *Members) {
	s := in.set
	s.flagsOnce.Do(func() { s.flags, s.reads = resp, reads })
	if resp.NodeTable {
		in.table = newNodeTable(resp.Packed)
	}
}

// close frees the instance. It is safe to call on a half-built instance.
func (in *instance) close(ctx context.Context) {
	r := in.set.p.r
	r.instances.Delete(in.name)
	if in.mod != nil {
		_ = in.mod.Close(ctx)
		in.set.p.r.metrics.instanceRemoved(in.set.p, in.lastMem)
	}
	in.mod = nil
}

// call runs one hook with the request bytes and hands the guest's answer to decode while
// the answer is still in guest memory (so large answers are not copied).
func (in *instance) call(ctx context.Context, deadline time.Time, hook string, req []byte, decode func([]byte) error) error {
	p := in.set.p
	var fn api.Function
	if id, ok := hookOf(hook); ok {
		fn = in.hooks[id]
	}
	if fn == nil {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrNotImplemented}
	}
	if len(req) > p.limits.MaxInputBytes {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrInputTooLarge, Err: fmt.Errorf("request is %d bytes, limit %d", len(req), p.limits.MaxInputBytes)}
	}
	in.hook, in.logs, in.dropped = hook, 0, 0
	in.arm(ctx, deadline)
	defer in.disarm()
	if in.opa != nil {
		err := in.callOPA(ctx, hook, req, decode)
		if err == nil {
			in.memoryChanged()
		}
		return err
	}
	if uint32(len(req)) > in.inCap {
		if in.inPtr != 0 && in.free != nil {
			in.stack[0], in.stack[1] = uint64(in.inPtr), uint64(in.inCap)
			if err := in.free.CallWithStack(ctx, in.stack[:]); err != nil {
				return in.classify(ctx, fmt.Errorf("%s: %w", abi.ExportFree, err))
			}
		}
		size := (uint32(len(req)) + inputAlign - 1) &^ (inputAlign - 1)
		in.inPtr, in.inCap = 0, 0
		in.stack[0] = uint64(size)
		if err := in.alloc.CallWithStack(ctx, in.stack[:]); err != nil {
			return in.classify(ctx, fmt.Errorf("%s: %w", abi.ExportAlloc, err))
		}
		ptr := uint32(in.stack[0])
		if ptr == 0 {
			return &Error{Plugin: p.label, Hook: hook, Kind: ErrOutOfMemory, Err: fmt.Errorf("%s(%d) returned 0", abi.ExportAlloc, size)}
		}
		in.inPtr, in.inCap = ptr, size
	}
	// A request built in place (inputBuffer) is there already: nothing to copy.
	if !in.holdsInput(req) && !in.mod.Memory().Write(in.inPtr, req) {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrBadOutput, Err: fmt.Errorf("%s returned %#x, outside memory", abi.ExportAlloc, in.inPtr)}
	}
	in.stack[0], in.stack[1] = uint64(in.inPtr), uint64(len(req))
	if err := fn.CallWithStack(ctx, in.stack[:]); err != nil {
		return in.classify(ctx, err)
	}
	outPtr, outLen := uint32(in.stack[0]>>32), uint32(in.stack[0])
	if in.dropped > 0 {
		p.logs.Log(ctx, p.r.log, p.label, slog.LevelWarn, "plugin log messages dropped", "plugin", p.label, "hook", hook, "dropped", in.dropped)
	}
	if outLen == 0 {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrBadOutput, Err: errors.New("empty answer")}
	}
	if int(outLen) > p.limits.MaxOutputBytes {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrOutputTooLarge, Err: fmt.Errorf("answer is %d bytes, limit %d", outLen, p.limits.MaxOutputBytes)}
	}
	out, ok := in.guestBytes(outPtr, outLen)
	if !ok {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrBadOutput, Err: fmt.Errorf("answer [%#x, +%d) is outside memory", outPtr, outLen)}
	}
	if err := decode(out); err != nil {
		var g guestError
		if errors.As(err, &g) {
			return &Error{Plugin: p.label, Hook: hook, Kind: ErrGuest, Err: err}
		}
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrBadOutput, Err: err}
	}
	in.memoryChanged()
	return nil
}

// inputBuffer returns the instance's input buffer in guest memory, empty, for a request
// to be appended to; nil when it has none yet (the first call allocates it). An OPA
// policy takes its input otherwise (the host writes the input document around the
// request): its buffer is reqBuf, on the Go heap, kept from call to call (keptInput), so
// that a call allocates nothing there (a fresh buffer on every call is, with the caches
// cold, a page fault as often as not). A request that outgrows the buffer is appended on
// the Go heap instead and copied as any other.
func (in *instance) inputBuffer() []byte {
	if in.opa != nil {
		return in.reqBuf[:0]
	}
	if in.inPtr == 0 {
		return nil
	}
	b, ok := in.guestBytes(in.inPtr, in.inCap)
	if !ok {
		return nil
	}
	return b[:0]
}

// keptInput keeps, as an OPA instance's input buffer, a request appended to it that
// outgrew it: the next one of that size needs no new buffer.
func (in *instance) keptInput(req []byte) {
	if in.opa != nil && cap(req) > cap(in.reqBuf) {
		in.reqBuf = req[:0]
	}
}

// holdsInput tells whether req is the start of the instance's input buffer, where
// inputBuffer's caller wrote it.
func (in *instance) holdsInput(req []byte) bool {
	if len(req) == 0 || in.inPtr == 0 {
		return false
	}
	b, ok := in.guestBytes(in.inPtr, 1)
	return ok && &b[0] == &req[0]
}

// guestBytes returns the guest's memory [ptr, ptr+n), capacity n, read from the buffer
// the instance's linear memory lives in (limitedMemory, which wazero runs the module on)
// rather than through the module's Memory interface: the same bytes for one slice
// expression, on a call path that runs with the caches cold. Not for OPA policies, whose
// memory the host's env module provides. False if the range is outside memory.
func (in *instance) guestBytes(ptr, n uint32) ([]byte, bool) {
	b := in.mem.buf
	end := uint64(ptr) + uint64(n)
	if end > uint64(len(b)) {
		return nil, false
	}
	return b[ptr:end:end], true
}

// memoryChanged reports a change of the instance's memory to the metrics.
func (in *instance) memoryChanged() {
	if m := in.mem.size(); m != in.lastMem {
		in.set.p.r.metrics.memoryChanged(in.set.p, m-in.lastMem)
		in.lastMem = m
	}
}

// classify turns an error from running guest code into a typed error.
func (in *instance) classify(ctx context.Context, err error) error {
	p := in.set.p
	kind := ErrTrap
	var exit *sys.ExitError
	switch {
	case in.mem.refused:
		kind = ErrOutOfMemory
		err = fmt.Errorf("memory limit of %d bytes reached: %w", in.mem.max, err)
	case in.fired != nil:
		kind = ErrTimeout
		err = fmt.Errorf("interrupted by the host: %w (%w)", err, in.fired)
	case errors.As(err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled):
		kind = ErrTimeout
		if cerr := context.Cause(ctx); cerr != nil {
			err = fmt.Errorf("%w (%w)", err, cerr)
		}
	case ctx.Err() != nil:
		kind = ErrTimeout
	}
	return &Error{Plugin: p.label, Hook: in.hook, Kind: kind, Err: err}
}

func (in *instance) logMessage(ctx context.Context, level slog.Level, msg string) {
	if in.logs >= maxLogsPerCall {
		in.dropped++
		return
	}
	in.logs++
	p := in.set.p
	p.logs.Log(ctx, p.r.log, p.label, level, msg, "plugin", p.label, "hook", in.hook)
}

// lineWriter turns a guest's stdout or stderr into log lines.
type lineWriter struct {
	in     *instance
	level  slog.Level
	stream string
	buf    []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			room := maxLogMessage - len(w.buf)
			if room > 0 {
				w.buf = append(w.buf, b[:min(room, len(b))]...)
			}
			break
		}
		w.buf = append(w.buf, b[:i]...)
		b = b[i+1:]
		w.in.logMessage(context.Background(), w.level, w.stream+": "+string(w.buf[:min(len(w.buf), maxLogMessage)]))
		w.buf = w.buf[:0]
	}
	return n, nil
}
