package wasm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// fuelExport names the global the host adds to every module it loads: a mutable i32 the
// guest counts down at every function entry and loop header (ABI §4.3). The host reads
// and refills it from its checkpoint function.
const fuelExport = "wasmplane.fuel"

// checkpointImport is the host function the instrumented code calls when its fuel runs
// out: wasmplane.checkpoint, () -> (). A module may not import it itself.
const checkpointImport = "checkpoint"

// fuelQuantum is the fuel a checkpoint hands the guest: the number of function entries
// and loop iterations between two returns into Go. A tight loop iteration costs about a
// nanosecond and a typical one some tens, so a quantum lasts from 0.1 to a few ms of
// guest work; one checkpoint costs about 0.2 µs (BenchmarkLoopTermination).
const fuelQuantum = 100_000

// Why checkpoints: wazero's compiled guest code is not Go code. The Go scheduler cannot
// preempt a goroutine running it (asynchronous preemption finds no safe point there), and
// a stop-the-world garbage collection waits for it. A host that relied on a goroutine of
// its own to stop overrunning guests (a watchdog) froze when guests held every P: the
// watchdog never ran, and even with a P free the next GC's stop-the-world waited for the
// spinning guests while it stopped everything else. So the guest must come back into Go
// by itself, often: the host rewrites each module once per digest so that every function
// entry and every loop header decrements a fuel global (a load, a subtraction, a store, a
// compare and a branch not taken), and when the fuel runs out calls the host's
// checkpoint. That Go function is a safe point (the scheduler preempts there and a GC
// can stop the world), refills the fuel, yields, and ends the call when its deadline has
// passed or its caller gave up. Deadlines hold without any other goroutine running.
//
// Why not wazero's WithCloseOnContextDone: its compiled code calls out to Go at every
// loop header to ask whether the module was closed (a tight loop ran 55× slower here) and
// it starts a goroutine per call (≈ 1 µs), which still needs a P to run.

// Instrument returns the module as the host compiles it (with the fuel checks), so that
// tools can fill a compilation cache the host will hit.
func Instrument(wasm []byte) ([]byte, error) { return instrument(wasm) }

// instrument returns the module with the fuel global, the checkpoint import and the
// checks added. The import is the last function import, so every function defined by
// the module moves up by one index: calls, ref.func, exports, the start function,
// element segments, constant expressions and the name section are renumbered. Type and
// global indices of the original code are unchanged (the new type and global are
// appended). DWARF sections, whose code offsets would go stale, are dropped.
func instrument(wasm []byte) ([]byte, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) || binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, errors.New("not a WebAssembly binary module (version 1)")
	}
	type section struct {
		id      byte
		payload []byte
	}
	var secs []section
	r := &wreader{b: wasm, off: 8}
	var imp importCounts
	var types, definedGlobals uint32
	for !r.eof() {
		id := r.byte()
		n := r.u32()
		payload := r.bytes(int(n))
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		switch id {
		case secCustom:
			name := (&wreader{b: payload}).name()
			if strings.HasPrefix(name, ".debug_") {
				continue
			}
		case secType:
			types = (&wreader{b: payload}).u32()
		case secImport:
			var err error
			if imp, err = countImports(payload); err != nil {
				return nil, fmt.Errorf("import section: %w", err)
			}
		case secGlobal:
			definedGlobals = (&wreader{b: payload}).u32()
		case secExport:
			if err := checkExportFree(payload, fuelExport); err != nil {
				return nil, err
			}
		}
		secs = append(secs, section{id, payload})
	}
	m := &rewrite{
		funcs:    imp.funcs,
		fuel:     imp.globals + definedGlobals,
		cpType:   types,
		cpFunc:   imp.funcs,
		newTypes: []byte{0x60, 0x00, 0x00}, // () -> ()
	}
	m.check = m.appendCheck(nil)

	out := make([]byte, 0, len(wasm)+len(wasm)/8+64)
	out = append(out, wasm[:8]...)
	emit := func(id byte, payload []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(payload)))
		out = append(out, payload...)
	}
	newGlobal := appendFuelGlobal(nil)
	done := map[byte]bool{}
	flush := func(before byte) {
		// Sections must stay in the order of the spec; add the type, import, global and
		// export where they belong if the module has no such section of its own.
		for _, id := range []byte{secType, secImport, secGlobal, secExport} {
			if done[id] || order(before) <= order(id) {
				continue
			}
			switch id {
			case secType:
				emit(id, append(binary.AppendUvarint(nil, 1), m.newTypes...))
			case secImport:
				emit(id, m.appendImport(binary.AppendUvarint(nil, 1)))
			case secGlobal:
				emit(id, append(binary.AppendUvarint(nil, 1), newGlobal...))
			case secExport:
				emit(id, appendExport(binary.AppendUvarint(nil, 1), m.fuel))
			}
			done[id] = true
		}
	}
	for _, s := range secs {
		if s.id != secCustom {
			flush(s.id)
		}
		var p []byte
		var err error
		switch s.id {
		case secType:
			p = appendCount(s.payload, 1, m.newTypes)
		case secImport:
			p = m.appendImport(appendCount(s.payload, 1, nil))
		case secTable:
			p, err = m.tables(s.payload)
		case secGlobal:
			p, err = m.globals(s.payload)
			p = appendCount(p, 1, newGlobal)
		case secExport:
			p, err = m.exports(s.payload)
			p = appendExport(appendCount(p, 1, nil), m.fuel)
		case secStart:
			rr := &wreader{b: s.payload}
			p = binary.AppendUvarint(nil, uint64(m.fn(rr.u32())))
			err = rr.err
		case secElement:
			p, err = m.elements(s.payload)
		case secCode:
			p, err = m.code(s.payload)
		case secCustom:
			p, err = m.custom(s.payload)
		default:
			p = s.payload
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, err)
		}
		done[s.id] = true
		emit(s.id, p)
	}
	flush(0xff)
	return out, nil
}

