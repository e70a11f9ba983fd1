package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/jsonview"
)

// Rego policies arrive as the WebAssembly modules `opa build -t wasm` makes, which speak
// OPA's own ABI rather than wasmplane's: they import their memory and a handful of
// functions from a module "env", and are evaluated through its evaluation context. The host recognises
// such a module when it is compiled and gives it the same pool, limits, checkpoints,
// metrics and hot swap as any plugin; only the instance's set-up and its call differ
// (opaInstance). A Rego plugin implements the validate hook.
//
// Why the memory is rewritten rather than imported: every instance needs its own memory,
// bounded by the plugin's limit and committed as touched (limitedMemory). wazero gives a
// module an allocator for the memories it defines, and resolves imports by module name
// across the runtime. Rewriting the one memory import into a memory the module defines
// (and exports, as wasmplane's ABI wants) keeps one code path for memory; the functions
// stay imports, from a host module "env" every instance shares, which finds the calling
// instance by its module name as wasmplane.log does.

// opaHostModule is where OPA's modules import their memory and host functions from.
const opaHostModule = "env"

// opaImports are the host functions an OPA module may import, by name: the builtin
// dispatchers (by arity), abort and println.
var opaImports = map[string]int{"opa_builtin0": 0, "opa_builtin1": 1, "opa_builtin2": 2, "opa_builtin3": 3, "opa_builtin4": 4,
	"opa_abort": -1, "opa_println": -1}

// opaExports are the functions the host calls. A module of OPA's ABI 1.2 or later also
// exports opa_eval (opaOneShot), which an evaluation takes when the module has it.
var opaExports = [...]string{opaMalloc: "opa_malloc", opaHeapPtrGet: "opa_heap_ptr_get", opaHeapPtrSet: "opa_heap_ptr_set",
	opaJSONDump: "opa_json_dump", opaJSONParse: "opa_json_parse", opaValueDump: "opa_value_dump", opaValueParse: "opa_value_parse",
	opaBuiltins: "builtins", opaEntrypoints: "entrypoints", opaEvalCtxNew: "opa_eval_ctx_new", opaEvalCtxSetInput: "opa_eval_ctx_set_input",
	opaEvalCtxSetData: "opa_eval_ctx_set_data", opaEvalCtxSetEntrypoint: "opa_eval_ctx_set_entrypoint",
	opaEvalCtxGetResult: "opa_eval_ctx_get_result", opaEvalExport: "eval", opaValueAddPath: "opa_value_add_path"}

// opaExport numbers opaExports: an evaluation crosses into the guest about ten times, and
// finding each export by index rather than in a map keyed by its name spares the lookups'
// cache misses on a call that runs with the caches cold.
type opaExport uint8

const (
	opaMalloc opaExport = iota
	opaHeapPtrGet
	opaHeapPtrSet
	opaJSONDump
	opaJSONParse
	opaValueDump
	opaValueParse
	opaBuiltins
	opaEntrypoints
	opaEvalCtxNew
	opaEvalCtxSetInput
	opaEvalCtxSetData
	opaEvalCtxSetEntrypoint
	opaEvalCtxGetResult
	opaEvalExport
	opaValueAddPath
	numOPAExports
)

// String returns the export's name.
func (e opaExport) String() string { return opaExports[e] }

// opaOneShot is the export of OPA's ABI ≥ 1.2 that evaluates in one call: it parses the
// input JSON written in guest memory, evaluates the entrypoint and returns the result
// set's JSON (opaInstance.evalOnce).
const opaOneShot = "opa_eval"

// opaInputHead opens every input document: the AdmissionReview's members, then its
// parameters (the plugin's configuration).
const opaInputHead = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","parameters":`

// opaABIVersion and opaABIMinorVersion are the globals an OPA module tells its ABI by.
const (
	opaABIVersion      = "opa_wasm_abi_version"
	opaABIMinorVersion = "opa_wasm_abi_minor_version"
)

// isOPA reports whether wasm imports its memory from env, as OPA's compiler emits it.
func isOPA(wasm []byte) bool {
	found := false
	_ = eachImport(wasm, func(mod, name string, kind byte) {
		if mod == opaHostModule && name == "memory" && kind == 0x02 {
			found = true
		}
	})
	return found
}

// eachImport calls f for every import of the module.
func eachImport(wasm []byte, f func(mod, name string, kind byte)) error {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return errors.New("not a WebAssembly binary module")
	}
	r := &wreader{b: wasm, off: 8}
	for !r.eof() {
		id := r.byte()
		payload := r.bytes(int(r.u32()))
		if r.err != nil || id != secImport {
			continue
		}
		ir := &wreader{b: payload}
		n := ir.u32()
		for i := uint32(0); i < n && ir.err == nil; i++ {
			mod, name := ir.name(), ir.name()
			kind := ir.byte()
			if !ir.importDesc(kind) {
				return fmt.Errorf("import %d: unknown kind %#x", i, kind)
			}
			f(mod, name, kind)
		}
		return ir.err
	}
	return r.err
}

