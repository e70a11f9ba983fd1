#include "textflag.h"

// The scanners of scan_wasm.go, written in WebAssembly: Go's WebAssembly back end turns
// every branch of a Go loop into a jump through the function's dispatch table, so a Go
// loop over the bytes of a request costs several times what these plain WebAssembly
// loops do, and much more with the caches cold.
//
// Registers: R0 the base of b, R1 len(b), R4 the index being read, R7 the byte (or word)
// there, R9 a nesting depth or a start, R11 and R12 scratch; getAsm and isAsm also use R2
// and R3 (the key or string), R5 and R8 (a raw key's start and end), R6 (a key's bytes
// or'ed together, or whether a string is equal so far), R10, R14 and R15.

// LOAD_B pushes b[R4] as an i64.
#define LOAD_B Get R0; Get R4; I64Add; I32WrapI64; I64Load8U $0

// LOAD_SLICE sets R0 and R1 to the base and length of the argument b.
#define LOAD_SLICE I64Load b_base+0(FP); Set R0; I64Load b_len+8(FP); Set R1

// NEXT moves R4 to the next byte.
#define NEXT Get R4; I64Const $1; I64Add; Set R4

// EXPECT branches to OUT unless b[R4] is the byte C.
#define EXPECT(C, OUT) Get R4; Get R1; I64GeU; BrIf OUT; LOAD_B; I64Const C; I64Ne; BrIf OUT

// IS_SPACE pushes whether R7 is JSON whitespace, as an i32.
#define IS_SPACE \
	Get R7; I64Const $32; I64Eq; \
	Get R7; I64Const $9; I64Eq; I32Or; \
	Get R7; I64Const $10; I64Eq; I32Or; \
	Get R7; I64Const $13; I64Eq; I32Or

// ENDS_SCALAR pushes whether R7 ends a number or literal, as an i32.
#define ENDS_SCALAR \
	IS_SPACE; \
	Get R7; I64Const $44; I64Eq; I32Or; \
	Get R7; I64Const $125; I64Eq; I32Or; \
	Get R7; I64Const $93; I64Eq; I32Or

// SCAN_UNTIL moves R4 forward, R7 holding each byte, until STOP (an i32) is true or the
// end of b; STOP may also end the scan itself with BrIf $1.
#define SCAN_UNTIL(STOP) \
	Block; \
	Loop; \
	Get R4; Get R1; I64GeU; BrIf $1; \
	LOAD_B; Set R7; \
	STOP; BrIf $1; \
	NEXT; \
	Br $0; \
	End; \
	End

// SKIP_SPACE moves R4 past JSON whitespace. A byte above ' ' is not whitespace: tested
// first, it ends the loop at once in the usual case, JSON without spaces.
#define SKIP_SPACE SCAN_UNTIL(Get R7; I64Const $32; I64GtU; BrIf $1; IS_SPACE; I32Eqz)

// MARK_BYTE(C) pushes R7, a word of eight bytes, with the high bit of each byte equal to
// C set (and maybe of bytes after one); it uses R11.
#define MARK_BYTE(C) \
	Get R7; I64Const C; I64Xor; Set R11; \
	Get R11; I64Const $0x0101010101010101; I64Sub; \
	Get R11; I64Const $-1; I64Xor; I64And; \
	I64Const $-0x7f7f7f7f7f7f7f80; I64And

// SKIP_STRING moves R4 from the opening quote of a string past its closing quote, or sets
// it to -1 if the string does not end. While eight bytes are left it reads them as one
// word: if none is a quote or a backslash it moves past all eight, else to the first of
// them (the lowest marked byte: a borrow marks only bytes after a real one).
#define SKIP_STRING \
	NEXT; \
	Block; \
	Loop; \
	Get R4; I64Const $8; I64Add; Get R1; I64LeU; If; \
	Get R0; Get R4; I64Add; I32WrapI64; I64Load $0; Set R7; \
	MARK_BYTE($0x2222222222222222); MARK_BYTE($0x5c5c5c5c5c5c5c5c); I64Or; Set R12; \
	Get R12; I64Eqz; If; Get R4; I64Const $8; I64Add; Set R4; Br $2; End; \
	Get R4; Get R12; I64Ctz; I64Const $3; I64ShrU; I64Add; Set R4; \
	End; \
	Get R4; Get R1; I64GeU; If; I64Const $-1; Set R4; Br $2; End; \
	LOAD_B; Set R7; \
	Get R7; I64Const $34; I64Eq; If; NEXT; Br $2; End; \
	Get R4; I64Const $1; I64Add; Get R7; I64Const $92; I64Eq; I64ExtendI32U; I64Add; Set R4; \
	Br $0; \
	End; \
	End

// SKIP_VALUE moves R4 from the start of a JSON value past its end, or sets it to -1 where
// skipValueGo fails.
#define SKIP_VALUE \
	Block; \
	Get R4; Get R1; I64GeU; If; I64Const $-1; Set R4; Br $1; End; \
	LOAD_B; Set R7; \
	Get R7; I64Const $34; I64Eq; If; SKIP_STRING; Br $1; End; \
	Get R7; I64Const $123; I64Eq; Get R7; I64Const $91; I64Eq; I32Or; If; \
	I64Const $0; Set R9; \
	Loop; \
	Get R4; Get R1; I64GeU; If; I64Const $-1; Set R4; Br $3; End; \
	LOAD_B; Set R7; \
	Get R7; I64Const $34; I64Eq; If; SKIP_STRING; Get R4; I64Const $0; I64LtS; BrIf $3; Br $1; End; \
	Get R7; I64Const $123; I64Eq; Get R7; I64Const $91; I64Eq; I32Or; If; Get R9; I64Const $1; I64Add; Set R9; End; \
	Get R7; I64Const $125; I64Eq; Get R7; I64Const $93; I64Eq; I32Or; If; \
	Get R9; I64Const $1; I64Sub; Tee R9; I64Eqz; If; NEXT; Br $4; End; \
	End; \
	NEXT; \
	Br $0; \
	End; \
	End; \
	Get R4; Set R9; \
	SCAN_UNTIL(ENDS_SCALAR); \
	Get R4; Get R9; I64Eq; If; I64Const $-1; Set R4; End; \
	End