const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secTable     = 4
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secDataCount = 12
	secTag       = 13
)

// order is a section's rank in the binary format's section order.
func order(id byte) int {
	switch id {
	case secTag:
		return 55 // between memory (5) and global (6)
	case secDataCount:
		return 95 // between element (9) and code (10)
	case 0xff:
		return 1 << 10
	}
	return int(id) * 10
}

// rewrite is what instrument adds to a module and how it renumbers functions.
type rewrite struct {
	funcs    uint32 // function imports of the original module
	fuel     uint32 // index of the fuel global
	cpType   uint32 // index of the checkpoint's type
	cpFunc   uint32 // index of the checkpoint import
	newTypes []byte
	check    []byte
}

// fn maps a function index of the original module to the instrumented one.
func (m *rewrite) fn(i uint32) uint32 {
	if i >= m.funcs {
		return i + 1
	}
	return i
}

// appendCheck appends the code run at each function entry and loop header:
//
//	global.get $fuel; i32.const 1; i32.sub; global.set $fuel
//	global.get $fuel; i32.const 0; i32.le_s; if; call $checkpoint; end
func (m *rewrite) appendCheck(b []byte) []byte {
	g := binary.AppendUvarint(nil, uint64(m.fuel))
	b = append(append(b, 0x23), g...)
	b = append(b, 0x41, 0x01, 0x6b, 0x24)
	b = append(b, g...)
	b = append(append(b, 0x23), g...)
	b = append(b, 0x41, 0x00, 0x4c, 0x04, 0x40, 0x10)
	b = binary.AppendUvarint(b, uint64(m.cpFunc))
	return append(b, 0x0b)
}

func (m *rewrite) appendImport(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(abi.HostModule)))
	b = append(b, abi.HostModule...)
	b = binary.AppendUvarint(b, uint64(len(checkpointImport)))
	b = append(b, checkpointImport...)
	b = append(b, 0x00) // func
	return binary.AppendUvarint(b, uint64(m.cpType))
}

func appendFuelGlobal(b []byte) []byte {
	b = append(b, 0x7f, 0x01, 0x41) // mut i32 = i32.const fuelQuantum
	b = binary.AppendVarint(b, fuelQuantum)
	return append(b, 0x0b)
}

func appendExport(b []byte, gidx uint32) []byte {
	b = binary.AppendUvarint(b, uint64(len(fuelExport)))
	b = append(b, fuelExport...)
	b = append(b, 0x03) // global
	return binary.AppendUvarint(b, uint64(gidx))
}

// appendCount returns a vector section's payload with its count raised by add and extra
// appended.
func appendCount(p []byte, add uint32, extra []byte) []byte {
	r := &wreader{b: p}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(p)+len(extra)+5), uint64(n+add))
	out = append(out, p[r.off:]...)
	return append(out, extra...)
}