// ownMemory rewrites an OPA module so that it defines and exports the memory it imported
// from env: the import is dropped (memory indices do not move: it was the only memory),
// a memory section with the same limits is added and the memory exported as "memory".
func ownMemory(wasm []byte) ([]byte, error) {
	const secMemory = 5
	r := &wreader{b: wasm, off: 8}
	out := append(make([]byte, 0, len(wasm)+32), wasm[:8]...)
	emit := func(id byte, payload []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(payload)))
		out = append(out, payload...)
	}
	var limits []byte
	memoryDone, exported := false, false
	addMemory := func() {
		if !memoryDone {
			emit(secMemory, append([]byte{1}, limits...))
			memoryDone = true
		}
	}
	for !r.eof() {
		id := r.byte()
		payload := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		if limits != nil && id != secCustom && order(id) > order(secMemory) {
			addMemory()
		}
		switch id {
		case secImport:
			p, l, err := dropMemoryImport(payload)
			if err != nil {
				return nil, fmt.Errorf("import section: %w", err)
			}
			payload, limits = p, l
		case secMemory:
			return nil, errors.New("the module both imports and defines a memory")
		case secExport:
			// OPA re-exports the memory it imports; a module that does not gets an export.
			if checkExportFree(payload, abi.ExportMemory) == nil {
				payload = appendCount(payload, 1, append(appendName(nil, abi.ExportMemory), 0x02, 0x00))
			}
			exported = true
		}
		emit(id, payload)
	}
	if limits == nil {
		return nil, errors.New("the module does not import env.memory")
	}
	addMemory()
	if !exported {
		emit(secExport, append(binary.AppendUvarint(nil, 1), append(appendName(nil, abi.ExportMemory), 0x02, 0x00)...))
	}
	return out, nil
}

// dropMemoryImport returns the import section without env.memory, and that memory's
// limits as encoded.
func dropMemoryImport(p []byte) ([]byte, []byte, error) {
	r := &wreader{b: p}
	n := r.u32()
	var kept [][]byte
	var limits []byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		start := r.off
		mod, name := r.name(), r.name()
		kind := r.byte()
		desc := r.off
		if !r.importDesc(kind) {
			return nil, nil, fmt.Errorf("import %d: unknown kind %#x", i, kind)
		}
		if kind == 0x02 && mod == opaHostModule && name == "memory" {
			limits = slices.Clone(r.b[desc:r.off])
			continue
		}
		kept = append(kept, r.b[start:r.off])
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	out := binary.AppendUvarint(nil, uint64(len(kept)))
	for _, k := range kept {
		out = append(out, k...)
	}
	return out, limits, nil
}

// importDesc skips the descriptor of an import of the given kind; false for a kind the
// binary format does not have.
func (r *wreader) importDesc(kind byte) bool {
	switch kind {
	case 0x00: // func
		r.u32()
	case 0x01: // table
		r.reftype()
		r.limits()
	case 0x02: // memory
		r.limits()
	case 0x03: // global
		r.valtype()
		r.byte()
	case 0x04: // tag
		r.byte()
		r.u32()
	default:
		return false
	}
	return true
}

func appendName(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// checkOPA checks the shape of a (rewritten) OPA module.
func (e *moduleEntry) checkOPA(cm wazero.CompiledModule) error {
	for _, d := range cm.ImportedFunctions() {
		mod, name, _ := d.Import()
		switch {
		case mod == opaHostModule:
			if _, ok := opaImports[name]; !ok {
				return fmt.Errorf("imports %s.%s, which is no function of OPA's ABI", mod, name)
			}
		case mod == abi.HostModule && e.instrumented && name == checkpointImport:
		default:
			return fmt.Errorf("imports %s.%s: an OPA policy imports from %s only", mod, name, opaHostModule)
		}
	}
	fns := cm.ExportedFunctions()
	for _, name := range opaExports {
		if _, ok := fns[name]; !ok {
			return &Error{Plugin: e.digest[:12], Kind: ErrABIVersion, Err: fmt.Errorf("abi: OPA module does not export %s (built by `opa build -t wasm` with OPA ≥ 0.30?)", name)}
		}
	}
	if m, ok := cm.ExportedMemories()[abi.ExportMemory]; ok {
		e.minPages = m.Min()
	}
	e.opa = true
	e.hooks = hookSet{}
	e.hooks.add(abi.HookValidate)
	return nil
}

// instantiateOPAHost adds the env module OPA policies import their functions from.
func (r *Runtime) instantiateOPAHost(ctx context.Context) error {
	b := r.rt.NewHostModuleBuilder(opaHostModule)
	for name, arity := range opaImports {
		fb := b.NewFunctionBuilder()
		switch {
		case name == "opa_abort":
			fb = fb.WithGoModuleFunction(api.GoModuleFunc(r.opaAbort), []api.ValueType{i32}, nil)
		case name == "opa_println":
			fb = fb.WithGoModuleFunction(api.GoModuleFunc(r.opaPrintln), []api.ValueType{i32}, nil)
		default:
			params := make([]api.ValueType, 2+arity)
			for i := range params {
				params[i] = i32
			}
			fb = fb.WithGoModuleFunction(api.GoModuleFunc(r.opaBuiltin), params, []api.ValueType{i32})
		}
		b = fb.Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("wasm: instantiate the OPA host module: %w", err)
	}
	return nil
}

func (r *Runtime) instanceOf(mod api.Module) *instance {
	v, ok := r.instances.Load(mod.Name())
	if !ok {
		return nil
	}
	return v.(*instance)
}

// cString reads the NUL-terminated string at addr, at most max bytes.
func cString(mem api.Memory, addr uint32, max int) (string, bool) {
	b, ok := cBytes(mem, addr, max)
	return string(b), ok
}

// cBytes is cString's bytes, read in place: valid until the guest runs again.
func cBytes(mem api.Memory, addr uint32, max int) ([]byte, bool) {
	size := mem.Size()
	if addr >= size {
		return nil, false
	}
	b, ok := mem.Read(addr, min(size-addr, uint32(max)))
	if !ok {
		return nil, false
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i], true
	}
	return nil, false
}

