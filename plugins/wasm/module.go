package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// Digest returns the lowercase hex sha256 of a module's bytes, its content address.
func Digest(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// Module is a compiled, ABI-checked module. Modules are shared by digest: compiling the
// same bytes twice returns the same compiled code. Close releases the caller's reference.
type Module struct {
	e *moduleEntry
}

type moduleEntry struct {
	r        *Runtime
	digest   string
	size     int
	compiled wazero.CompiledModule
	hooks    hookSet
	hasFree  bool
	hasInit  bool
	minPages uint32
	// instrumented says the module carries the fuel checks (instrument.go).
	instrumented bool
	// opa says the module is a Rego policy built by OPA (opa.go).
	opa bool
	// regoInput is the part of the request an OPA module's policy may read, as its build
	// recorded it (opainput.go); nil for the whole request.
	regoInput *Members
	refs      int // guarded by r.mu
	ready     chan struct{}
	err       error
}

// Digest returns the module's sha256.
func (m *Module) Digest() string { return m.e.digest }

// Size returns the module's length in bytes.
func (m *Module) Size() int { return m.e.size }

// Hooks returns the hooks the module exports, in ABI order.
func (m *Module) Hooks() []string {
	var hs []string
	for _, h := range abi.Hooks {
		if m.e.hooks.has(h) {
			hs = append(hs, h)
		}
	}
	return hs
}

// Implements tells whether the module exports hook.
func (m *Module) Implements(hook string) bool { return m.e.hooks.has(hook) }

// Close releases this reference; the compiled code is freed when no Module or plugin
// uses it any more.
func (m *Module) Close(ctx context.Context) error {
	if m.e == nil {
		return nil
	}
	e := m.e
	m.e = nil
	return e.release(ctx)
}

func (e *moduleEntry) acquire() *Module {
	e.r.mu.Lock()
	e.refs++
	e.r.mu.Unlock()
	return &Module{e: e}
}

func (e *moduleEntry) release(ctx context.Context) error {
	r := e.r
	r.mu.Lock()
	e.refs--
	last := e.refs == 0
	if last && r.modules[e.digest] == e {
		delete(r.modules, e.digest)
	}
	r.mu.Unlock()
	if last && e.compiled != nil {
		if err := e.compiled.Close(ctx); err != nil {
			return fmt.Errorf("wasm: close module %s: %w", e.digest, err)
		}
	}
	return nil
}

// Compile checks wasm against its pinned digest (when digest is not empty), compiles it
// once per digest and checks the ABI v1 shape of its imports and exports.
func (r *Runtime) Compile(ctx context.Context, wasm []byte, digest string) (*Module, error) {
	got := Digest(wasm)
	if digest != "" && !strings.EqualFold(strings.TrimPrefix(digest, "sha256:"), got) {
		return nil, &Error{Plugin: got[:12], Kind: ErrInvalidModule, Err: fmt.Errorf("digest mismatch: pinned %s, bytes are %s", digest, got)}
	}
	r.mu.Lock()
	e, ok := r.modules[got]
	if !ok {
		e = &moduleEntry{r: r, digest: got, size: len(wasm), refs: 1, ready: make(chan struct{})}
		r.modules[got] = e
		r.mu.Unlock()
		e.err = e.compile(ctx, wasm)
		if e.err != nil {
			r.mu.Lock()
			delete(r.modules, got)
			r.mu.Unlock()
		}
		close(e.ready)
		if e.err != nil {
			return nil, e.err
		}
		return &Module{e: e}, nil
	}
	e.refs++
	r.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		_ = e.release(ctx)
		return nil, fmt.Errorf("wasm: waiting for compilation of %s: %w", got, ctx.Err())
	}
	if e.err != nil {
		// The failed entry is gone from the map; compile again only if asked again.
		return nil, e.err
	}
	return &Module{e: e}, nil
}