type importCounts struct{ funcs, globals uint32 }

func countImports(p []byte) (importCounts, error) {
	r := &wreader{b: p}
	n := r.u32()
	var c importCounts
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod := r.name()
		name := r.name()
		if mod == abi.HostModule && name == checkpointImport {
			return c, fmt.Errorf("module imports %s.%s, a function only the host may add", mod, name)
		}
		kind := r.byte()
		if !r.importDesc(kind) {
			return c, fmt.Errorf("import %d: unknown kind %#x", i, kind)
		}
		switch kind {
		case 0x00:
			c.funcs++
		case 0x03:
			c.globals++
		}
	}
	return c, r.err
}

func checkExportFree(p []byte, name string) error {
	r := &wreader{b: p}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if r.name() == name {
			return fmt.Errorf("module exports %q, a name the host reserves", name)
		}
		r.byte()
		r.u32()
	}
	return r.err
}

// exports renumbers exported functions.
func (m *rewrite) exports(p []byte) ([]byte, error) {
	r := &wreader{b: p}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(p)+8), uint64(n))
	for i := uint32(0); i < n && r.err == nil; i++ {
		from := r.off
		r.name()
		kind := r.byte()
		out = append(out, p[from:r.off]...)
		idx := r.u32()
		if kind == 0x00 {
			idx = m.fn(idx)
		}
		out = binary.AppendUvarint(out, uint64(idx))
	}
	if r.err == nil && !r.eof() {
		return nil, errors.New("trailing bytes")
	}
	return out, r.err
}

// constExpr copies a constant expression up to and including its end, renumbering
// ref.func.
func (m *rewrite) constExpr(out []byte, r *wreader) ([]byte, error) {
	from := r.off
	for {
		if r.eof() {
			return nil, errors.New("constant expression without end")
		}
		op := r.byte()
		if op == 0x0b {
			return append(out, r.b[from:r.off]...), nil
		}
		if op == 0xd2 { // ref.func
			out = append(out, r.b[from:r.off]...)
			out = binary.AppendUvarint(out, uint64(m.fn(r.u32())))
			from = r.off
			continue
		}
		if err := r.immediates(op); err != nil {
			return nil, err
		}
	}
}

// globals renumbers ref.func in the initializers of the module's globals.
func (m *rewrite) globals(p []byte) ([]byte, error) {
	r := &wreader{b: p}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(p)+16), uint64(n))
	for i := uint32(0); i < n && r.err == nil; i++ {
		from := r.off
		r.valtype()
		r.byte()
		out = append(out, p[from:r.off]...)
		var err error
		if out, err = m.constExpr(out, r); err != nil {
			return nil, fmt.Errorf("global %d: %w", i, err)
		}
	}
	return out, r.err
}

// tables renumbers ref.func in table initializers (the 0x40 0x00 form).
func (m *rewrite) tables(p []byte) ([]byte, error) {
	r := &wreader{b: p}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(p)), uint64(n))
	for i := uint32(0); i < n && r.err == nil; i++ {
		from := r.off
		withInit := r.off+1 < len(p) && p[r.off] == 0x40 && p[r.off+1] == 0x00
		if withInit {
			r.off += 2
		}
		r.reftype()
		r.limits()
		out = append(out, p[from:r.off]...)
		if withInit {
			var err error
			if out, err = m.constExpr(out, r); err != nil {
				return nil, fmt.Errorf("table %d: %w", i, err)
			}
		}
	}
	return out, r.err
}

// elements renumbers the function indices and expressions of element segments.
func (m *rewrite) elements(p []byte) ([]byte, error) {
	r := &wreader{b: p}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(p)+16), uint64(n))
	for i := uint32(0); i < n && r.err == nil; i++ {
		flags := r.u32()
		if flags > 7 {
			return nil, fmt.Errorf("element %d: unknown flags %d", i, flags)
		}
		out = binary.AppendUvarint(out, uint64(flags))
		var err error
		if flags&1 == 0 { // active: [table index] offset expression
			if flags&2 != 0 {
				out = binary.AppendUvarint(out, uint64(r.u32()))
			}
			if out, err = m.constExpr(out, r); err != nil {
				return nil, fmt.Errorf("element %d offset: %w", i, err)
			}
		}
		exprs := flags&4 != 0
		if flags&3 != 0 { // an elemkind (indices) or a reference type (expressions)
			from := r.off
			if exprs {
				r.reftype()
			} else {
				r.byte()
			}
			out = append(out, p[from:r.off]...)
		}
		k := r.u32()
		out = binary.AppendUvarint(out, uint64(k))
		for j := uint32(0); j < k && r.err == nil; j++ {
			if exprs {
				if out, err = m.constExpr(out, r); err != nil {
					return nil, fmt.Errorf("element %d item %d: %w", i, j, err)
				}
			} else {
				out = binary.AppendUvarint(out, uint64(m.fn(r.u32())))
			}
		}
	}
	if r.err == nil && !r.eof() {
		return nil, errors.New("trailing bytes")
	}
	return out, r.err
}