// opaAbort ends the evaluation: the policy hit a runtime error (a conflict between
// complete rules' values, for example). The panic unwinds the guest as a trap.
func (r *Runtime) opaAbort(_ context.Context, mod api.Module, stack []uint64) {
	msg, _ := cString(mod.Memory(), api.DecodeU32(stack[0]), maxLogMessage)
	if in := r.instanceOf(mod); in != nil && in.opa != nil {
		in.opa.aborted = msg
	}
	panic(fmt.Errorf("opa_abort: %s", msg))
}

func (r *Runtime) opaPrintln(ctx context.Context, mod api.Module, stack []uint64) {
	msg, _ := cString(mod.Memory(), api.DecodeU32(stack[0]), maxLogMessage)
	if in := r.instanceOf(mod); in != nil {
		in.logMessage(ctx, slog.LevelInfo, "print: "+msg)
	}
}

// opaBuiltin runs a builtin OPA leaves to the host. Arguments and result are values on
// the guest heap, crossed as JSON.
func (r *Runtime) opaBuiltin(ctx context.Context, mod api.Module, stack []uint64) {
	in := r.instanceOf(mod)
	if in == nil || in.opa == nil {
		panic(errors.New("opa builtin called outside an evaluation"))
	}
	id := api.DecodeI32(stack[0])
	b, ok := in.opa.builtins[id]
	if !ok {
		panic(fmt.Errorf("opa builtin %d is not known", id))
	}
	if b.values != nil {
		r.opaValueBuiltin(ctx, in, b, stack)
		return
	}
	args := make([]json.RawMessage, 0, len(stack)-2)
	for _, a := range stack[2:] {
		v, err := in.opa.dump(ctx, in, api.DecodeU32(a))
		if err != nil {
			panic(err)
		}
		args = append(args, v)
	}
	res, err := b.fn(&in.opa.ev, args)
	if err != nil {
		opaUndefined(ctx, in, b.name, err, stack)
		return
	}
	js, err := json.Marshal(res)
	if err != nil {
		panic(fmt.Errorf("%s: %w", b.name, err))
	}
	addr, err := in.opa.parse(ctx, in, js)
	if err != nil {
		panic(err)
	}
	stack[0] = api.EncodeU32(addr)
}

// opaUndefined answers a builtin call that failed as undefined, as OPA's evaluator does
// unless it is asked to be strict (Gatekeeper is not): the rule using it does not hold.
func opaUndefined(ctx context.Context, in *instance, name string, err error, stack []uint64) {
	in.logMessage(ctx, slog.LevelDebug, fmt.Sprintf("builtin %s: %v (undefined)", name, err))
	stack[0] = 0
}

// opaValueBuiltin runs a builtin that tells sets from arrays: its operands and result
// cross in Rego's value syntax (opa_value_dump, opa_value_parse) rather than as JSON.
func (r *Runtime) opaValueBuiltin(ctx context.Context, in *instance, b opaBuiltin, stack []uint64) {
	args := make([]any, 0, len(stack)-2)
	for _, a := range stack[2:] {
		text, err := in.opa.dumpText(ctx, in, opaValueDump, api.DecodeU32(a))
		if err != nil {
			panic(err)
		}
		v, err := parseRegoValue(text)
		if err != nil {
			// An operand this host cannot read (an object with non-string keys).
			opaUndefined(ctx, in, b.name, err, stack)
			return
		}
		args = append(args, v)
	}
	res, err := b.values(&in.opa.ev, args)
	if err != nil {
		opaUndefined(ctx, in, b.name, err, stack)
		return
	}
	addr, err := in.opa.parseWith(ctx, in, opaValueParse, []byte(regoText(res)))
	if err != nil {
		panic(fmt.Errorf("%s: %w", b.name, err))
	}
	stack[0] = api.EncodeU32(addr)
}

