package wasm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// interruptExport names the global the host adds to every module it loads: a mutable i32
// the host sets from its watchdog to stop a guest that overran its deadline (ABI §4.3).
const interruptExport = "wasmplane.interrupt"

// Why not wazero's WithCloseOnContextDone: its compiled code calls out to Go at every
// loop header to ask whether the module was closed (a tight loop ran 55× slower here)
// and it starts a goroutine per call (≈ 1 µs). Instead the host rewrites the module once
// per digest so that every function entry and every loop header reads one global and
// traps when it is set — a load and a branch, about a cycle when not taken — and one
// watchdog goroutine per runtime sets that global when a call overruns.

// Instrument returns the module as the host compiles it (with the interrupt checks), so
// that tools can fill a compilation cache the host will hit.
func Instrument(wasm []byte) ([]byte, error) { return instrument(wasm) }

// instrument returns the module with the interrupt global and checks added. Function,
// global and type indices of the original code are unchanged (the global is appended),
// so branch depths, calls and the name section stay valid; DWARF sections, whose code
// offsets would go stale, are dropped.
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
	importedGlobals, definedGlobals := uint32(0), uint32(0)
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
		case secImport:
			g, err := countImportedGlobals(payload)
			if err != nil {
				return nil, fmt.Errorf("import section: %w", err)
			}
			importedGlobals = g
		case secGlobal:
			definedGlobals = (&wreader{b: payload}).u32()
		case secExport:
			if err := checkExportFree(payload, interruptExport); err != nil {
				return nil, err
			}
		}
		secs = append(secs, section{id, payload})
	}
	gidx := importedGlobals + definedGlobals
	check := appendCheck(nil, gidx)

	out := make([]byte, 0, len(wasm)+len(wasm)/16+64)
	out = append(out, wasm[:8]...)
	emit := func(id byte, payload []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(payload)))
		out = append(out, payload...)
	}
	newGlobal := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b} // mut i32 = i32.const 0
	globalDone, exportDone := false, false
	flush := func(before byte) {
		// Sections must stay in the order of the spec; add the global and the export
		// where they belong if the module has no such section of its own.
		if !globalDone && order(before) > order(secGlobal) {
			emit(secGlobal, append(binary.AppendUvarint(nil, 1), newGlobal...))
			globalDone = true
		}
		if !exportDone && order(before) > order(secExport) {
			emit(secExport, appendExport(binary.AppendUvarint(nil, 1), gidx))
			exportDone = true
		}
	}
	for _, s := range secs {
		if s.id != secCustom {
			flush(s.id)
		}
		switch s.id {
		case secGlobal:
			r := &wreader{b: s.payload}
			n := r.u32()
			p := binary.AppendUvarint(nil, uint64(n)+1)
			p = append(p, s.payload[r.off:]...)
			emit(s.id, append(p, newGlobal...))
			globalDone = true
		case secExport:
			r := &wreader{b: s.payload}
			n := r.u32()
			p := binary.AppendUvarint(nil, uint64(n)+1)
			p = append(p, s.payload[r.off:]...)
			emit(s.id, appendExport(p, gidx))
			exportDone = true
		case secCode:
			p, err := instrumentCode(s.payload, check)
			if err != nil {
				return nil, fmt.Errorf("code section: %w", err)
			}
			emit(s.id, p)
		default:
			emit(s.id, s.payload)
		}
	}
	flush(0xff)
	return out, nil
}

const (
	secCustom    = 0
	secImport    = 2
	secGlobal    = 6
	secExport    = 7
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

func appendCheck(b []byte, gidx uint32) []byte {
	b = append(b, 0x23) // global.get
	b = binary.AppendUvarint(b, uint64(gidx))
	return append(b, 0x04, 0x40, 0x00, 0x0b) // if (empty) unreachable end
}

func appendExport(b []byte, gidx uint32) []byte {
	b = binary.AppendUvarint(b, uint64(len(interruptExport)))
	b = append(b, interruptExport...)
	b = append(b, 0x03) // global
	return binary.AppendUvarint(b, uint64(gidx))
}

func countImportedGlobals(p []byte) (uint32, error) {
	r := &wreader{b: p}
	n := r.u32()
	var globals uint32
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
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
			globals++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			return 0, fmt.Errorf("import %d: unknown kind %#x", i, kind)
		}
	}
	return globals, r.err
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

// instrumentCode copies the code section, adding check at each function's entry and at
// the start of each loop body.
func instrumentCode(p []byte, check []byte) ([]byte, error) {
	r := &wreader{b: p}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(p)+len(p)/8), uint64(n))
	var body []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		fb := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", i, r.err)
		}
		var err error
		body, err = instrumentBody(body[:0], fb, check)
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

func instrumentBody(out, fb, check []byte) ([]byte, error) {
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
	out = append(out, check...)
	from := r.off
	for !r.eof() {
		op := r.byte()
		if err := r.immediates(op); err != nil {
			return nil, fmt.Errorf("at byte %d: %w", r.off, err)
		}
		if op == 0x03 { // loop: check at the top of every iteration
			out = append(out, fb[from:r.off]...)
			out = append(out, check...)
			from = r.off
		}
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