// custom renumbers the function names, local names and label names of the name section
// (subsections 1, 2 and 3, all keyed by function index); other custom sections and
// subsections are copied.
func (m *rewrite) custom(p []byte) ([]byte, error) {
	r := &wreader{b: p}
	if r.name() != "name" || r.err != nil {
		return p, nil
	}
	out := append(make([]byte, 0, len(p)+8), p[:r.off]...)
	for !r.eof() {
		id := r.byte()
		size := r.u32()
		sub := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("name section: %w", r.err)
		}
		if id >= 1 && id <= 3 {
			var err error
			if sub, err = m.nameMap(sub, id != 1); err != nil {
				return nil, fmt.Errorf("name subsection %d: %w", id, err)
			}
		}
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(sub)))
		out = append(out, sub...)
	}
	return out, nil
}

// nameMap renumbers the function indices of a name map, or of an indirect name map
// (whose inner maps are copied).
func (m *rewrite) nameMap(p []byte, indirect bool) ([]byte, error) {
	r := &wreader{b: p}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(p)+8), uint64(n))
	for i := uint32(0); i < n && r.err == nil; i++ {
		out = binary.AppendUvarint(out, uint64(m.fn(r.u32())))
		from := r.off
		if indirect {
			k := r.u32()
			for j := uint32(0); j < k && r.err == nil; j++ {
				r.u32()
				r.name()
			}
		} else {
			r.name()
		}
		out = append(out, p[from:r.off]...)
	}
	if r.err == nil && !r.eof() {
		return nil, errors.New("trailing bytes")
	}
	return out, r.err
}

// code copies the code section, adding the check at each function's entry and at the
// start of each loop body, and renumbering calls and ref.func.
func (m *rewrite) code(p []byte) ([]byte, error) {
	r := &wreader{b: p}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(p)+len(p)/4), uint64(n))
	var body []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		fb := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", i, r.err)
		}
		var err error
		body, err = m.body(body[:0], fb)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	if !r.eof() {
		return nil, errors.New("trailing bytes")
	}
	return out, nil
}