// opaInstance is what an instance of an OPA module keeps between calls.
type opaInstance struct {
	entrypoint   string
	entrypointID int32
	dataAddr     uint32
	evalHeap     uint32
	parameters   json.RawMessage
	builtins     map[int32]opaBuiltin
	fn           [numOPAExports]api.Function
	// returns tells which of fn return a value.
	returns [numOPAExports]bool
	// ev is what the builtins of the evaluation under way share.
	ev opaEval
	// project is the part of the request the policy may read; nil for the whole request.
	project *Members
	// projected holds the last projected request (reused: the guest copies it).
	projected []byte
	// allowed is the answer of a plain allow, made once (decode only reads it).
	allowed []byte
	// evalCtx, requestPath and reviewPath are below evalHeap: they outlive evaluations.
	evalCtx, requestPath, reviewPath uint32
	aborted                          string
	maxOut                           int
	// oneShot is the module's opa_eval, nil when its ABI predates it: the evaluation then
	// goes through the evaluation context (eval).
	oneShot api.Function
	// oneShotPays says evalOnce writes the request once: the build recorded that the
	// policy reads it under one name only (input.request or input.review). Written
	// twice, it is parsed twice, which costs more than the crossings opa_eval saves
	// (BenchmarkRegoOneShot, a policy reading most of a 4 KiB pod create under both
	// names: 50 µs against 35 warm, 100 against 87 cold), and it would hold the request
	// twice in the guest's memory.
	oneShotPays bool
	// input holds the last input document evalOnce wrote (reused: the guest copies it).
	input []byte
	// stack holds the arguments and result of call1 and of opa_eval (no export the host
	// calls takes more).
	stack [7]uint64
}

// call1 calls an export of the policy with at most four arguments and returns its one
// result, if it has one. It passes the arguments on the instance's own stack
// (CallWithStack): an evaluation crosses into the guest about ten times, and Call would
// allocate the arguments and the results of each crossing.
func (o *opaInstance) call1(ctx context.Context, export opaExport, args ...uint64) (uint32, error) {
	stack := o.stack[:max(len(args), 1)]
	copy(stack, args)
	if err := o.fn[export].CallWithStack(ctx, stack); err != nil {
		return 0, fmt.Errorf("%s: %w", export, err)
	}
	if !o.returns[export] {
		return 0, nil
	}
	return api.DecodeU32(stack[0]), nil
}

// dump returns the JSON of the value at addr.
func (o *opaInstance) dump(ctx context.Context, in *instance, addr uint32) ([]byte, error) {
	return o.dumpText(ctx, in, opaJSONDump, addr)
}

// dumpText returns the text the guest's dumper (opa_json_dump or opa_value_dump) writes
// for the value at addr.
func (o *opaInstance) dumpText(ctx context.Context, in *instance, dumper opaExport, addr uint32) ([]byte, error) {
	s, err := o.call1(ctx, dumper, uint64(addr))
	if err != nil {
		return nil, err
	}
	str, ok := cString(in.mod.Memory(), s, o.maxOut)
	if !ok {
		return nil, fmt.Errorf("%s: no string within %d bytes at %#x", dumper, o.maxOut, s)
	}
	return []byte(str), nil
}

// parse puts JSON on the guest heap as a value and returns its address.
func (o *opaInstance) parse(ctx context.Context, in *instance, js []byte) (uint32, error) {
	return o.parseWith(ctx, in, opaJSONParse, js)
}

// parseWith puts text on the guest heap as a value, read by parser (opa_json_parse or
// opa_value_parse), and returns its address.
func (o *opaInstance) parseWith(ctx context.Context, in *instance, parser opaExport, text []byte) (uint32, error) {
	p, err := o.call1(ctx, opaMalloc, uint64(len(text)))
	if err != nil {
		return 0, err
	}
	if !in.mod.Memory().Write(p, text) {
		return 0, fmt.Errorf("opa_malloc returned %#x, outside memory", p)
	}
	addr, err := o.call1(ctx, parser, uint64(p), uint64(len(text)))
	if err != nil {
		return 0, err
	}
	if addr == 0 {
		return 0, fmt.Errorf("%s: cannot read %.100q", parser, text)
	}
	return addr, nil
}

// opaConfig is a Rego plugin's configuration (WasmPlugin spec.config).
type opaConfig struct {
	// Entrypoint is the rule evaluated, as `opa build -e` names it (package path with
	// slashes and the rule); needed only when the module was built with several.
	Entrypoint string `json:"entrypoint"`
	// Parameters are passed to the policy as input.parameters, as Gatekeeper passes a
	// constraint's parameters.
	Parameters json.RawMessage `json:"parameters"`
	// CompactPods asks for the compact pod document (ABI §7.5) as the object of requests
	// about Pods, as a plugin of another language asks in its configure answer: for a
	// policy that reads only what that document has (labels, annotations, containers'
	// names, images and resources, …), it is less than half the JSON for OPA to parse on
	// every call.
	CompactPods bool `json:"compactPods"`
	// WholeInput turns off the input projection the build recorded (opainput.go): the
	// policy gets the whole request, as a module built by `opa build` directly does.
	WholeInput bool `json:"wholeInput"`
}