// func skipAsm(b []byte, i int) int
TEXT ·skipAsm(SB), NOSPLIT, $0-40
	LOAD_SLICE
	I64Load i+24(FP); Set R4
	SKIP_VALUE
	Get SP; Get R4; I64Store ret+32(FP)
	RET

// func getAsm(b []byte, key string) (start, end int)
TEXT ·getAsm(SB), NOSPLIT, $0-56
	LOAD_SLICE
	I64Load key_base+24(FP); Set R2
	I64Load key_len+32(FP); Set R3
	I64Const $-1; Set R15

	Block
	// Not an object: not found.
	I64Const $0; Set R4
	EXPECT($123, $0)
	NEXT
	SKIP_SPACE

	// One member per iteration; R4 is where its key should start.
	Loop
	EXPECT($34, $1)

	// The key: R5 its first byte, R8 its closing quote, R6 its bytes or'ed together
	// (with 0x80 if it has an escape).
	NEXT
	Get R4; Set R5
	I64Const $0; Set R6
	Block
	Loop
	Get R4; Get R1; I64GeU; BrIf $3
	LOAD_B; Set R7
	Get R7; I64Const $34; I64Eq; BrIf $1
	Get R6; Get R7; I64Or; Set R6
	Get R7; I64Const $92; I64Eq
	If
	Get R6; I64Const $128; I64Or; Set R6
	NEXT
	End
	NEXT
	Br $0
	End
	End
	Get R4; Set R8
	NEXT
	SKIP_SPACE
	EXPECT($58, $1)
	NEXT
	SKIP_SPACE
	Get R4; Get R1; I64GeU; BrIf $1

	// A key with escapes or non-ASCII bytes is compared by the Go code.
	Get R6; I64Const $128; I64GeU
	If
	I64Const $-2; Set R15
	Br $2
	End

	// The key matches if it has key's length and bytes.
	Get R8; Get R5; I64Sub; Get R3; I64Eq
	If
	I64Const $0; Set R10
	Block
	Loop
	Get R10; Get R3; I64GeU
	If
	Get R4; Set R15
	Br $5
	End
	Get R0; Get R5; I64Add; Get R10; I64Add; I32WrapI64; I64Load8U $0
	Get R2; Get R10; I64Add; I32WrapI64; I64Load8U $0
	I64Ne; BrIf $1
	Get R10; I64Const $1; I64Add; Set R10
	Br $0
	End
	End
	End

	// Not this member: past its value and the comma after it.
	SKIP_VALUE
	Get R4; I64Const $0; I64LtS; BrIf $1
	SKIP_SPACE
	EXPECT($44, $1)
	NEXT
	SKIP_SPACE
	Br $0
	End
	End

	// The member's end: -1 for an object or array, -2 if the value does not end.
	I64Const $-1; Set R14
	Get R15; I64Const $0; I64GeS
	If
	Get R15; Set R4
	LOAD_B; Set R7
	Get R7; I64Const $123; I64Ne; Get R7; I64Const $91; I64Ne; I32And
	If
	SKIP_VALUE
	Get R4; Set R14
	Get R14; I64Const $0; I64LtS
	If
	I64Const $-2; Set R14
	End
	End
	End

	Get SP; Get R15; I64Store start+40(FP)
	Get SP; Get R14; I64Store end+48(FP)
	RET

// func isAsm(b []byte, s string) int
TEXT ·isAsm(SB), NOSPLIT, $0-48
	LOAD_SLICE
	I64Load s_base+24(FP); Set R2
	I64Load s_len+32(FP); Set R3
	I64Const $0; Set R15

	Block
	// Not a string: false.
	I64Const $0; Set R4
	Get R1; I64Const $2; I64LtU; BrIf $0
	EXPECT($34, $0)

	// R6: whether the body so far equals s; R10 the index in s.
	Get R1; I64Const $2; I64Sub; Get R3; I64Eq; I64ExtendI32U; Set R6
	I64Const $0; Set R10
	NEXT
	Block
	Loop
	Get R4; Get R1; I64Const $1; I64Sub; I64GeU; BrIf $1
	LOAD_B; Set R7
	// An escape or a byte outside ASCII: the Go code decides.
	Get R7; I64Const $92; I64Eq; Get R7; I64Const $128; I64GeU; I32Or
	If
	I64Const $-2; Set R15
	Br $3
	End
	Get R6; I64Eqz; I32Eqz
	If
	Get R7; Get R2; Get R10; I64Add; I32WrapI64; I64Load8U $0; I64Eq; I64ExtendI32U; Set R6
	End
	Get R10; I64Const $1; I64Add; Set R10
	NEXT
	Br $0
	End
	End
	Get R6; Set R15
	End

	Get SP; Get R15; I64Store ret+40(FP)
	RET