func (m *rewrite) body(out, fb []byte) ([]byte, error) {
	r := &wreader{b: fb}
	groups := r.u32()
	for i := uint32(0); i < groups && r.err == nil; i++ {
		r.u32()
		r.valtype()
	}
	if r.err != nil {
		return nil, fmt.Errorf("locals: %w", r.err)
	}
	out = append(out, fb[:r.off]...)
	out = append(out, m.check...)
	from := r.off
	for !r.eof() {
		op := r.byte()
		switch op {
		case 0x10, 0x12, 0xd2: // call return_call ref.func
			out = append(out, fb[from:r.off]...)
			out = binary.AppendUvarint(out, uint64(m.fn(r.u32())))
			from = r.off
			continue
		}
		if err := r.immediates(op); err != nil {
			return nil, fmt.Errorf("at byte %d: %w", r.off, err)
		}
		if op == 0x03 { // loop: check at the top of every iteration
			out = append(out, fb[from:r.off]...)
			out = append(out, m.check...)
			from = r.off
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(out, fb[from:]...), nil
}

// wreader decodes the binary format; the first error sticks and zeroes later reads.
type wreader struct {
	b   []byte
	off int
	err error
}

func (r *wreader) eof() bool { return r.err != nil || r.off >= len(r.b) }

func (r *wreader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.off = len(r.b)
}

func (r *wreader) byte() byte {
	if r.off >= len(r.b) {
		r.fail(errors.New("unexpected end"))
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *wreader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.off {
		r.fail(errors.New("unexpected end"))
		return nil
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b
}

// leb skips one LEB128 number of at most max bytes and returns its low 64 bits.
func (r *wreader) leb(max int) uint64 {
	var v uint64
	for i := 0; i < max; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if i < 10 {
			v |= uint64(c&0x7f) << (7 * i)
		}
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(errors.New("LEB128 number too long"))
	return 0
}

func (r *wreader) u32() uint32 { return uint32(r.leb(5)) }

func (r *wreader) name() string {
	n := r.u32()
	return string(r.bytes(int(n)))
}

func (r *wreader) valtype() {
	if c := r.byte(); c == 0x63 || c == 0x64 { // (ref null? ht)
		r.leb(5)
	}
}

func (r *wreader) reftype() { r.valtype() }

func (r *wreader) limits() {
	flags := r.byte()
	r.leb(10)
	if flags&1 != 0 {
		r.leb(10)
	}
}

func (r *wreader) blocktype() {
	// 0x40, a value type, or a type index as a signed 33-bit LEB128.
	if r.off < len(r.b) && (r.b[r.off] == 0x63 || r.b[r.off] == 0x64) {
		r.valtype()
		return
	}
	r.leb(5)
}

func (r *wreader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory: a memory index follows
		r.u32()
	}
	r.leb(10)
}

// immediates skips the immediates of opcode op. It knows the core spec with the
// proposals wazero 1.12 accepts (bulk memory, reference types, SIMD, threads, tail
// calls, exception handling); anything else is an error, never a guess.
func (r *wreader) immediates(op byte) error {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04 || op == 0x06: // block loop if try
		r.blocktype()
	case op == 0x1f: // try_table
		r.blocktype()
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			switch r.byte() {
			case 0x00, 0x01:
				r.u32()
				r.u32()
			case 0x02, 0x03:
				r.u32()
			default:
				return errors.New("unknown try_table catch kind")
			}
		}
	case op == 0x07 || op == 0x08 || op == 0x09 || op == 0x18: // catch throw rethrow delegate
		r.u32()
	case op == 0x0c || op == 0x0d: // br br_if
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x10 || op == 0x12 || op == 0x14 || op == 0x15: // call return_call call_ref return_call_ref
		r.u32()
	case op == 0x11 || op == 0x13: // call_indirect return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			r.valtype()
		}
	case op >= 0x20 && op <= 0x26: // locals, globals, table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.memarg()
	case op == 0x3f || op == 0x40: // memory.size memory.grow
		r.u32()
	case op == 0x41:
		r.leb(5)
	case op == 0x42:
		r.leb(10)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op <= 0x01 || op == 0x05 || op == 0x0a || op == 0x0b || op == 0x0f || op == 0x19 || op == 0x1a || op == 0x1b:
		// no immediates: unreachable nop else throw_ref end return catch_all drop select
	case op >= 0x45 && op <= 0xc4: // numeric
	case op == 0xd0: // ref.null ht
		r.valtype()
	case op == 0xd1 || op == 0xd3 || op == 0xd4: // ref.is_null ref.eq ref.as_non_null
	case op == 0xd2 || op == 0xd5 || op == 0xd6: // ref.func br_on_null br_on_non_null
		r.u32()
	case op == 0xfc:
		return r.miscImmediates(r.u32())
	case op == 0xfd:
		return r.simdImmediates(r.u32())
	case op == 0xfe:
		if sub := r.u32(); sub == 0x03 { // atomic.fence
			r.byte()
		} else {
			r.memarg()
		}
	default:
		return fmt.Errorf("unknown opcode %#x", op)
	}
	return r.err
}

func (r *wreader) miscImmediates(sub uint32) error {
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8 || sub == 10 || sub == 12 || sub == 14: // memory.init memory.copy table.init table.copy
		r.u32()
		r.u32()
	case sub <= 17: // data.drop memory.fill elem.drop table.grow table.size table.fill
		r.u32()
	default:
		return fmt.Errorf("unknown opcode 0xfc %d", sub)
	}
	return r.err
}

func (r *wreader) simdImmediates(sub uint32) error {
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads, stores, load_zero
		r.memarg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		r.byte()
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		r.memarg()
		r.byte()
	case sub <= 0x113: // every other SIMD and relaxed-SIMD instruction has none
	default:
		return fmt.Errorf("unknown opcode 0xfd %d", sub)
	}
	return r.err
}