// parseOPAConfig reads a Rego plugin's config. Without a "parameters" member the config
// itself (less "entrypoint", "compactPods" and "wholeInput") is the parameters, so that a plain {"label": "team"} works.
func parseOPAConfig(raw json.RawMessage) (opaConfig, error) {
	cfg := opaConfig{Parameters: json.RawMessage("{}")}
	if len(raw) == 0 || string(raw) == "null" {
		return cfg, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return cfg, fmt.Errorf("Rego plugin config must be a JSON object: %w", err)
	}
	if ep, ok := members["entrypoint"]; ok {
		if err := json.Unmarshal(ep, &cfg.Entrypoint); err != nil {
			return cfg, fmt.Errorf("Rego plugin config: entrypoint must be a string: %w", err)
		}
		delete(members, "entrypoint")
	}
	if cp, ok := members["compactPods"]; ok {
		if err := json.Unmarshal(cp, &cfg.CompactPods); err != nil {
			return cfg, fmt.Errorf("Rego plugin config: compactPods must be a boolean: %w", err)
		}
		delete(members, "compactPods")
	}
	if wi, ok := members["wholeInput"]; ok {
		if err := json.Unmarshal(wi, &cfg.WholeInput); err != nil {
			return cfg, fmt.Errorf("Rego plugin config: wholeInput must be a boolean: %w", err)
		}
		delete(members, "wholeInput")
	}
	if params, ok := members["parameters"]; ok {
		cfg.Parameters = params
		return cfg, nil
	}
	b, err := json.Marshal(members)
	if err != nil {
		return cfg, fmt.Errorf("Rego plugin config: %w", err)
	}
	cfg.Parameters = b
	return cfg, nil
}

// opaRequestBuffer is the first capacity of an OPA instance's request buffer
// (inputBuffer): a pod create's request, whole, in most clusters.
const opaRequestBuffer = 4 << 10

// initOPA sets an OPA instance up: its builtins, its entrypoint, empty data, and the
// heap mark every evaluation starts from.
func (in *instance) initOPA(ctx context.Context) error {
	p := in.set.p
	o := &opaInstance{maxOut: p.limits.MaxOutputBytes, allowed: []byte(allowedAnswer)}
	in.reqBuf = make([]byte, 0, opaRequestBuffer)
	for i, name := range opaExports {
		o.fn[i] = in.mod.ExportedFunction(name)
		o.returns[i] = len(o.fn[i].Definition().ResultTypes()) > 0
	}
	in.opa = o
	cfg, err := parseOPAConfig(p.config)
	if err != nil {
		return &Error{Plugin: p.label, Hook: abi.HookConfigure, Kind: ErrConfigRejected, Err: err}
	}
	o.parameters = cfg.Parameters
	if !cfg.WholeInput {
		o.project = in.set.mod.e.regoInput
	}
	// A policy whose recorded reads of objects the object metadata document holds as
	// they are gets it without asking (opainput.go): the same values, written for less.
	switch {
	case o.project != nil && o.project.metadataSuffices():
		in.setFlags(abi.ConfigureResponse{ObjectMetadata: true}, nil)
	case cfg.CompactPods:
		in.setFlags(abi.ConfigureResponse{CompactPods: true}, nil)
	}
	if _, err := o.call1(ctx, opaMalloc, 0); err != nil { // the heap starts here
		return in.classify(ctx, err)
	}
	readMap := func(export opaExport) (map[string]int32, error) {
		addr, err := o.call1(ctx, export)
		if err != nil {
			return nil, in.classify(ctx, err)
		}
		js, err := o.dump(ctx, in, addr)
		if err != nil {
			return nil, in.classify(ctx, err)
		}
		m := map[string]int32{}
		if err := json.Unmarshal(js, &m); err != nil {
			return nil, &Error{Plugin: p.label, Kind: ErrInvalidModule, Err: fmt.Errorf("%s(): %w", export, err)}
		}
		return m, nil
	}
	builtins, err := readMap(opaBuiltins)
	if err != nil {
		return err
	}
	o.builtins = map[int32]opaBuiltin{}
	var missing []string
	for name, id := range builtins {
		if fn, ok := hostValueBuiltins[name]; ok {
			o.builtins[id] = opaBuiltin{name: name, values: fn}
			continue
		}
		fn, ok := hostBuiltins[name]
		if !ok {
			fn, ok = jwtVerifyBuiltins[name]
		}
		if !ok {
			missing = append(missing, name)
			continue
		}
		o.builtins[id] = opaBuiltin{name: name, fn: fn}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return &Error{Plugin: p.label, Kind: ErrInvalidModule, Err: fmt.Errorf("the policy uses builtins this host does not provide: %s (docs/plugins/rego.md lists those it provides beside the ones OPA compiles into WebAssembly)", strings.Join(missing, ", "))}
	}
	eps, err := readMap(opaEntrypoints)
	if err != nil {
		return err
	}
	switch {
	case cfg.Entrypoint != "":
		id, ok := eps[cfg.Entrypoint]
		if !ok {
			return &Error{Plugin: p.label, Hook: abi.HookConfigure, Kind: ErrConfigRejected, Err: fmt.Errorf("entrypoint %q is not in the module (it has %s)", cfg.Entrypoint, strings.Join(slices.Sorted(maps.Keys(eps)), ", "))}
		}
		o.entrypoint, o.entrypointID = cfg.Entrypoint, id
	case len(eps) == 1:
		for name, id := range eps {
			o.entrypoint, o.entrypointID = name, id
		}
	default:
		return &Error{Plugin: p.label, Hook: abi.HookConfigure, Kind: ErrConfigRejected, Err: fmt.Errorf("the module has %d entrypoints (%s): name one in the plugin's config as {\"entrypoint\": …}", len(eps), strings.Join(slices.Sorted(maps.Keys(eps)), ", "))}
	}
	if o.dataAddr, err = o.parse(ctx, in, []byte("{}")); err != nil {
		return in.classify(ctx, err)
	}
	if err := o.initEval(ctx, in); err != nil {
		return in.classify(ctx, err)
	}
	if o.evalHeap, err = o.call1(ctx, opaHeapPtrGet); err != nil {
		return in.classify(ctx, err)
	}
	o.oneShot = opaOneShotOf(in.mod)
	o.oneShotPays = o.project != nil && !(o.project.request && o.project.review)
	return nil
}