func (e *moduleEntry) compile(ctx context.Context, wasm []byte) error {
	if isOPA(wasm) {
		tree, err := readRegoInput(wasm)
		if err != nil {
			return &Error{Plugin: e.digest[:12], Kind: ErrInvalidModule, Err: fmt.Errorf("OPA module: %w", err)}
		}
		e.regoInput = tree
		ow, err := ownMemory(wasm)
		if err != nil {
			return &Error{Plugin: e.digest[:12], Kind: ErrInvalidModule, Err: fmt.Errorf("OPA module: %w", err)}
		}
		wasm, e.opa = ow, true
	}
	if e.r.cfg.termination == termCheckpoint {
		iw, err := instrument(wasm)
		if err != nil {
			return &Error{Plugin: e.digest[:12], Kind: ErrInvalidModule, Err: fmt.Errorf("instrument: %w", err)}
		}
		wasm, e.instrumented = iw, true
	}
	cm, err := e.r.rt.CompileModule(ctx, wasm)
	if err != nil {
		return &Error{Plugin: e.digest[:12], Kind: ErrInvalidModule, Err: fmt.Errorf("compile: %w", err)}
	}
	check := e.check
	if e.opa {
		check = e.checkOPA
	}
	if err := check(cm); err != nil {
		_ = cm.Close(ctx)
		var werr *Error
		if errors.As(err, &werr) {
			return werr
		}
		return &Error{Plugin: e.digest[:12], Kind: ErrInvalidModule, Err: err}
	}
	e.compiled = cm
	return nil
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

func sig(d api.FunctionDefinition, params, results []api.ValueType) bool {
	return slices.Equal(d.ParamTypes(), params) && slices.Equal(d.ResultTypes(), results)
}

// check enforces ABI v1 §1–§5 on what can be seen without running the module.
func (e *moduleEntry) check(cm wazero.CompiledModule) error {
	for _, d := range cm.ImportedFunctions() {
		mod, name, _ := d.Import()
		switch mod {
		case "wasi_snapshot_preview1":
		case abi.HostModule:
			ok := name == abi.HostLog && sig(d, []api.ValueType{i32, i32, i32}, nil) ||
				e.instrumented && name == checkpointImport && sig(d, nil, nil)
			if !ok {
				return fmt.Errorf("imports %s.%s, which this host does not grant", mod, name)
			}
		default:
			return fmt.Errorf("imports %s.%s: only %s and wasi_snapshot_preview1 are provided", mod, name, abi.HostModule)
		}
	}
	if len(cm.ImportedMemories()) > 0 {
		return fmt.Errorf("imports a memory; it must define and export its own")
	}
	mems := cm.ExportedMemories()
	mem, ok := mems[abi.ExportMemory]
	if !ok {
		return fmt.Errorf("does not export its memory as %q", abi.ExportMemory)
	}
	e.minPages = mem.Min()
	fns := cm.ExportedFunctions()
	if _, ok := fns[abi.ExportStart]; ok {
		if _, ok := fns[abi.ExportInitialize]; !ok {
			return fmt.Errorf("abi: command module (exports _start): build a reactor (see sdk/ABI.md §1)")
		}
	}
	if d, ok := fns[abi.ExportInitialize]; ok {
		if !sig(d, nil, nil) {
			return fmt.Errorf("_initialize must be () -> ()")
		}
		e.hasInit = true
	}
	if d, ok := fns[abi.ExportVersion]; !ok || !sig(d, nil, []api.ValueType{i32}) {
		return &Error{Plugin: e.digest[:12], Kind: ErrABIVersion, Err: fmt.Errorf("abi: module does not export %s: () -> i32; it is not a wasmplane plugin", abi.ExportVersion)}
	}
	if d, ok := fns[abi.ExportAlloc]; !ok || !sig(d, []api.ValueType{i32}, []api.ValueType{i32}) {
		return fmt.Errorf("abi: module does not export %s: (i32) -> i32", abi.ExportAlloc)
	}
	if d, ok := fns[abi.ExportFree]; ok {
		if !sig(d, []api.ValueType{i32, i32}, nil) {
			return fmt.Errorf("abi: %s must be (i32, i32) -> ()", abi.ExportFree)
		}
		e.hasFree = true
	}
	e.hooks = hookSet{}
	for _, h := range abi.Hooks {
		d, ok := fns[h]
		if !ok {
			continue
		}
		if !sig(d, []api.ValueType{i32, i32}, []api.ValueType{i64}) {
			return fmt.Errorf("abi: hook %s must be (i32, i32) -> i64", h)
		}
		e.hooks.add(h)
	}
	return nil
}