// opaOneShotOf returns the module's opa_eval when its ABI version says it has the
// signature evalOnce calls (ABI 1.2 and later), nil otherwise.
func opaOneShotOf(mod api.Module) api.Function {
	major, minor := mod.ExportedGlobal(opaABIVersion), mod.ExportedGlobal(opaABIMinorVersion)
	if major == nil || minor == nil || major.Get() != 1 || minor.Get() < 2 {
		return nil
	}
	fn := mod.ExportedFunction(opaOneShot)
	if fn == nil {
		return nil
	}
	d := fn.Definition()
	if len(d.ParamTypes()) != 7 || len(d.ResultTypes()) != 1 {
		return nil
	}
	return fn
}

// callOPA evaluates the policy on an admission request and answers as a validate hook
// does (sdk/ABI.md §7.3). The input is the request in the two shapes Rego policies for
// Kubernetes read: input.request (an AdmissionReview, as OPA's kube-mgmt passes it) and
// input.review (as Gatekeeper passes it), with input.parameters from the config.
func (in *instance) callOPA(ctx context.Context, hook string, req []byte, decode func([]byte) error) error {
	p := in.set.p
	o := in.opa
	if hook != abi.HookValidate {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrNotImplemented}
	}
	out, err := o.result(ctx, in, req)
	if err != nil {
		return err
	}
	return o.answer(p, hook, out, decode)
}

// result evaluates the policy on req (the request as the host encoded it) and returns the
// result set's JSON, in guest memory: valid until the guest runs again.
func (o *opaInstance) result(ctx context.Context, in *instance, req []byte) ([]byte, error) {
	p, hook := in.set.p, in.hook
	mem := in.mod.Memory()
	o.aborted, o.ev = "", opaEval{now: time.Now()}
	var addr uint32
	size := len(req)
	req, projected := o.request(req, in.shaped)
	// opa_eval reads an input it cannot parse as undefined, where the evaluation
	// context's opa_json_parse fails: it is given only a request the host wrote itself
	// (the projection), which is JSON.
	var err error
	if o.oneShot != nil && o.oneShotPays && projected {
		addr, err = o.evalOnce(ctx, in, req)
	} else {
		// Every evaluation starts from the same heap mark: what the last one allocated
		// is simply overwritten, as OPA's own SDK does.
		if _, err := o.call1(ctx, opaHeapPtrSet, uint64(o.evalHeap)); err != nil {
			return nil, in.classify(ctx, err)
		}
		addr, err = o.eval(ctx, in, req)
	}
	if err != nil {
		if o.aborted != "" {
			if strings.HasPrefix(o.aborted, "opa_malloc") { // its heap could not grow
				return nil, &Error{Plugin: p.label, Hook: hook, Kind: ErrOutOfMemory, Err: fmt.Errorf("memory limit of %d bytes reached with a %d-byte request (policy aborted: %s)", in.mem.max, size, o.aborted)}
			}
			return nil, &Error{Plugin: p.label, Hook: hook, Kind: ErrTrap, Err: fmt.Errorf("policy aborted: %s", o.aborted)}
		}
		return nil, in.classify(ctx, err)
	}
	out, ok := cBytes(mem, addr, p.limits.MaxOutputBytes)
	if !ok {
		return nil, &Error{Plugin: p.label, Hook: hook, Kind: ErrOutputTooLarge, Err: fmt.Errorf("result is not a string within %d bytes", p.limits.MaxOutputBytes)}
	}
	return out, nil
}

// answer hands the decision of a result set to decode: the usual one, a plain allow,
// without making an answer for it.
func (o *opaInstance) answer(p *Plugin, hook string, out []byte, decode func([]byte) error) error {
	answer := o.allowed
	if !opaPlainlyAllows(out) {
		var err error
		if answer, err = opaDecision(o.entrypoint, out); err != nil {
			return &Error{Plugin: p.label, Hook: hook, Kind: ErrBadOutput, Err: err}
		}
	}
	if err := decode(answer); err != nil {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrBadOutput, Err: err}
	}
	return nil
}

// initEval prepares, below the evaluation heap mark (so that it outlives every
// evaluation), the evaluation context with its data and entrypoint and the two paths the
// request is placed at.
func (o *opaInstance) initEval(ctx context.Context, in *instance) error {
	var err error
	if o.evalCtx, err = o.call1(ctx, opaEvalCtxNew); err != nil {
		return err
	}
	if _, err := o.call1(ctx, opaEvalCtxSetData, uint64(o.evalCtx), uint64(o.dataAddr)); err != nil {
		return err
	}
	if _, err := o.call1(ctx, opaEvalCtxSetEntrypoint, uint64(o.evalCtx), uint64(o.entrypointID)); err != nil {
		return err
	}
	if o.requestPath, err = o.parse(ctx, in, []byte(`["request"]`)); err != nil {
		return err
	}
	o.reviewPath, err = o.parse(ctx, in, []byte(`["review"]`))
	return err
}

// evalOnce evaluates the policy in one call of opa_eval, as OPA's own SDK does with a
// module that exports it: each crossing into the guest costs microseconds when the caches
// are cold, and the evaluation context's path (eval) crosses about ten times. The input
// document, with the (projected) request at input.request and input.review (only at
// those of the two the build recorded the policy reads), is written as one JSON text at
// the heap mark and opa_eval's heap starts past it, so every evaluation starts from the
// same heap address. It returns the address of the result set's JSON.
func (o *opaInstance) evalOnce(ctx context.Context, in *instance, req []byte) (uint32, error) {
	b := append(o.input[:0], opaInputHead...)
	b = append(b, o.parameters...)
	// Only a projected request comes here (result): the record names what the policy reads.
	if o.project.request {
		b = append(b, `,"request":`...)
		b = append(b, req...)
	}
	if o.project.review {
		b = append(b, `,"review":`...)
		b = append(b, req...)
	}
	b = append(b, '}')
	o.input = b
	mem := in.mod.Memory()
	addr := o.evalHeap
	heap := (uint64(addr) + uint64(len(b)) + 7) &^ 7
	if heap > uint64(mem.Size()) {
		// Only the guest's allocator grows the memory, so that its idea of the memory's
		// end stays right (and its refusal is the out-of-memory callOPA reports).
		if _, err := o.call1(ctx, opaHeapPtrSet, uint64(o.evalHeap)); err != nil {
			return 0, err
		}
		p, err := o.call1(ctx, opaMalloc, uint64(len(b)))
		if err != nil {
			return 0, err
		}
		// Exactly the allocation's end: the guest's allocator grew the memory to hold
		// it, not past it.
		addr, heap = p, uint64(p)+uint64(len(b))
	}
	if !mem.Write(addr, b) {
		return 0, fmt.Errorf("input [%#x, +%d) is outside memory", addr, len(b))
	}
	s := o.stack[:7]
	s[0], s[1], s[2], s[3], s[4], s[5], s[6] = 0, uint64(uint32(o.entrypointID)), uint64(o.dataAddr), uint64(addr), uint64(len(b)), heap, 0
	if err := o.oneShot.CallWithStack(ctx, s); err != nil {
		return 0, fmt.Errorf("%s: %w", opaOneShot, err)
	}
	return api.DecodeU32(s[0]), nil
}

// eval evaluates the policy through the evaluation context, with the request (as
// request returns it) parsed once: the input object (with the parameters) is parsed fresh
// above the heap mark, then the request's value is placed at input.request and
// input.review. The request is the larger part of the input, so this halves the parsing
// an evaluation does. It returns the address of the result set's JSON.
func (o *opaInstance) eval(ctx context.Context, in *instance, req []byte) (uint32, error) {
	head := make([]byte, 0, len(o.parameters)+96)
	head = append(head, opaInputHead...)
	head = append(head, o.parameters...)
	head = append(head, '}')
	input, err := o.parse(ctx, in, head)
	if err != nil {
		return 0, err
	}
	request, err := o.parse(ctx, in, req)
	if err != nil {
		return 0, err
	}
	for _, path := range []uint32{o.requestPath, o.reviewPath} {
		code, err := o.call1(ctx, opaValueAddPath, uint64(input), uint64(path), uint64(request))
		if err != nil {
			return 0, err
		}
		if code != 0 {
			return 0, fmt.Errorf("opa_value_add_path: error code %d", code)
		}
	}
	if _, err := o.call1(ctx, opaEvalCtxSetInput, uint64(o.evalCtx), uint64(input)); err != nil {
		return 0, err
	}
	if code, err := o.call1(ctx, opaEvalExport, uint64(o.evalCtx)); err != nil {
		return 0, err
	} else if code != 0 {
		return 0, fmt.Errorf("eval: error code %d", code)
	}
	rs, err := o.call1(ctx, opaEvalCtxGetResult, uint64(o.evalCtx))
	if err != nil {
		return 0, err
	}
	return o.call1(ctx, opaJSONDump, uint64(rs))
}

// request returns the request as the policy gets it: projected to what the policy may
// read (o.project), or whole; true when projected. A request written with only those
// members (shaped, RequestForm) is the projection already.
func (o *opaInstance) request(req []byte, shaped bool) ([]byte, bool) {
	if shaped {
		return req, true
	}
	if o.project != nil {
		if v := jsonview.Parse(req); v.Kind() == jsonview.Object {
			o.projected = o.project.project(o.projected[:0], v)
			return o.projected, true
		}
	}
	return req, false
}

// opaAllows tells whether an entrypoint's value plainly allows: an empty set or array of
// violations, true, or no value (undefined).
func opaAllows(v jsonview.Value) bool {
	switch v.Kind() {
	case jsonview.Missing, jsonview.Null:
		return true
	case jsonview.Array:
		return v.Len() == 0
	case jsonview.Bool:
		b, _ := v.Bool()
		return b
	}
	return false
}

// opaPlainlyAllows tells whether a result set holds the usual answer — an empty set of
// violations, a true allow rule, an undefined rule — recognised without encoding/json,
// whose reflection is cold when a request comes (opaDecision, which answer calls for
// every other result set, reads every shape).
func opaPlainlyAllows(out []byte) bool {
	rs := jsonview.Parse(out)
	if rs.Kind() != jsonview.Array {
		return false
	}
	first := rs.Index(0)
	return !first.Exists() || first.Kind() == jsonview.Object && opaAllows(first.Get("result"))
}

// opaDecision turns a result set into a validate answer. The entrypoint's value decides:
// a set or array of violations (strings, or objects with "msg" as Gatekeeper's violation
// rules give) denies when it is not empty; a boolean is an allow rule; an object with
// "response" is kube-mgmt's AdmissionReview answer; an undefined rule allows.
func opaDecision(entrypoint string, out []byte) ([]byte, error) {
	var rs []struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(out, &rs); err != nil {
		return nil, fmt.Errorf("result set of %s: %w", entrypoint, err)
	}
	// A refusal carries the code and reason every SDK's denial gives (sdk/ABI.md §7.3).
	type answer struct {
		Allowed bool   `json:"allowed"`
		Code    int    `json:"code,omitempty"`
		Reason  string `json:"reason,omitempty"`
		Message string `json:"message,omitempty"`
	}
	allow := func() ([]byte, error) { return json.Marshal(answer{Allowed: true}) }
	deny := func(msg string) ([]byte, error) {
		return json.Marshal(answer{Code: 403, Reason: "Forbidden", Message: msg})
	}
	if len(rs) == 0 || len(rs[0].Result) == 0 || string(rs[0].Result) == "null" {
		return allow()
	}
	v := rs[0].Result
	var list []json.RawMessage
	var b bool
	var review struct {
		Response *struct {
			Allowed bool `json:"allowed"`
			Status  struct {
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	switch {
	case json.Unmarshal(v, &list) == nil:
		if len(list) == 0 {
			return allow()
		}
		msgs := make([]string, 0, len(list))
		for _, item := range list {
			var s string
			var obj struct {
				Msg string `json:"msg"`
			}
			switch {
			case json.Unmarshal(item, &s) == nil:
				msgs = append(msgs, s)
			case json.Unmarshal(item, &obj) == nil && obj.Msg != "":
				msgs = append(msgs, obj.Msg)
			default:
				msgs = append(msgs, string(item))
			}
		}
		sort.Strings(msgs) // a set's order is the policy engine's, not the author's
		return deny(strings.Join(msgs, "; "))
	case json.Unmarshal(v, &b) == nil:
		if b {
			return allow()
		}
		return deny("denied by " + entrypoint)
	case json.Unmarshal(v, &review) == nil && review.Response != nil:
		if review.Response.Allowed {
			return allow()
		}
		msg := review.Response.Status.Message
		if msg == "" {
			msg = "denied by " + entrypoint
		}
		return deny(msg)
	}
	return nil, fmt.Errorf("%s evaluated to %.200s: want a set of violations, a boolean or an AdmissionReview", entrypoint, v)
}
